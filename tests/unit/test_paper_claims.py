"""The one rule every reproduction judges its paper's claims by (analysis.paper_claims)."""

from __future__ import annotations

import math

import pytest

from lblab.analysis.paper_claims import (
    DOES_NOT_HOLD,
    HOLDS,
    INCONCLUSIVE,
    NA,
    Missing,
    PaperClaim,
    document,
    halfway,
    judge,
    markdown,
)

AT_MOST_ONE = PaperClaim(
    id="ratio", text="a beats b", source="Fig. 1", figure_label="a over b", op="<=",
    threshold=1.0, basis="by any margin",
)  # fmt: skip


def test_halfway_is_half_the_published_effect_either_side_of_one() -> None:
    assert halfway(0.6) == pytest.approx(0.8)
    assert halfway(10.0) == pytest.approx(5.5)
    assert halfway(1.0) == 1.0


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        ([0.5, 0.6, 0.55], HOLDS),
        ([1.5, 1.6, 1.55], DOES_NOT_HOLD),
        ([0.5, 1.5, 1.0], INCONCLUSIVE),
        ([1.0, 1.0, 1.0], HOLDS),  # a zero-width interval on the bound meets "<="
        ([0.5], INCONCLUSIVE),
        ([math.nan, math.inf], NA),
    ],
)
def test_the_verdict_is_where_the_interval_lies(values: list[float], verdict: str) -> None:
    judged = judge(AT_MOST_ONE, lambda: values)
    assert judged.verdict == verdict
    assert (judged.why == "") == (verdict == HOLDS)


def test_why_names_the_seeds_and_what_was_missing() -> None:
    one = judge(AT_MOST_ONE, lambda: [0.5])
    assert "one seed" in one.why and "--seeds" in one.why
    over = judge(AT_MOST_ONE, lambda: [1.5, 1.6, 1.55])
    assert over.why.startswith("the interval lies wholly on the other side of 1.00")
    assert "1.50, 1.60, 1.55" in over.why

    def lacking() -> list[float]:
        raise Missing("b at 500 requests")

    missing = judge(AT_MOST_ONE, lacking)
    assert (missing.verdict, missing.why, missing.ci.n) == (NA, "not run: b at 500 requests", 0)


def test_non_finite_seeds_are_left_out_of_the_interval() -> None:
    judged = judge(AT_MOST_ONE, lambda: [0.5, math.inf, 0.6, 0.55])
    assert judged.values == (0.5, 0.6, 0.55) and judged.ci.n == 3


def test_document_and_markdown_carry_every_claim() -> None:
    verdicts = [judge(AT_MOST_ONE, lambda: [0.5, 0.6, 0.55])]
    data = document("x", "X's claims", [1, 2, 3], verdicts)
    assert data["seeds"] == [1, 2, 3] and data["interval"] == "95 % Student-t over the seeds"
    (claim,) = data["claims"]
    assert claim["verdict"] == HOLDS and claim["lo"] < claim["figure"] < claim["hi"] <= 1.0
    assert claim["values"] == [0.5, 0.6, 0.55] and claim["threshold_basis"] == "by any margin"
    page = markdown(verdicts, "X's claims")
    assert page.startswith("## X's claims\n") and "| a beats b | Fig. 1 | 0.55 |" in page
    assert "holds if <= 1.00 (by any margin)" in page


def test_seeds_past_the_largest_go_on_from_zero() -> None:
    from lblab.config import MAX_SEED
    from lblab.simulator.reproduce.commands import _seeds

    assert _seeds(7, 3) == [7, 8, 9]
    assert _seeds(MAX_SEED - 1, 3) == [MAX_SEED - 1, MAX_SEED, 0]  # distinct, all valid
