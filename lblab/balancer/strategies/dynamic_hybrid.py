"""``dynamic-hybrid``: ``dynamic`` fed by both response and pushed reports, latest wins.

Source: S. Ingram, *CS 422 Project Report* ("dynamicHybrid").
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from .dynamic import Dynamic


@mypyc_attr(allow_interpreted_subclasses=True)
class DynamicHybrid(Dynamic):
    name = "dynamic-hybrid"
    listed = (2, 6)
    summary = "as dynamic, from both response reports and pushed estimates"
    uses_response_reports = True
    uses_push_reports = True
    accepted_sources = frozenset({"response", "push"})
