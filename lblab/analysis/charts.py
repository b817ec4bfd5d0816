"""The charts: each function takes tidy frames from analysis/metrics.py and returns a Figure.

Figures are built with the object API (``Figure()``, never pyplot), so no GUI backend
or global figure state is involved; saving renders with Agg. Every function draws a figure that says
"no data" (and why) instead of raising when its input is empty or lacks what it needs:
a strategy with zero successes, a missing server, a single replication (no whiskers) or
an empty table must not stop a report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lblab.analysis.metrics import METRICS, metric_info
from lblab.analysis.ordering import (
    PACKAGE_LABELS,
    SIZES,
    VARIATION,
    WORK_LABELS,
    matrix_cell,
    order_scenarios,
    order_strategies,
)

_CMAP_BEST_GREEN = "RdYlGn"


def no_data(title: str, reason: str) -> Figure:
    """A small figure that states there is nothing to draw, and why."""
    fig = Figure(figsize=(6, 2.2))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(
        0.5,
        0.45,
        f"no data: {reason}",
        ha="center",
        va="center",
        fontsize=11,
        color="0.35",
        wrap=True,
    )
    return fig


def _fmt(metric: str, value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return metric_info(metric).fmt.format(value)


def _label(metric: str) -> str:
    return metric_info(metric).label


def _relative_scores(rows: pd.DataFrame, better: str) -> pd.Series:
    """Each value's place among the strategies of its scenario: 1 = best, 0 = worst.

    Cells differ by orders of magnitude (1 MB of work is 100x 10 KB), so one colour scale
    over the whole matrix would only show the cell, not the strategy. Scoring within a
    scenario makes the colour answer the thesis' question: which strategy is best here.
    Equal values (or a single strategy) all score 1.
    """
    by_scenario = rows.groupby("scenario", observed=True)["mean"]
    lo, hi = by_scenario.transform("min"), by_scenario.transform("max")
    span = (hi - lo).where(hi > lo)
    score = (rows["mean"] - lo) / span
    if better == "lower":
        score = 1.0 - score
    return score.fillna(1.0).where(rows["mean"].notna())


def matrix_heatmaps(pooled: pd.DataFrame, metric: str) -> Figure:
    """The thesis matrix (package size x work volume) per strategy, side by side, annotated.

    Cells show the value; colour ranks the strategies within each cell (green best, red
    worst; see ``_relative_scores``). ``variation``, outside the matrix, is given under
    each panel.
    """
    title = f"{_label(metric)} by package size x work volume"
    rows = pooled.loc[pooled["metric"] == metric] if not pooled.empty else pooled
    cells = (
        rows.loc[rows["scenario"].map(lambda s: matrix_cell(s) is not None)]
        if not rows.empty
        else rows
    )
    if cells.empty or cells["mean"].isna().all():
        return no_data(title, f"no matrix scenario (sp+sr ... lp+lr) has a value of {metric}")
    cells = cells.assign(score=_relative_scores(cells, metric_info(metric).better))
    strategies = order_strategies(rows["strategy"].unique())
    n = len(strategies)
    fig = Figure(figsize=(2.6 * n + 1.4, 3.4), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    image = None
    for ax, strategy in zip(axes, strategies, strict=True):
        value, score = np.full((3, 3), np.nan), np.full((3, 3), np.nan)
        sub = cells.loc[cells["strategy"] == strategy]
        for scenario, v, sc in zip(sub["scenario"], sub["mean"], sub["score"], strict=True):
            package, work = matrix_cell(scenario) or ("", "")
            value[SIZES.index(package), SIZES.index(work)] = v
            score[SIZES.index(package), SIZES.index(work)] = sc
        image = ax.imshow(score, cmap=_CMAP_BEST_GREEN, vmin=0.0, vmax=1.0)
        for i in range(3):
            for j in range(3):
                ax.text(j, i, _fmt(metric, value[i, j]), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(3), [WORK_LABELS[s] for s in SIZES], fontsize=8)
        ax.set_yticks(range(3), [PACKAGE_LABELS[s] for s in SIZES], fontsize=8)
        ax.set_title(strategy, fontsize=10)
        var = rows.loc[(rows["strategy"] == strategy) & (rows["scenario"] == VARIATION), "mean"]
        # In the x label, not free text below the axes: the layout then makes room for it.
        below = f"\nvariation: {_fmt(metric, float(var.iloc[0]))}" if len(var) else ""
        ax.set_xlabel("work volume" + below, fontsize=8)
    axes[0].set_ylabel("package size", fontsize=8)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.8, ticks=[0, 1])
        bar.ax.set_yticklabels(["worst", "best"], fontsize=8)
        bar.set_label("rank within the cell", fontsize=8)
    fig.suptitle(title)
    return fig


def comparison_bars(
    pooled: pd.DataFrame, metric: str, scenarios: Sequence[str] | None = None
) -> Figure:
    """Bars per scenario and strategy with 95 % CI whiskers (none where one replication)."""
    title = f"{_label(metric)}: strategies compared (95 % CI across replications)"
    rows = pooled.loc[pooled["metric"] == metric] if not pooled.empty else pooled
    if scenarios is not None and not rows.empty:
        rows = rows.loc[rows["scenario"].isin(scenarios)]
    if rows.empty or rows["mean"].isna().all():
        return no_data(title, f"no values of {metric}")
    strategies = order_strategies(rows["strategy"].unique())
    scen = order_scenarios(rows["scenario"].unique())
    width = 0.8 / len(strategies)
    fig = Figure(
        figsize=(max(6.0, 1.1 * len(scen) * max(1, len(strategies) / 3)), 4), layout="constrained"
    )
    ax = fig.add_subplot()
    x = np.arange(len(scen))
    any_ci = False
    for i, strategy in enumerate(strategies):
        sub = rows.loc[rows["strategy"] == strategy].set_index("scenario").reindex(scen)
        mean = sub["mean"].to_numpy(dtype=float)
        lo, hi = sub["lo"].to_numpy(dtype=float), sub["hi"].to_numpy(dtype=float)
        err = np.vstack([mean - lo, hi - mean])
        has_ci = ~np.isnan(err).any(axis=0)
        any_ci = any_ci or bool(has_ci.any())
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, np.nan_to_num(mean), width, label=strategy)
        if has_ci.any():
            ax.errorbar(
                pos[has_ci],
                mean[has_ci],
                yerr=err[:, has_ci],
                fmt="none",
                ecolor="black",
                capsize=3,
                lw=1,
            )
    ax.set_xticks(x, scen, rotation=30 if len(scen) > 5 else 0)
    ax.set_ylabel(_label(metric))
    ax.legend(fontsize=8, ncols=min(len(strategies), 6))
    ax.set_title(
        title if any_ci else f"{_label(metric)}: strategies compared (one replication: no CI)"
    )
    return fig


def cpu_over_time(
    cpu: pd.DataFrame, scenario: str, strategies: Sequence[str] | None = None
) -> Figure:
    """CPU of each server over time (percent of its own allowance), one panel per strategy.

    Replications are drawn as separate thin lines of the server's colour.
    """
    title = f"CPU per server over time, scenario {scenario}"
    rows = cpu.loc[cpu["scenario"] == scenario] if not cpu.empty else cpu
    if strategies is not None and not rows.empty:
        rows = rows.loc[rows["strategy"].isin(strategies)]
    if rows.empty:
        return no_data(title, f"no CPU samples for scenario {scenario}")
    names = order_strategies(rows["strategy"].unique())
    servers = sorted(rows["server"].unique())
    colors = {s: f"C{i}" for i, s in enumerate(servers)}
    fig = Figure(figsize=(10, 1.9 * len(names) + 0.8), layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False, sharex=True)[:, 0]
    for ax, strategy in zip(axes, names, strict=True):
        sub = rows.loc[rows["strategy"] == strategy]
        for (server, _, _), line in sub.groupby(["server", "run_id", "replication"], sort=True):
            ax.plot(line["t_rel"], line["cpu_percent"], color=colors[server], lw=1, alpha=0.8)
        ax.set_ylim(0, 105)
        ax.set_ylabel("CPU %", fontsize=8)
        ax.set_title(strategy, fontsize=9, loc="left")
    handles = [Line2D([], [], color=colors[s], label=s) for s in servers]
    axes[0].legend(handles=handles, fontsize=8, ncols=len(servers), loc="upper right")
    axes[-1].set_xlabel("seconds since the unit's first sample")
    fig.suptitle(title)
    return fig


def latency_by_server(boxes: pd.DataFrame, group: str = "strategy") -> Figure:
    """Box plots of success latency per server, one panel per strategy (thesis fig. 5.8).

    Boxes are quartiles, whiskers the 5th and 95th percentiles, a dot the mean.
    """
    title = "Latency distribution by server (successes; whiskers p5-p95)"
    if boxes.empty:
        return no_data(title, "no successful request with a server")
    names = (
        order_strategies(boxes[group].unique())
        if group == "strategy"
        else sorted(boxes[group].unique())
    )
    fig = Figure(figsize=(max(6.0, 2.4 * len(names)), 3.8), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False, sharey=True)[0]
    for ax, name in zip(axes, names, strict=True):
        sub = boxes.loc[boxes[group] == name].sort_values("server")
        stats = [
            {
                "label": r.server,
                "whislo": r.whislo,
                "q1": r.q1,
                "med": r.med,
                "q3": r.q3,
                "whishi": r.whishi,
                "mean": r.mean,
            }
            for r in sub.itertuples()
        ]
        ax.bxp(stats, showfliers=False, showmeans=True)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("latency (ms)")
    if (boxes["whishi"] > 0).all() and boxes["whishi"].max() / max(
        boxes["whislo"].min(), 1e-9
    ) > 100:
        axes[0].set_yscale("log")
    fig.suptitle(title)
    return fig


def latency_percentiles(curves: pd.DataFrame, scenario: str | None = None) -> Figure:
    """Latency at each percentile, one line per strategy; one panel per scenario."""
    title = "Latency percentiles (successes, replications pooled)"
    rows = (
        curves.loc[curves["scenario"] == scenario]
        if scenario is not None and not curves.empty
        else curves
    )
    if rows.empty:
        return no_data(title, "no successful request" + (f" in {scenario}" if scenario else ""))
    scen = order_scenarios(rows["scenario"].unique())
    ncols = min(3, len(scen))
    nrows = math.ceil(len(scen) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    strategies = order_strategies(rows["strategy"].unique())
    for ax, name in zip(axes, scen, strict=False):
        sub = rows.loc[rows["scenario"] == name]
        for i, strategy in enumerate(strategies):
            line = sub.loc[sub["strategy"] == strategy].sort_values("percentile")
            if len(line):
                # x as "nines": -log10(1 - p) spreads out the tail (p50 -> 0.3, p99 -> 2).
                nines = -np.log10(np.clip(1 - line["percentile"] / 100.0, 1e-4, None))
                ax.plot(nines, line["latency_ms"], marker=".", label=strategy, color=f"C{i}")
        ticks = [0, 50, 90, 99, 99.9]
        ax.set_xticks(
            [-math.log10(1 - t / 100) for t in ticks], [f"p{t:g}" for t in ticks], fontsize=8
        )
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("latency (ms)", fontsize=8)
        ax.legend(fontsize=7)
    for ax in axes[len(scen) :]:
        ax.set_axis_off()
    fig.suptitle(title)
    return fig


def server_share(servers_pooled: pd.DataFrame, scenario: str | None = None) -> Figure:
    """Share of requests each server handled, stacked per strategy (scenarios averaged)."""
    title = "Share of requests per server" + (
        f", scenario {scenario}" if scenario else " (mean over scenarios)"
    )
    rows = (
        servers_pooled.loc[servers_pooled["metric"] == "share"]
        if not servers_pooled.empty
        else servers_pooled
    )
    if scenario is not None and not rows.empty:
        rows = rows.loc[rows["scenario"] == scenario]
    if rows.empty:
        return no_data(title, "no request was served by a named server")
    table = rows.groupby(["strategy", "server"])["mean"].mean().unstack("server").fillna(0.0)
    table = table.reindex(order_strategies(table.index))
    fig = Figure(figsize=(max(5.0, 1.0 * len(table) + 2), 3.6), layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(table))
    for i, server in enumerate(table.columns):
        values = table[server].to_numpy()
        ax.bar(table.index, values, bottom=bottom, label=server, color=f"C{i}")
        for x, (b, v) in enumerate(zip(bottom, values, strict=True)):
            if v >= 0.06:
                ax.text(x, b + v / 2, f"{v:.0%}", ha="center", va="center", fontsize=8)
        bottom += values
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of requests")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title(title)
    return fig


def winner_table(winners: pd.DataFrame) -> Figure:
    """The winner of each scenario (rows) and metric (columns) as a table figure.

    Labels as ``analysis/winners.py`` makes them: "=" a tie, "?" unresolved.
    """
    title = "Winner per scenario and metric"
    if winners.empty:
        return no_data(title, "no metric has values to compare")
    scen = order_scenarios(winners["scenario"].unique())
    metrics = list(dict.fromkeys(winners["metric"]))
    cells = []
    for s in scen:
        row = []
        for m in metrics:
            hit = winners.loc[(winners["scenario"] == s) & (winners["metric"] == m)]
            row.append(hit["label"].iloc[0] if len(hit) else "-")
        cells.append(row)
    fig = Figure(figsize=(1.6 + 1.7 * len(metrics), 0.45 * len(scen) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    tbl = ax.table(
        cellText=cells,
        rowLabels=scen,
        colLabels=[_label(m) for m in metrics],
        loc="center",
        cellLoc="center",
    )
    tbl.auto_set_font_size(False)
    tbl.set_fontsize(8)
    tbl.scale(1, 1.3)
    ax.set_title(title + '  (paired within blocks; "=": tie; "?": unresolved)', fontsize=9)
    return fig


def failure_kinds(pooled: pd.DataFrame) -> Figure:
    """Failure rate split by error_kind, stacked, per scenario (rows) and strategy (bars)."""
    title = "Failure rate by error kind"
    kinds = [m for m in METRICS if m.startswith("failure_rate_")]
    rows = pooled.loc[pooled["metric"].isin(kinds)] if not pooled.empty else pooled
    if rows.empty or not (rows["mean"].fillna(0) > 0).any():
        return no_data(title, "no request failed")
    table = rows.pivot_table(
        index=["scenario", "strategy"], columns="metric", values="mean", aggfunc="mean"
    ).fillna(0.0)
    order = [
        (c, s)
        for c in order_scenarios(table.index.get_level_values(0))
        for s in order_strategies(table.index.get_level_values(1))
        if (c, s) in table.index
    ]
    table = table.reindex(order)
    fig = Figure(figsize=(max(6.0, 0.35 * len(table) + 2), 3.8), layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(table))
    x = np.arange(len(table))
    for i, kind in enumerate(k for k in kinds if k in table.columns):
        values = table[kind].to_numpy()
        ax.bar(x, values, bottom=bottom, label=kind.removeprefix("failure_rate_"), color=f"C{i}")
        bottom += values
    ax.set_xticks(x, [f"{c} {s}" for c, s in table.index], rotation=90, fontsize=7)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.1%}")
    ax.set_ylabel("failed / sent")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return fig
