"""Prometheus exposition text: one metric family, and a label value escaped.

Written by the balancer's ``/metrics`` (``balancer/admin.py``, with the collector's counts
from ``collector.py``) and by the status exporter (``infra/monitoring``).
"""

from __future__ import annotations

from collections.abc import Iterable


def label(value: object) -> str:
    """A label value, escaped as the text format requires."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> list[str]:
    """The lines of one family: ``# HELP``, ``# TYPE``, then each ``(labels, value)``.
    A float is written with ``:g``; an int exactly (a counter past 10^6 keeps its digits)."""
    return [
        f"# HELP {name} {help_text}",
        f"# TYPE {name} {kind}",
        *(f"{name}{labels} {_value(value)}" for labels, value in samples),
    ]


def _value(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"
