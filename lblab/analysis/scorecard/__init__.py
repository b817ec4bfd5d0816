"""The scorecard (``lblab scorecard``): every strategy on every hard case, as
``scorecard.json``, ``scorecard.html`` and the docs' ``docs/results/scorecard.md``.

- ``figures``: ``scorecard.json``, built from the case runs' answers and figures.
- ``page``: the scorecard as a page and as markdown.
"""

from lblab.analysis.scorecard.figures import (
    SCORECARD_FILE,
    Case,
    build_scorecard,
    read_scorecard,
    write_scorecard,
)
from lblab.analysis.scorecard.page import (
    SHORT,
    case_section,
    markdown_page,
    overview_rows,
    policy_words,
    write_page,
)

__all__ = [
    "SCORECARD_FILE",
    "SHORT",
    "Case",
    "build_scorecard",
    "case_section",
    "markdown_page",
    "overview_rows",
    "policy_words",
    "read_scorecard",
    "write_page",
    "write_scorecard",
]
