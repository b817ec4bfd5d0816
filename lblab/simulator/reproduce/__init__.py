"""The simulated reproductions of the papers' findings (``lblab reproduce``)."""

from __future__ import annotations

TIES_TO_THE_FIRST = ("lc", "lrt")
"""``lc`` and ``lrt`` as the thesis, Martins and Ingram ran them: ties to the first server
in list order (lblab's default breaks them at random); their reproductions pin it, so
their figures keep."""


def paper_options(algorithm: str) -> tuple[tuple[str, str], ...]:
    """The strategy options a reproduction of those papers runs ``algorithm`` with."""
    return (("tie", "first"),) if algorithm in TIES_TO_THE_FIRST else ()
