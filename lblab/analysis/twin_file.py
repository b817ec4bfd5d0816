"""``RESULTS_DIR/twin/twin.json``: the twin's report, one writer and one reader.

``simulator/twin/build.py`` writes it (``save_twin``); the report, the docs' results page
and ``lblab twin`` read it (``load_twin``). ``TWIN_SCHEMA_VERSION`` is written as
``schema_version``. A file without it was written before the field existed: it is read
as version 1, whose cells named their flagged validity checks ``harness_checks`` (now
``validity``, the checks' one name). A version this lblab does not know (a newer lblab
wrote it) or a file that is not a twin report is refused with an error that names the
file and says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically

TWIN_JSON = Path("twin") / "twin.json"
TWIN_SCHEMA_VERSION = 2
_FIRST_VERSION = 1
_REBUILD = "rebuild it with `lblab twin RUN`"


def save_twin(path: Path, report: Mapping[str, Any]) -> Path:
    """Write ``report`` to ``path`` whole or not at all, stamped with the version."""
    data = {"schema_version": TWIN_SCHEMA_VERSION, **report}
    write_bytes_atomically(path, (json.dumps(data, indent=2) + "\n").encode())
    return path


def load_twin(path: Path) -> dict[str, Any]:
    """``path`` read as the current version; ``ConfigError`` naming it when it cannot be."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}); {_REBUILD}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); {_REBUILD}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ConfigError(f"{path}: not a twin report (no cells); {_REBUILD}")
    version = data.get("schema_version", _FIRST_VERSION)
    if version == _FIRST_VERSION:
        for cell in data["cells"]:
            if isinstance(cell, dict) and "harness_checks" in cell:
                cell["validity"] = cell.pop("harness_checks")
        data["schema_version"] = TWIN_SCHEMA_VERSION
    elif version != TWIN_SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: twin report schema version {version!r}, but this lblab reads "
            f"{_FIRST_VERSION} to {TWIN_SCHEMA_VERSION}: read it with the lblab that wrote "
            f"it, or {_REBUILD}"
        )
    return data
