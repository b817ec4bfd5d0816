"""``dynamic-immediate``: ``dynamic`` fed by estimates the server pushes on arrival.

Same estimate and pick as ``dynamic`` (the server's ``est_wait_ms``, least wins, ties
to the first); the reports are the ``push`` ones a server sends (as a
METADATA_PUSH) whenever a request arrives, so the estimate moves with each dispatch
instead of with each response. Source: S. Ingram, *CS 422 Project Report*.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from .dynamic import Dynamic


@mypyc_attr(allow_interpreted_subclasses=True)
class DynamicImmediate(Dynamic):
    name = "dynamic-immediate"
    listed = (2, 5)
    summary = "as dynamic, but from estimates the server pushes when a request arrives"
    uses_response_reports = False
    uses_push_reports = True
    accepted_sources = frozenset({"push"})
