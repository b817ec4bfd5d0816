"""The twin's file, ``RESULTS_DIR/twin/twin.json``, and how it is shown. ``lblab twin``
(``simulator/twin/``) computes the twin; this part only writes, reads and words it.

- ``file``: ``twin.json`` as a typed contract (``TwinReport``): one writer, one reader.
- ``report``: the "Measured vs simulated" section, in the report (HTML) and in the docs'
  results page (markdown).
"""

from lblab.analysis.twin.file import (
    TWIN_JSON,
    TWIN_SCHEMA_VERSION,
    ModelFront,
    ModelScenario,
    ModelServer,
    Ranked,
    ScaledFigures,
    ScaledRank,
    TooShort,
    TwinCell,
    TwinModel,
    TwinRank,
    TwinReport,
    TwinScale,
    TwinSummary,
    load_twin,
    save_twin,
)
from lblab.analysis.twin.report import twin_markdown, twin_section

__all__ = [
    "TWIN_JSON",
    "TWIN_SCHEMA_VERSION",
    "ModelFront",
    "ModelScenario",
    "ModelServer",
    "Ranked",
    "ScaledFigures",
    "ScaledRank",
    "TooShort",
    "TwinCell",
    "TwinModel",
    "TwinRank",
    "TwinReport",
    "TwinScale",
    "TwinSummary",
    "load_twin",
    "save_twin",
    "twin_markdown",
    "twin_section",
]
