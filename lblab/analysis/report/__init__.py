"""One run shown: the HTML report (``RESULTS_DIR/report/index.html``), and the charts,
tables and views the report and the notebooks share.

``build_report(run_dir)`` writes the report; the runner calls it at the end of every
run, ``lblab report`` on demand. The notebooks (``analysis/notebooks/``) hold no logic:
every cell calls ``views``, ``charts`` or ``tables``, which this face gives as modules.

- ``page``: the report, one self-contained page read top-down, and its charts as files.
- ``views``: a run opened once for the notebooks, its charts and tables ready to show.
- ``charts``: one Figure per function, from the tidy frames of ``analysis.metrics``.
- ``tables``: pooled metrics as "mean [lo, hi]" strings, marked where a phase failed.
- ``instrument``: what the harness added, held against each difference the answer calls.
- ``balancers``: how the load split over several balancers.
"""

from lblab.analysis.report import charts, tables, views
from lblab.analysis.report.instrument import cell_checks, instrument_rows, instrument_section
from lblab.analysis.report.page import build_report
from lblab.analysis.report.tables import FOOTNOTE
from lblab.analysis.report.views import Gallery, Markdown, Png

__all__ = [
    "FOOTNOTE",
    "Gallery",
    "Markdown",
    "Png",
    "build_report",
    "cell_checks",
    "charts",
    "instrument_rows",
    "instrument_section",
    "tables",
    "views",
]
