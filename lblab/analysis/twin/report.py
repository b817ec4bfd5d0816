"""The "Measured vs simulated" section, from ``RESULTS_DIR/twin/twin.json``: in the
report (HTML) and in the docs site's results pages (markdown).

``twin_section(run_dir)`` returns a self-contained HTML fragment (tables and plain
words, no scripts, no images), or None when the run has no twin (``lblab twin``
writes one). ``twin_markdown(report, stamp, command)`` is the same figures and words as
a stamped section of ``docs/results/twin.md`` (``lblab twin --format markdown``). Both
take what they show from the helpers below, so the two never differ. This module only
reads ``twin.json``, as a ``TwinReport`` (``analysis/twin/file.py``);
``simulator/twin/`` computes everything.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab.analysis.twin.file import (
    TWIN_JSON,
    ModelScenario,
    Ranked,
    ScaledRank,
    TwinCell,
    TwinRank,
    TwinReport,
    TwinScale,
    load_twin,
)
from lblab.errors import ConfigError
from lblab.pages import stamped, table
from lblab.stamp import Stamp

_MISS_STYLE = ' style="background:#fbe3e3"'
_YES_NO = {True: "yes", False: "no"}
_LABELS = {
    "throughput_rps": "throughput (ok/s)",
    "latency_mean_ms": "mean latency (ms)",
    "latency_p95_ms": "p95 latency (ms)",
}
_RANKS = {"throughput": "by throughput", "latency_mean": "by mean latency"}
"""Each ranking, by its name in the file (``Ranked.items``), as shown."""
_SCALE_HEADING = "Does the ranking hold at scale?"


def _num(value: Any, fmt: str = "{:.1f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{value:+.0%}"


def _tau(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _missed(error: float | None, miss: float) -> bool:
    """A cell's relative error misses the twin's target (unknown counts as a miss)."""
    return error is None or abs(error) > miss


def _low(tau: float | None, target: float) -> bool:
    """A rank agreement below the twin's target (none counts as below)."""
    return tau is None or tau < target


def _figure(cell: TwinCell, figure: str) -> tuple[str, str, str]:
    """A cell's figure as shown: measured, simulated, relative error."""
    return (
        _num(cell.measured.get(figure)),
        _num(cell.simulated.get(figure)),
        _pct(cell.error.get(figure)),
    )


def _cells_table(report: TwinReport) -> str:
    miss = report.summary.miss_threshold
    head = "".join(
        f"<th>{_esc(label)}<br>measured</th><th>simulated</th><th>error</th>"
        for label in _LABELS.values()
    ).replace("<th>error</th>", "<th>error</th><th>in measured 95 % CI</th>", 1)
    rows = []
    for c in report.cells:
        tds = []
        for f in _LABELS:
            style = _MISS_STYLE if _missed(c.error.get(f), miss) else ""
            measured, simulated, error = _figure(c, f)
            tds.append(f"<td>{measured}</td><td>{simulated}</td><td{style}>{error}</td>")
            if f == "throughput_rps":
                inside = c.inside_measured_ci.get(f)
                tds.append(f"<td>{'n/a' if inside is None else _YES_NO[inside]}</td>")
        flags = c.validity
        tds.append(f"<td>{_esc(', '.join(flags) or 'held') if flags is not None else 'n/a'}</td>")
        rows.append(
            f"<tr><td>{_esc(c.scenario)}</td><td>{_esc(c.strategy)}</td>{''.join(tds)}</tr>"
        )
    head += "<th>harness checks</th>"
    return f"<table><tr><th>scenario</th><th>strategy</th>{head}</tr>{''.join(rows)}</table>"


def _rank_table(report: TwinReport) -> str:
    target = report.summary.tau_target
    rows = []
    for scenario, ranked in report.rank.items():
        tds = []
        for _, r in ranked.items():
            style = _MISS_STYLE if _low(r.tau, target) else ""
            tds.append(
                f"<td>{_esc(' > '.join(r.measured))}</td>"
                f"<td>{_esc(' > '.join(r.simulated))}</td><td{style}>{_tau(r.tau)}</td>"
                f"<td>{_esc(_contradicted(r))}</td>"
            )
        rows.append(f"<tr><td>{_esc(scenario)}</td>{''.join(tds)}</tr>")
    pairs = "<th>resolved pairs contradicted</th>"
    return (
        "<table><tr><th>scenario</th><th>by throughput: measured</th><th>simulated</th>"
        f"<th>tau</th>{pairs}<th>by mean latency: measured</th><th>simulated</th><th>tau</th>"
        f"{pairs}</tr>{''.join(rows)}</table>"
    )


def _contradicted(rank: TwinRank) -> str:
    """'0 of 7' (pairs whose measured intervals are apart, and how many the twin
    reverses, named); 'n/a' without intervals."""
    if rank.resolved_pairs is None:
        return "n/a"
    bad = rank.contradicted_pairs
    return f"{len(bad)} of {rank.resolved_pairs}" + (f" ({', '.join(bad)})" if bad else "")


def _scale_head(scales: Sequence[TwinScale]) -> list[str]:
    """The at-scale table's columns after the scenario: three per scaled twin."""
    return [
        head
        for s in scales
        for head in (
            f"{s.servers} servers: ranking by throughput",
            "tau vs twin",
            "tau vs measured",
        )
    ]


def _scale_rows(report: TwinReport) -> list[tuple[str, list[ScaledRank | None]]]:
    """The at-scale table's rows: per scenario, each scaled twin's ranking by throughput
    with its tau against the twin's and the measured ranking (None where it has none)."""
    return [
        (scenario, [_throughput(s.rank.get(scenario)) for s in report.scales])
        for scenario in report.rank
    ]


def _throughput(ranked: Ranked[ScaledRank] | None) -> ScaledRank | None:
    return None if ranked is None else ranked.throughput


def _scaled(rank: ScaledRank | None) -> tuple[str, str, str]:
    """A scaled twin's ranking as shown: the order, tau vs twin, tau vs measured."""
    if rank is None:
        return ("", _tau(None), _tau(None))
    return (" > ".join(rank.simulated), _tau(rank.tau_vs_twin), _tau(rank.tau_vs_measured))


def _scale_intro(report: TwinReport) -> str:
    return (
        "The same twin with more servers of the same capacity mix and the load per server "
        "kept (users or rate scaled with the servers). Tau vs twin compares with the "
        f"{len(report.model.servers)}-server twin's ranking, tau vs measured with the "
        "live ranking."
    )


def _scale_table(report: TwinReport) -> str:
    scales = report.scales
    if not scales:
        return ""
    target = report.summary.tau_target
    head = "".join(f"<th>{_esc(h)}</th>" for h in _scale_head(scales))
    rows = []
    for scenario, ranks in _scale_rows(report):
        tds = []
        for r in ranks:
            order, tau, tau_measured = _scaled(r)
            style = _MISS_STYLE if _low(None if r is None else r.tau_vs_twin, target) else ""
            tds.append(f"<td>{_esc(order)}</td><td{style}>{tau}</td><td>{tau_measured}</td>")
        rows.append(f"<tr><td>{_esc(scenario)}</td>{''.join(tds)}</tr>")
    note = _too_short_words(scales)
    return (
        f"<h3>{_SCALE_HEADING}</h3><p>{_esc(_scale_intro(report))}</p>"
        f"<table><tr><th>scenario</th>{head}</tr>{''.join(rows)}</table>"
        + (f"<p>{_esc(note)}</p>" if note else "")
    )


def _too_short_words(scales: Sequence[TwinScale]) -> str:
    """Where a scaled phase was too short for the strategies that follow the agents'
    CPU reports to get any: their place in that ranking is not a finding ('' if none)."""
    notes = [
        f"{s.servers} servers, {scenario}: the window lasted {entry.window_s:g} "
        f"simulated s ({entry.agent_periods:g} agent periods), too short for "
        f"{', '.join(entry.strategies)}"
        for s in scales
        for scenario, entry in s.too_short_for_agent_reports.items()
    ]
    if not notes:
        return ""
    return (
        "Strategies that follow the agents' CPU reports had too few reports to follow "
        f"in: {'; '.join(notes)}. Their place in those rankings says nothing about them at "
        "scale; give --scale-requests enough requests for a few seconds of simulated time."
    )


def _model_table(report: TwinReport) -> str:
    servers = "".join(
        f"<tr><td>{_esc(s.id)}</td><td>{_num(s.cpu_quota, '{:g}')}</td>"
        f"<td>{_num(s.weight, '{:g}')}</td><td>{s.workers}</td>"
        f"<td>{_esc(s.fit)}</td><td>{_num(s.fit_r2, '{:.3f}')}</td>"
        f"<td>{s.samples}</td></tr>"
        for s in report.model.servers
    )
    scenarios = "".join(
        f"<tr><td>{_esc(name)}</td><td>{_num(m.front.client_ms, '{:.2f}')}</td>"
        f"<td>{_num(m.front.slope_ms, '{:.2f}')}</td><td>{_esc(_load_terms(m))}</td>"
        f"<td>{_num(m.think_ms, '{:.2f}')}</td><td>{_esc(_scales(m))}</td>"
        f"<td>{m.requests_per_phase}</td></tr>"
        for name, m in report.model.scenarios.items()
    )
    return (
        "<details><summary>What the twin took from the run</summary>"
        "<p>Service times: each server's own measured times, resampled per request shape "
        "(the calibrated cost model below prices shapes it never served). A server that "
        "reached 90 % of its CPU quota in the scenario is priced by its CPU instead: the "
        "slot times of the servers whose quota did not bind (the work without stalls) x "
        "its CPU per answer where its quota bound over their mean (CPU demand), run under "
        "its quota as a cgroup enforces it (a budget per period of the live server's, "
        "10 ms). Front end: the time outside the servers' slots, a round trip of the "
        "client part (generator, balancer, links) plus, at a server whose quota did not "
        "bind, slope x u / (1 - u) with u the share of time its slot was busy (its event "
        "loop waits for the worker), fitted over the scenario's phases and solved for the "
        "load each strategy's simulation puts on the server. Think: the closed loop's time "
        "outside the request.</p>"
        "<table><tr><th>server</th><th>CPU quota</th><th>weight</th><th>workers</th>"
        f"<th>cost model</th><th>R&sup2;</th><th>samples</th></tr>{servers}</table>"
        "<table><tr><th>scenario</th><th>front end, client (ms, round trip)</th>"
        "<th>load slope (ms)</th><th>load term per strategy (ms)</th><th>think (ms)</th>"
        f"<th>CPU demand / work time</th><th>requests per measured phase (a scaled twin's start)</th></tr>{scenarios}</table>"
        "</details>"
    )


def _load_terms(model: ModelScenario) -> str:
    return (
        "; ".join(
            f"{strategy}: " + ", ".join(f"{k} {v:.1f}" for k, v in servers.items())
            for strategy, servers in model.front.server_ms.items()
            if servers and any(servers.values())
        )
        or "none"
    )


def _scales(model: ModelScenario) -> str:
    return ", ".join(f"{k} x{v:.2f}" for k, v in model.demand_scale.items()) or "n/a"


def _within(report: TwinReport, figure: str) -> int:
    """How many cells the twin predicts within the miss threshold on ``figure``."""
    miss = report.summary.miss_threshold
    return sum(not _missed(c.error.get(figure), miss) for c in report.cells)


def _predicts(report: TwinReport, *, latency: bool) -> str:
    """The first sentence: the cells within the miss threshold on throughput (and, with
    ``latency``, on mean and p95 latency; the report's table shows those cell by cell)."""
    s = report.summary
    cells = len(report.cells)
    also = (
        f"; the mean latency of {_within(report, 'latency_mean_ms')} and the p95 latency of "
        f"{_within(report, 'latency_p95_ms')} of them within it"
        if latency
        else ""
    )
    return (
        f"The simulator, given this run's servers, load and measured service times, predicts "
        f"the throughput of {cells - len(s.throughput_misses)} of {cells} strategy x "
        f"scenario cells within {s.miss_threshold:.0%} (worst error "
        f"{_pct(s.max_abs_throughput_error).lstrip('+')}){also}."
    )


def _findings(report: TwinReport) -> list[str]:
    """The plain words after the first sentence: where the twin misses, how finely the
    run measures, where the rankings disagree, the testbed's notes (plain text)."""
    s = report.summary
    misses = s.throughput_misses
    low = s.tau_below_target
    parts = []
    if misses:
        parts.append(f"Its throughput misses by more than that in: {', '.join(misses)}.")
        held = s.throughput_misses_where_the_harness_held
        if held is not None and len(held) < len(misses):
            parts.append(
                f"{len(misses) - len(held)} of the misses are in cells where the run's own "
                "checks found the load generator, the balancer or the machine short of CPU "
                "(the cells' harness checks below), which the twin does not model; "
                + (
                    f"where the harness held it misses {', '.join(held)}."
                    if held
                    else "where the harness held it misses none."
                )
            )
        outside = s.throughput_misses_outside_ci
        if outside is not None and s.median_measured_ci_halfwidth is not None:
            parts.append(
                f"Of these, {len(outside)} {'lies' if len(outside) == 1 else 'lie'} outside "
                "the run's own 95 % interval across replications; the others are within what "
                "the run itself can tell apart."
            )
    width = s.median_measured_ci_halfwidth
    if width is not None:
        parts.append(
            f"For scale: the measured throughput's 95 % interval is +-{width:.0%} of the mean "
            "in the median cell, so differences smaller than that are not measured ones."
        )
    contradicted = s.resolved_pairs_contradicted
    if low:
        parts.append(
            f"The ranking of the strategies by throughput agrees poorly (Kendall tau below "
            f"{s.tau_target}) in: {', '.join(low)}; there the simulator's ranking "
            "(and so its answers at scale) should not be taken for the testbed's."
        )
        clean = [name for name in low if name not in (contradicted or {})]
        if clean and contradicted is not None:
            parts.append(
                f"In {', '.join(clean)} it reverses no pair of strategies whose "
                "measured 95 % intervals are apart: the disagreement is among strategies "
                "this run cannot tell apart."
            )
    else:
        parts.append(
            f"The ranking by throughput agrees wherever there is one (tau at least {s.tau_target})."
        )
    if contradicted:
        parts.append(
            "It reverses measured differences the run resolves (intervals apart) in: "
            + "; ".join(f"{name}: {', '.join(pairs)}" for name, pairs in contradicted.items())
            + "."
        )
    if s.tau_undefined:
        parts.append(
            "No ranking by throughput (the strategies tie within 1 %, as under an open load "
            f"below saturation) in: {', '.join(s.tau_undefined)}."
        )
    for note in report.model.notes:
        parts.append(f"Note: {note}.")
    return parts


def _plain_words(report: TwinReport) -> str:
    return f"<p>{_esc(' '.join([_predicts(report, latency=False), *_findings(report)]))}</p>"


def twin_section(run_dir: str | Path) -> str | None:
    """The "Measured vs simulated" section of the report, or None without a twin."""
    path = Path(run_dir) / TWIN_JSON
    if not path.is_file():
        return None
    try:
        report = load_twin(path)
    except ConfigError as exc:
        return (
            '<h2 id="twin">Measured vs simulated</h2>'
            f'<p class="note">{_esc(path)} is unreadable ({_esc(type(exc).__name__)}: '
            f"{_esc(exc)}); run <code>lblab twin {_esc(run_dir)}</code> again.</p>"
        )
    body = (
        _plain_words(report)
        + _cells_table(report)
        + "<h3>Rank agreement (Kendall tau-b)</h3>"
        + _rank_table(report)
        + _scale_table(report)
        + _model_table(report)
    )
    return f'<h2 id="twin">Measured vs simulated</h2>{body}'


def _scenario_table(report: TwinReport) -> list[str]:
    """Per scenario: each strategy's throughput measured / simulated (error; the harness
    checks that flagged it), and per ranking its tau and the resolved pairs reversed."""
    cells = {(c.scenario, c.strategy): c for c in report.cells}
    strategies = list(dict.fromkeys(c.strategy for c in report.cells))
    columns = ["scenario", *strategies]
    for label in _RANKS.values():
        columns += [f"tau {label}", f"reversed {label}"]
    rows = []
    for scenario, ranked in report.rank.items():
        row = [scenario]
        for strategy in strategies:
            c = cells.get((scenario, strategy))
            if c is None:
                row.append("n/a")
                continue
            measured, simulated, error = _figure(c, "throughput_rps")
            flags = f"; {', '.join(c.validity)}" if c.validity else ""
            row.append(f"{measured} / {simulated} ({error}{flags})")
        for _, r in ranked.items():
            row += [_tau(r.tau), _contradicted(r)]
        rows.append(row)
    return table(columns, rows)


def _scale_markdown(report: TwinReport) -> list[str]:
    scales = report.scales
    if not scales:
        return []
    rows = [
        [scenario, *(x for r in ranks for x in _scaled(r))]
        for scenario, ranks in _scale_rows(report)
    ]
    note = _too_short_words(scales)
    return [
        f"## {_SCALE_HEADING}",
        "",
        _scale_intro(report),
        "",
        *table(["scenario", *_scale_head(scales)], rows),
        "",
        *([note, ""] if note else []),
    ]


def twin_markdown(report: TwinReport, stamp: Stamp, command: str) -> str:
    """The twin of a run as a section of ``docs/results/twin.md``: the stamp (``stamp``,
    taken when ``command`` started), the plain words, measured vs simulated throughput
    per scenario with the rankings' agreement, and the ranking at scale when scales were
    run. ``report`` is ``twin.json`` as read."""
    model = report.model
    kind = "simulated" if report.simulated_input else "live"
    return "\n".join(
        [
            stamped(stamp, command),
            "## Measured vs simulated",
            "",
            f"Run `{report.run_id}` ({kind}: {len(model.servers)} servers, "
            f"{model.replications} replications); its twin"
            + (f", each phase drawn {model.repeats} times," if model.repeats else "")
            + f" took {_num(report.wall_seconds, '{:g}')} s.",
            "",
            " ".join([_predicts(report, latency=True), *_findings(report)]),
            "",
            "Throughput (ok/s) measured / simulated (error, and the run's harness checks "
            "that flagged the cell), Kendall tau-b between the measured and the simulated "
            "ranking, and the pairs of strategies the run resolves (95 % intervals apart) "
            "that the twin reverses:",
            "",
            *_scenario_table(report),
            "",
            *_scale_markdown(report),
        ]
    )
