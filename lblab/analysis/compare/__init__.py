"""``lblab compare``: what changed between runs, which differences are real, whether the
runs agree; in the terminal, as an HTML page and as ``compare.json``.

- ``runs``: the comparison (``compare``): each run against the first, cell by cell.
- ``conditions``: what a cell ran under and what its checks found, so that only cells
  measured under the same conditions are compared.
- ``agreement``: whether two runs tell the same story (within 10 %, reversed pairs,
  winners, rank correlation).
- ``words``: the comparison in words and numbers, the same in every output.
- ``terminal``, ``report``: the rich tables and the HTML page.
"""

from lblab.analysis.compare.report import render_html, write_report
from lblab.analysis.compare.runs import (
    Report,
    RunSide,
    compare,
    compare_sides,
    default_out,
    make_side,
    verdict_of,
)
from lblab.analysis.compare.terminal import print_report
from lblab.analysis.compare.words import headline, what_changed

__all__ = [
    "Report",
    "RunSide",
    "compare",
    "compare_sides",
    "default_out",
    "headline",
    "make_side",
    "print_report",
    "render_html",
    "verdict_of",
    "what_changed",
    "write_report",
]
