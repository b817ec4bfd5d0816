"""Numbers as the report prints them: one formatting function, never a negative zero.

``format(-0.004, "+.0f")`` is ``-0``: an interval ``[-45, -0]`` reads as if its end
were below zero, where the value only rounds to it. Every number the report, its
answer and its tables print goes through ``number``, which prints such a value as the
zero it rounds to, unsigned.
"""

from __future__ import annotations

import math

_NONZERO = frozenset("123456789")


def number(value: float, template: str = "{:.3g}") -> str:
    """``value`` in ``template`` (a ``str.format`` template of one field, e.g. ``"{:+.0f}"``
    or a metric's ``"{:.2%}"``); a value that rounds to zero prints as ``0`` in that
    template, without a sign."""
    text = template.format(value)
    if not math.isfinite(value):
        return text
    mantissa = text.lower().split("e")[0]
    if any(ch in _NONZERO for ch in mantissa):
        return text
    return template.replace("+", "").format(0.0)


def bounds(lo: float, hi: float, template: str = "{:+.3g}") -> str:
    """``[+2, +14.3]``: an interval's ends, each by ``number``."""
    return f"[{number(lo, template)}, {number(hi, template)}]"


def interval(mid: float, lo: float, hi: float, template: str = "{:+.3g}", unit: str = "") -> str:
    """``+8.1 % [+2, +14.3]``: a value, ``unit``, and its interval (``bounds``)."""
    return f"{number(mid, template)}{unit} {bounds(lo, hi, template)}"
