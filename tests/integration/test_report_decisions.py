"""The report says exactly what it decided by (issue 47, item 6).

A small synthetic run (``analysis/synthetic.py``) is shaped so that each thing the
report must state arises: in sp+sr lc's mean latency is rr's times 1.02 in every one of
4 blocks (the 95 % interval of the difference excludes 0, the 90 % lies inside the
run's 4 % margin: a tie, not a win), mp+mr has 3 blocks (the header must say 3-4, not
4), and one strategy's mean latency has a 95 % interval whose low end rounds to a
negative zero in the tables' format. The report is built by ``build_report`` and read
as text.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lblab.analysis.report import build_report
from lblab.analysis.run import margin_words
from lblab.analysis.stats import t_quantile
from lblab.analysis.synthetic import write_synthetic_run
from lblab.analysis.validity import CHECKS_GUIDE
from lblab.results import MANIFEST

pytestmark = pytest.mark.slow

MARGIN = 0.04
TIE_RATIO = 1.02
LOW_END = -0.01
"""The wanted low end of rr's mean-latency interval in mp+mr: '-0.0' in '{:.1f}'."""
NEGATIVE_ZERO = re.compile(r"(?<![\w.])[-\u2212]0(?:\.0*)?(?![\d.])")


def _near_zero_third(first: float, second: float) -> float:
    """The third of three values whose 95 % t-interval of the mean starts at ``LOW_END``
    (bisection: the interval's low end falls as the third value moves away)."""
    t = t_quantile(0.975, 2)

    def low(x: float) -> float:
        values = pd.Series([first, second, x])
        return float(values.mean() - t * values.std(ddof=1) / 3**0.5)

    lo, hi = second, second + 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if low(mid) > LOW_END else (lo, mid)
    return (lo + hi) / 2


def _phases(requests: pd.DataFrame) -> list[dict[str, object]]:
    """A passing check for each phase, so the validity section (and its guide) shows."""
    check = {"name": "generator", "level": "pass", "figure": "made up", "why": "a test"}
    return [
        {
            "key": f"r{rep}-{scenario}-{strategy}",
            "scenario": scenario,
            "strategy": strategy,
            "replication": int(rep),
            "verdict": "pass",
            "verdicts": [check],
        }
        for scenario, strategy, rep in requests[["scenario", "strategy", "replication"]]
        .drop_duplicates()
        .itertuples(index=False)
    ]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    run_dir = write_synthetic_run(
        tmp_path_factory.mktemp("decisions") / "syn",
        rows_per_unit=60,
        strategies=("rr", "lc"),
        scenarios=("sp+sr", "mp+mr"),
        replications=4,
    )
    tables = {n: pd.read_parquet(run_dir / f"{n}.parquet") for n in ("requests", "cpu", "picks")}
    # mp+mr ran 3 blocks (an adaptive run adds blocks only where a pair is open).
    for name, frame in tables.items():
        tables[name] = frame[~((frame["scenario"] == "mp+mr") & (frame["replication"] == 4))]
    requests = tables["requests"]
    latency = requests["latency_ms"].to_numpy(copy=True)
    for rep in range(1, 5):  # sp+sr: lc's latency is rr's x 1.02, block by block
        base = 3.0 + rep
        for strategy, value in (("rr", base), ("lc", base * TIE_RATIO)):
            unit = (
                (requests["scenario"] == "sp+sr")
                & (requests["strategy"] == strategy)
                & (requests["replication"] == rep)
            )
            latency[unit.to_numpy()] = value
    third = _near_zero_third(1.0, 1.0)
    for rep, value in ((1, 1.0), (2, 1.0), (3, third)):
        unit = (
            (requests["scenario"] == "mp+mr")
            & (requests["strategy"] == "rr")
            & (requests["replication"] == rep)
        )
        latency[unit.to_numpy()] = value
    tables["requests"] = requests.assign(latency_ms=latency)
    for name, frame in tables.items():
        frame.to_parquet(run_dir / f"{name}.parquet", index=False)
    manifest = json.loads((run_dir / MANIFEST).read_text())
    manifest.setdefault("config", {}).setdefault("run", {})["equivalence"] = MARGIN
    manifest["phases"] = _phases(tables["requests"])
    (run_dir / MANIFEST).write_text(json.dumps(manifest))
    return build_report(run_dir).read_text(encoding="utf-8")


def _hovers(page: str) -> dict[tuple[str, str], str]:
    """The winner table's hover texts by (scenario, metric label)."""
    table = page[page.index('<table class="winners">') :]
    table = table[: table.index("</table>")]
    head = [html.unescape(h) for h in re.findall(r"<th>([^<]*)</th>", table.split("</tr>")[0])]
    out = {}
    for row in table.split("</tr>")[1:]:
        scenario = re.search(r"<th>([^<]*)</th>", row)
        if scenario is None:
            continue
        titles = [html.unescape(t) for t in re.findall(r'title="([^"]*)"', row)]
        out |= {(scenario.group(1), m): t for m, t in zip(head[1:], titles, strict=True)}
    return out


def test_every_cells_hover_gives_the_metric_the_runner_up_and_the_intervals(report) -> None:
    hovers = _hovers(report)
    assert len(hovers) == 2 * 5, hovers
    for (scenario, metric), text in hovers.items():
        assert text.startswith(f"{scenario}, {metric}: "), text
        assert "vs the runner-up" in text, text
        assert re.search(r"\[[-+]?[\d.]+, [-+]?[\d.]+\] \(95 %\), 90 %: \[", text), text
        assert text not in ("tie", "winner", "unresolved")
    tie = hovers[("sp+sr", "mean latency (ms)")]
    assert tie.startswith("sp+sr, mean latency (ms): tie of rr, lc"), tie
    # the difference and its interval: lc is 2 % slower in every block
    assert "rr vs the runner-up lc: -1.96 % [-1.96, -1.96] (95 %)" in tie, tie
    assert "over 4 blocks" in tie and f"margin {margin_words(MARGIN, 'latency_mean_ms')}" in tie


def test_the_header_states_the_replications_each_cell_had(report) -> None:
    lede = re.search(r'<p class="lede">([^<]*)</p>', report)
    assert lede is not None
    assert "3-4 replications per cell (sp+sr 4, mp+mr 3)" in html.unescape(lede.group(1))
    assert ", 4 replications per cell" not in html.unescape(lede.group(1))


def test_the_legend_states_the_margin_and_the_rule_the_code_decides_by(report) -> None:
    legend = html.unescape(report[report.index("<p>Each cell answers") :].split("</p>")[0])
    assert "+-4 % (as a ratio of the two strategies' values, between 1/1.04 and 1.04" in legend
    assert "failure rate: +-0.5 percentage points" in legend
    assert "resolved when its 95 % interval excludes 0" in legend
    assert "equivalent when its 90 % interval lies inside the run's equivalence margin" in legend
    assert (
        "a difference whose 95 % interval excludes 0 but whose 90 % interval lies inside the "
        "margin is no win" in legend
    )
    # and the answer it explains: a resolved 2 % difference inside 4 % is a tie
    assert 'class="tie"' in report


def test_no_number_in_the_report_is_a_negative_zero(report) -> None:
    text = re.sub(r'src="data:image/png;base64,[^"]*"', "", report)
    assert "[-0.0, " not in text
    found = NEGATIVE_ZERO.findall(html.unescape(text))
    assert found == [], found
    # the value that made one: rr's mean latency in mp+mr, interval from ~-0.01 ms
    row = re.search(r"mp\+mr</th>\s*<th>rr</th>\s*<td>[^<]*</td>\s*<td>([^<]*)</td>", text)
    assert row is not None and row.group(1).split("[")[1].startswith("0.0,"), row


def test_the_checks_guide_is_linked(report) -> None:
    assert CHECKS_GUIDE.is_file()
    link = f'<a href="{CHECKS_GUIDE.as_uri()}#the-checks">docs/guides/read-a-run.md'
    assert link in report
    assert "## The checks" in Path(CHECKS_GUIDE).read_text(encoding="utf-8")
