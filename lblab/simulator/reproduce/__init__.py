"""The simulated reproductions of the papers' findings (``lblab reproduce``)."""

from __future__ import annotations

PAPER_LC_OPTIONS: tuple[tuple[str, str], ...] = (("tie", "first"),)
"""``lc`` as the thesis, Martins and Ingram ran it: ties to the first server in list order
(lblab's default breaks them at random); their reproductions pin it, so their figures keep."""


def paper_options(algorithm: str) -> tuple[tuple[str, str], ...]:
    """The strategy options a reproduction of those papers runs ``algorithm`` with."""
    return PAPER_LC_OPTIONS if algorithm == "lc" else ()
