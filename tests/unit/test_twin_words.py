"""The twin section's plain words (``analysis/twin/report.py``) say what the figures say:
a low tau is never reported as agreement, and reversed resolved pairs are named."""

from __future__ import annotations

from lblab.analysis.twin import TwinCell, TwinModel, TwinReport, TwinSummary
from lblab.analysis.twin.report import _plain_words


def _data(low: list[str], contradicted: dict[str, tuple[str, ...]] | None) -> TwinReport:
    """20 cells, none missed; ``contradicted`` None as in a twin.json from before the
    resolved pairs."""
    summary = TwinSummary(
        max_abs_throughput_error=0.1,
        throughput_misses=(),
        throughput_misses_outside_ci=(),
        throughput_misses_where_the_harness_held=(),
        median_measured_ci_halfwidth=0.25,
        tau_below_target=tuple(low),
        tau_undefined=(),
        resolved_pairs_contradicted=contradicted,
        miss_threshold=0.15,
        tau_target=0.8,
    )
    cell = TwinCell(strategy="rr", scenario="sp+sr", measured={}, simulated={}, error={})
    return TwinReport(
        run="r",
        run_id="r",
        simulated_input=False,
        created=0.0,
        model=TwinModel(servers=(), scenarios={}, deadline_s=None, replications=1),
        cells=(cell,) * 20,
        rank={},
        summary=summary,
    )


def test_a_low_tau_among_unresolved_pairs_is_called_a_near_tie_not_agreement() -> None:
    words = _plain_words(_data(["lp+lr"], {}))
    assert "agrees poorly" in words and "lp+lr" in words
    assert "cannot tell apart" in words
    assert "agrees wherever" not in words and "reverses measured differences" not in words


def test_reversed_resolved_pairs_are_named() -> None:
    words = _plain_words(_data(["mp+mr"], {"mp+mr": ("lc > wrr",)}))
    assert "agrees poorly" in words and "lc &gt; wrr" in words
    assert "cannot tell apart" not in words and "agrees wherever" not in words


def test_agreement_is_said_only_when_every_tau_reaches_the_target() -> None:
    assert "agrees wherever" in _plain_words(_data([], {}))
    # An older twin.json without the pairs: no claim about them either way.
    words = _plain_words(_data(["sp+sr"], None))
    assert "cannot tell apart" not in words and "agrees wherever" not in words
