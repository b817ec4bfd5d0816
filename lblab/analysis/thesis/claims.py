"""The thesis's conclusions as checkable claims (papers/002, sections 5.2-5.8 and 6).

Each ``Claim`` carries the thesis's words, the section, the figure that tests it
(``analysis.thesis.figures``: one value per replication from a run's tables), the bound
the figure must meet, and the sentence that says why it did not hold
(``analysis.thesis.explanations``); ``analysis.thesis.judging`` judges them on a run.

Thresholds: where the thesis gives a size ("about 20 %", "16-21 %", "50 %", "more than
twice"), the claim counts as supported when at least half of that effect is measured;
where it says only "evenly", "idle", "most", the bound is stated with the claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from lblab.analysis.thesis.explanations import (
    why_dwrr_vs_lc,
    why_dynamic_large,
    why_even,
    why_even_cpu,
    why_failures_1mb,
    why_failures_identical,
    why_large_cpu,
    why_large_share,
    why_lc_first_two,
    why_lc_light,
    why_r_rr,
    why_static_latency,
    why_static_small,
    why_wrr_small,
    why_wrr_variation,
    why_wrr_vs_dwrr_large,
)
from lblab.analysis.thesis.figures import (
    dynamic_failure_excess,
    even_split,
    failure_spread,
    large_cpu_ratio,
    large_share_everywhere,
    latency_cut,
    latency_ratio,
    lc_light_large_share,
    lc_small_share,
    r_rr_gap,
    throughput_ratio,
    weighted_cpu_spread,
)
from lblab.analysis.thesis.tables import (
    DYNAMIC,
    LARGE_CELL,
    SMALL_CELL,
    STATIC,
    VARIATION,
    RunTables,
)


@dataclass(frozen=True)
class Claim:
    """One conclusion of the thesis, the figure that tests it and the bound it must meet."""

    id: str
    section: str
    text: str
    """The claim in a line (the table's wording)."""
    thesis: str
    """The thesis's own words."""
    figure_label: str
    fmt: str
    op: str  # ">=" or "<="
    threshold: float
    basis: str
    """Why this threshold."""
    figure: Callable[[RunTables], pd.Series]
    why: Callable[[RunTables], str]
    """One sentence, from the run's evidence, on why the claim did not hold here."""

    def format(self, value: float) -> str:
        return "-" if value is None or math.isnan(value) else self.fmt.format(value)

    @property
    def holds_if(self) -> str:
        return f"{'>=' if self.op == '>=' else '<='} {self.format(self.threshold)}"


CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="r-rr-even",
        section="6.1",
        text="R and RR split requests evenly",
        thesis="over time, there is an equal average number of requests handled by each node in "
        "both RR and R",
        figure_label="largest deviation of a server's share from 1/3, r and rr (pp)",
        fmt="{:.1f} pp",
        op="<=",
        threshold=5.0,
        basis="within 5 percentage points of an even split",
        figure=even_split,
        why=why_even,
    ),
    Claim(
        id="r-rr-large-cpu-low",
        section="5.5, 5.6",
        text="R and RR leave the large server's CPU low",
        thesis="CPU usage in RR and R test proved these algorithms to be incapable of utilizing the "
        "available capacity of the system properly",
        figure_label="large server's CPU / small servers' CPU (each % of its allowance), r and rr",
        fmt="{:.2f}",
        op="<=",
        threshold=0.5,
        basis="the large server at most half as busy as the small ones",
        figure=large_cpu_ratio,
        why=why_large_cpu,
    ),
    Claim(
        id="wrr-large-most",
        section="5.6",
        text="WRR gives the large server most requests",
        thesis="in both WRR and DWRR strategies, the node with the highest capacity handled the "
        "majority of requests across all tests",
        figure_label="large server's share of wrr's requests, worst cell",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority in every cell",
        figure=large_share_everywhere("wrr"),
        why=why_large_share("wrr"),
    ),
    Claim(
        id="dwrr-large-most",
        section="5.6",
        text="DWRR gives the large server most requests",
        thesis="in both WRR and DWRR strategies, the node with the highest capacity handled the "
        "majority of requests across all tests",
        figure_label="large server's share of dwrr's requests, worst cell",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority in every cell",
        figure=large_share_everywhere("dwrr"),
        why=why_large_share("dwrr"),
    ),
    Claim(
        id="weighted-even-cpu",
        section="5.5",
        text="WRR and DWRR load every server's CPU evenly",
        thesis="both WRR and DWRR consistently distributed the workload evenly across all nodes, "
        "regardless of the package size or operational complexity",
        figure_label="CPU spread across servers (max - min, % of allowance), wrr and dwrr",
        fmt="{:.1f} pp",
        op="<=",
        threshold=25.0,
        basis="servers within 25 points of each other",
        figure=weighted_cpu_spread,
        why=why_even_cpu,
    ),
    Claim(
        id="lc-light-idle",
        section="5.5, 6.2",
        text="LC leaves the large server idle at light load (ties to the first)",
        thesis="LC did not load the node with higher capacity when the traffic could be handled by "
        "the first two servers",
        figure_label="large server's share of lc's requests, light test",
        fmt="{:.1%}",
        op="<=",
        threshold=0.05,
        basis="at most 5 % of the requests",
        figure=lc_light_large_share,
        why=why_lc_light,
    ),
    Claim(
        id="lc-first-two",
        section="5.6",
        text="LC's first two servers take most requests (small cell)",
        thesis="6 out of 9 tests involved traffic that did not require the utilization of the third "
        "server. As a result, the majority of requests in all of these tests were handled by "
        "the first two servers in the LC strategy",
        figure_label=f"small servers' share of lc's requests, {SMALL_CELL}",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority",
        figure=lc_small_share,
        why=why_lc_first_two,
    ),
    Claim(
        id="dynamic-more-large",
        section="5.1, 5.2",
        text="Dynamic algorithms process more requests in the large cells",
        thesis="in large load tests, dynamic strategies significantly outperform them",
        figure_label=f"throughput lc, dwrr / r, rr, {LARGE_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.10,
        basis="'significantly': at least 10 % more",
        figure=throughput_ratio(DYNAMIC, STATIC, LARGE_CELL),
        why=why_dynamic_large,
    ),
    Claim(
        id="static-more-small",
        section="5.1, 5.2",
        text="R and RR process more requests in small cells",
        thesis="static algorithms demonstrate superior performance in small and medium loads",
        figure_label=f"throughput r, rr / lc, dwrr, {SMALL_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.0,
        basis="more, by any margin",
        figure=throughput_ratio(STATIC, DYNAMIC, SMALL_CELL),
        why=why_static_small,
    ),
    Claim(
        id="wrr-more-small",
        section="5.1",
        text="WRR processes 16-21 % more than dynamic in small cells",
        thesis="it surpasses dynamic algorithms by processing 16-21% more requests in scenarios "
        "involving small and medium loads and package sizes",
        figure_label=f"throughput wrr / lc, dwrr, {SMALL_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.08,
        basis="half the thesis's 16 %",
        figure=throughput_ratio(["wrr"], DYNAMIC, SMALL_CELL),
        why=why_wrr_small,
    ),
    Claim(
        id="static-faster-variation",
        section="5.3",
        text="R and RR have about 20 % lower mean latency in the variation test",
        thesis="both R and RR algorithms yield a slightly 20% smaller average response time in the "
        "variation test than dynamic strategies",
        figure_label="1 - mean latency r, rr / lc, dwrr, variation",
        fmt="{:.0%}",
        op=">=",
        threshold=0.10,
        basis="half the thesis's 20 %",
        figure=latency_cut(STATIC, DYNAMIC, VARIATION),
        why=why_static_latency,
    ),
    Claim(
        id="dwrr-faster-than-lc-variation",
        section="5.3, 5.4",
        text="DWRR has 50 % lower mean latency than LC in the variation test",
        thesis="in variation test, DWRR showed 50% shorter average response time, then LC",
        figure_label="1 - mean latency dwrr / lc, variation",
        fmt="{:.0%}",
        op=">=",
        threshold=0.25,
        basis="half the thesis's 50 %",
        figure=latency_cut(["dwrr"], ["lc"], VARIATION),
        why=why_dwrr_vs_lc,
    ),
    Claim(
        id="wrr-faster-than-dwrr-large",
        section="5.3",
        text="WRR beats DWRR's mean latency by 30-70 % with large work",
        thesis="in large processing tests, WRR exhibits a significantly better average response time "
        "compared to DWRR, outperforming it by 30-70%",
        figure_label=f"1 - mean latency wrr / dwrr, {LARGE_CELL}",
        fmt="{:.0%}",
        op=">=",
        threshold=0.15,
        basis="half the thesis's 30 %",
        figure=latency_cut(["wrr"], ["dwrr"], LARGE_CELL),
        why=why_wrr_vs_dwrr_large,
    ),
    Claim(
        id="wrr-slow-variation",
        section="5.3, 6.1",
        text="WRR's mean latency in the variation test is over twice DWRR's",
        thesis="the average latency in WRR for the variation test is more than twice as long as that "
        "of DWRR",
        figure_label="mean latency wrr / dwrr, variation",
        fmt="{:.2f}",
        op=">=",
        threshold=1.5,
        basis="half the thesis's excess (2x)",
        figure=latency_ratio("wrr", "dwrr", VARIATION),
        why=why_wrr_variation,
    ),
    Claim(
        id="r-rr-identical",
        section="6.1",
        text="R and RR perform almost identically",
        thesis="The Round Robin (RR) and Random (R) algorithms performed almost identically in every "
        "metric",
        figure_label="largest |throughput r / rr - 1| over the thesis cells",
        fmt="{:.1%}",
        op="<=",
        threshold=0.10,
        basis="within 10 % in every cell",
        figure=r_rr_gap,
        why=why_r_rr,
    ),
    Claim(
        id="failures-identical",
        section="5.7, 5.8",
        text="Failure rates are nearly identical (no 1 MB work)",
        thesis="all five algorithms exhibited nearly identical failure rates",
        figure_label=f"failure rate max - min over the five, {SMALL_CELL} (pp)",
        fmt="{:.2f} pp",
        op="<=",
        threshold=1.0,
        basis="within 1 percentage point",
        figure=failure_spread,
        why=why_failures_identical,
    ),
    Claim(
        id="dynamic-fail-1mb",
        section="5.7, 5.8",
        text="Dynamic algorithms fail more with 1 MB of work",
        thesis="there was a notable increase in failure rates for the dynamic algorithms when "
        "processing 1Mb of data",
        figure_label=f"failure rate lc, dwrr - r, rr, {LARGE_CELL} (pp)",
        fmt="{:.2f} pp",
        op=">=",
        threshold=1.0,
        basis="'notable': at least 1 percentage point",
        figure=dynamic_failure_excess,
        why=why_failures_1mb,
    ),
)
"""Every claim, in the thesis's order of sections."""
