"""What ``lblab ui`` and its Locust process tell each other (no Locust import here: the
``lblab ui`` process must not be monkey-patched by gevent).

``lblab ui`` passes a ``UiSession`` as ``--lblab-ui JSON``; the Locust process writes a
note per phase into ``phase_notes(run_dir)`` as ``phase-NNN.json`` (atomically replaced):
``index, key, scenario, strategy, strategy_options, replication, seed, load, start,
end`` (``end`` null while the phase runs) and ``load_end`` (when Stop was pressed, or
the switch; users then finish their requests until ``end``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

USER_STRATEGIES_ENV = "LBLAB_UI_USER_STRATEGIES"
"""The environment variable that names the session's own strategies (its config's
``[strategy_specs]``), comma separated, to the Locust process's form: the session's
balancer has loaded them, so the form offers them beside the built-ins."""


@dataclass(frozen=True, slots=True)
class UiSession:
    """Where the run is, the balancer's admin address and the config's constants."""

    run_dir: str
    admin: tuple[str, int]
    warmup: float
    request_timeout: float
    seed: int
    think_time: tuple[float, float]
    strategy_options: dict[str, dict[str, str]]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> UiSession:
        data = json.loads(text)
        data["admin"] = tuple(data["admin"])
        data["think_time"] = tuple(data["think_time"])
        return cls(**data)


def phase_notes(run_dir: Path) -> Path:
    """The folder of the phase notes."""
    return run_dir / "raw" / "ui"
