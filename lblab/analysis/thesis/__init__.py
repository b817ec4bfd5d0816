"""The thesis's conclusions (papers/002) judged on a run: ``lblab reproduce thesis``.

- ``tables``: what the claims read from one run (``load_run``: ``RunTables``).
- ``figures``: the figures that test the claims, one value per replication.
- ``claims``: the claims, each with the thesis's words, its figure and its bound.
- ``explanations``: why a claim did not hold, from the run's own evidence.
- ``judging``: each claim supported, contradicted, inconclusive or n/a, and the page.
"""

from lblab.analysis.thesis.claims import CLAIMS, Claim
from lblab.analysis.thesis.explanations import why_static_small
from lblab.analysis.thesis.judging import (
    CONTRADICTED,
    INCONCLUSIVE,
    NA,
    SUPPORTED,
    judge,
    judge_all,
    markdown,
    verdict_of,
)
from lblab.analysis.thesis.tables import PHASE_COLUMNS, RunTables, load_run, tables_from_frames

__all__ = [
    "CLAIMS",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "NA",
    "PHASE_COLUMNS",
    "SUPPORTED",
    "Claim",
    "RunTables",
    "judge",
    "judge_all",
    "load_run",
    "markdown",
    "tables_from_frames",
    "verdict_of",
    "why_static_small",
]
