"""``dynamic-hybrid``: ``dynamic`` fed by both response and pushed reports, latest wins.

Source: S. Ingram, *CS 422 Project Report* ("dynamicHybrid").
"""

from __future__ import annotations

from .dynamic import Dynamic


class DynamicHybrid(Dynamic):
    name = "dynamic-hybrid"
    summary = "as dynamic, from both response reports and pushed estimates"
    uses_response_reports = True
    uses_push_reports = True
    accepted_sources = frozenset({"response", "push"})
