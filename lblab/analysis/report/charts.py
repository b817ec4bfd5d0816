"""The charts: each function takes tidy frames from analysis/metrics.py and returns a Figure.

Figures are built with the object API (``Figure()``, never pyplot), so no GUI backend
or global figure state is involved; saving renders with Agg. Every function draws a figure that says
"no data" (and why) instead of raising when its input is empty or lacks what it needs:
a strategy with zero successes, a missing server, a single replication (no whiskers) or
an empty table must not stop a report.

The charts show every phase, but the answer (``analysis/run/decide.py``) leaves out the
phases that failed a validity check, so a bar can stand taller than the winner's for a
reason the answer rejected. Each chart of per-strategy values takes ``failed``
(``Summary.failed``: the failed phases) and marks what includes one: bars, boxes and
cells hatched and faded, lines dashed, with a legend line saying so (``FAILED``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from lblab.analysis.metrics import METRICS, metric_info
from lblab.analysis.numbers import number
from lblab.analysis.ordering import (
    PACKAGE_LABELS,
    SIZES,
    VARIATION,
    WORK_LABELS,
    matrix_cell,
    order_scenarios,
    order_strategies,
)
from lblab.analysis.run import TIE, UNRESOLVED, WINNER

_CMAP_BEST_GREEN = "RdYlGn"
FAILED_PHASE = "a phase that failed a validity check (left out of the answer)"
FAILED = f"includes {FAILED_PHASE}"
"""What a hatched bar, box or cell (or a dashed line) means; a chart that marks one
says so in a legend line: ``hatched: includes a phase that failed ...``."""
HATCH = "///"
FADED = 0.45
"""Alpha of a marked bar or box: greyed, so the eye goes to the values the answer used."""
VERDICT_COLOURS = {WINNER: "#b8e0b8", TIE: "#bcd5f3", UNRESOLVED: "#d9d9d9"}
"""Background of a winner-table cell by its verdict: a winner green, a tie blue,
unresolved grey (the labels' marks, none, "=" and "?", say the same in text)."""


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


def failed_keys(failed: pd.DataFrame, by: Sequence[str]) -> set[tuple[str, ...]]:
    """The values of ``by`` (e.g. scenario and strategy) that include a failed phase, as
    strings: a bar of (scenario, strategy) is marked when its key is in the set."""
    if failed.empty:
        return set()
    return {_key(*row) for row in failed[list(by)].itertuples(index=False, name=None)}


def _key(*values: object) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _mark(patch: Patch) -> None:
    """Hatch and fade a bar, box or cell that includes a failed phase."""
    patch.set_hatch(HATCH)
    patch.set_hatchcolor("0.15")
    patch.set_alpha(FADED)


def _marked_handle() -> Patch:
    return Patch(facecolor="0.8", hatchcolor="0.15", hatch=HATCH, label=f"hatched: {FAILED}")


def _dashed_handle(what: str = FAILED) -> Line2D:
    return Line2D([], [], color="0.3", ls="--", label=f"dashed: {what}")


def _legend_below(fig: Figure, handles: Sequence[Patch | Line2D], ncols: int = 1) -> None:
    """A legend under the panels, where a long line has the figure's whole width."""
    if handles:
        fig.legend(
            handles=list(handles), loc="outside lower center", fontsize=8, frameon=False,
            ncols=ncols,
        )  # fmt: skip


def _panels(n: int, ncols: int, panel: tuple[float, float]) -> tuple[Figure, list[Axes]]:
    """A figure of ``n`` panels (``panel`` inches each), ``ncols`` to a row, each with its
    own y axis; the unused places of the last row are blank."""
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = Figure(
        figsize=(max(7.0, panel[0] * ncols + 0.8), panel[1] * nrows + 1.2), layout="constrained"
    )
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=False).ravel()
    for ax in axes[n:]:
        ax.set_axis_off()
    return fig, list(axes[:n])


def _value_axis(ax: Axes, metric: str) -> None:
    """Bars start at 0 (a bar's length is its value); percentages read as percentages."""
    ax.set_ylim(bottom=0)
    if "%" in metric_info(metric).fmt:
        ax.yaxis.set_major_formatter(lambda v, _: number(v, "{:.1%}"))


def _say_if_all_zero(ax: Axes, values: np.ndarray) -> None:
    """A panel whose every bar is 0 says so, rather than looking empty."""
    measured = values[~np.isnan(values)]
    if len(measured) and not measured.any():
        ax.text(
            0.5, 0.5, "0 for every strategy", transform=ax.transAxes, ha="center", fontsize=8,
            color="0.35",
        )  # fmt: skip


def _fmt(metric: str, value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return number(value, metric_info(metric).fmt)


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


def matrix_heatmaps(pooled: pd.DataFrame, metric: str, failed: pd.DataFrame) -> Figure:
    """The thesis matrix (package size x work volume) per strategy, side by side, annotated.

    Cells show the value; colour ranks the strategies within each cell (green best, red
    worst; see ``_relative_scores``). ``variation``, outside the matrix, is given under
    each panel. A cell that includes a failed phase is hatched.
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
    marked = failed_keys(failed, ("scenario", "strategy"))
    n = len(strategies)
    fig = Figure(figsize=(2.6 * n + 1.4, 3.8 if marked else 3.4), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    image = None
    any_marked = False
    for ax, strategy in zip(axes, strategies, strict=True):
        value, score = np.full((3, 3), np.nan), np.full((3, 3), np.nan)
        hatched = np.zeros((3, 3), dtype=bool)
        sub = cells.loc[cells["strategy"] == strategy]
        for scenario, v, sc in zip(sub["scenario"], sub["mean"], sub["score"], strict=True):
            package, work = matrix_cell(scenario) or ("", "")
            i, j = SIZES.index(package), SIZES.index(work)
            value[i, j], score[i, j] = v, sc
            hatched[i, j] = _key(scenario, strategy) in marked
        image = ax.imshow(score, cmap=_CMAP_BEST_GREEN, vmin=0.0, vmax=1.0)
        for i in range(3):
            for j in range(3):
                if hatched[i, j]:
                    cell = Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", lw=0)
                    ax.add_patch(cell)
                    _mark(cell)
                ax.text(j, i, _fmt(metric, value[i, j]), ha="center", va="center", fontsize=8)
        any_marked = any_marked or bool(hatched.any())
        ax.set_xticks(range(3), [WORK_LABELS[s] for s in SIZES], fontsize=8)
        ax.set_yticks(range(3), [PACKAGE_LABELS[s] for s in SIZES], fontsize=8)
        ax.set_title(strategy, fontsize=10)
        var = rows.loc[(rows["strategy"] == strategy) & (rows["scenario"] == VARIATION), "mean"]
        # In the x label, not free text below the axes: the layout then makes room for it.
        below = f"\nvariation: {_fmt(metric, float(var.iloc[0]))}" if len(var) else ""
        if below and _key(VARIATION, strategy) in marked:
            below += "\n(includes a failed phase)"
        ax.set_xlabel("work volume" + below, fontsize=8)
    axes[0].set_ylabel("package size", fontsize=8)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.8, ticks=[0, 1])
        bar.ax.set_yticklabels(["worst", "best"], fontsize=8)
        bar.set_label("rank within the cell", fontsize=8)
    _legend_below(fig, [_marked_handle()] if any_marked else [])
    fig.suptitle(title)
    return fig


def comparison_bars(
    pooled: pd.DataFrame, metric: str, failed: pd.DataFrame, scenarios: Sequence[str] | None = None
) -> Figure:
    """A panel per scenario, a bar per strategy: the mean across replications, with 95 %
    CI whiskers (none where one replication).

    Each panel has its own y axis: scenarios differ by orders of magnitude (lp+lr serves
    tens of requests a second where sp+sr serves thousands), and on one shared axis the
    small ones are slivers. Compare strategies within a panel, not heights across panels.
    A bar that includes a failed phase is hatched and faded.
    """
    title = f"{_label(metric)}: strategies compared (95 % CI across replications)"
    rows = pooled.loc[pooled["metric"] == metric] if not pooled.empty else pooled
    if scenarios is not None and not rows.empty:
        rows = rows.loc[rows["scenario"].isin(scenarios)]
    if rows.empty or rows["mean"].isna().all():
        return no_data(title, f"no values of {metric}")
    strategies = order_strategies(rows["strategy"].unique())
    colours = [f"C{i}" for i in range(len(strategies))]
    scen = order_scenarios(rows["scenario"].unique())
    marked = failed_keys(failed, ("scenario", "strategy"))
    fig, axes = _panels(len(scen), 4, (0.45 * len(strategies) + 1.0, 2.7))
    x = np.arange(len(strategies))
    any_ci = any_marked = False
    for ax, scenario in zip(axes, scen, strict=True):
        sub = rows.loc[rows["scenario"] == scenario].set_index("strategy").reindex(strategies)
        mean = sub["mean"].to_numpy(dtype=float)
        lo, hi = sub["lo"].to_numpy(dtype=float), sub["hi"].to_numpy(dtype=float)
        bars = ax.bar(x, mean, 0.7, color=colours)
        for bar, strategy in zip(bars, strategies, strict=True):
            if _key(scenario, strategy) in marked:
                _mark(bar)
                any_marked = any_marked or bar.get_height() > 0  # a 0 bar shows no hatch
        err = np.vstack([mean - lo, hi - mean])
        has_ci = ~np.isnan(err).any(axis=0)
        any_ci = any_ci or bool(has_ci.any())
        if has_ci.any():
            ax.errorbar(
                x[has_ci], mean[has_ci], yerr=err[:, has_ci], fmt="none", ecolor="black",
                capsize=3, lw=1,
            )  # fmt: skip
        for i in np.flatnonzero(np.isnan(mean)):
            ax.text(x[i], 0, "n/a", ha="center", va="bottom", fontsize=7, color="0.35")
        _say_if_all_zero(ax, mean)
        long_names = len(strategies) > 5 or max(len(s) for s in strategies) > 5
        ax.set_xticks(x, strategies, fontsize=8, rotation=45 if long_names else 0)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_title(scenario, fontsize=9)
        _value_axis(ax, metric)
    fig.supylabel(_label(metric), fontsize=9)
    _legend_below(fig, [_marked_handle()] if any_marked else [])
    fig.suptitle(
        title if any_ci else f"{_label(metric)}: strategies compared (one replication: no CI)"
    )
    return fig


def cpu_over_time(
    cpu: pd.DataFrame, scenario: str, failed: pd.DataFrame, strategies: Sequence[str] | None = None
) -> Figure:
    """CPU of each server over time (percent of its own allowance), one panel per strategy.

    Replications are drawn as separate thin lines of the server's colour; those of a
    phase that failed a validity check are dashed.
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
    marked = failed_keys(failed, ("run_id", "scenario", "strategy", "replication"))
    fig = Figure(figsize=(10, 1.9 * len(names) + 0.8), layout="constrained")
    axes = fig.subplots(len(names), 1, squeeze=False, sharex=True)[:, 0]
    any_marked = False
    for ax, strategy in zip(axes, names, strict=True):
        sub = rows.loc[rows["strategy"] == strategy]
        for (server, run_id, rep), line in sub.groupby(
            ["server", "run_id", "replication"], sort=True, observed=True
        ):
            dashed = _key(run_id, scenario, strategy, rep) in marked
            any_marked = any_marked or dashed
            ax.plot(
                line["t_rel"], line["cpu_percent"], color=colors[server], lw=1, alpha=0.8,
                ls="--" if dashed else "-",
            )  # fmt: skip
        ax.set_ylim(0, 105)
        ax.set_ylabel("CPU %", fontsize=8)
        ax.set_title(strategy, fontsize=9, loc="left")
    handles = [Line2D([], [], color=colors[s], label=s) for s in servers]
    axes[0].legend(handles=handles, fontsize=8, ncols=len(servers), loc="upper right")
    axes[-1].set_xlabel("seconds since the unit's first sample")
    _legend_below(fig, [_dashed_handle(FAILED_PHASE)] if any_marked else [])
    fig.suptitle(title)
    return fig


def latency_by_server(boxes: pd.DataFrame, failed: pd.DataFrame, group: str = "strategy") -> Figure:
    """Box plots of success latency per server, one panel per strategy (thesis fig. 5.8).

    Boxes are quartiles, whiskers the 5th and 95th percentiles, a dot the mean. The
    boxes of a group (strategy) that includes a failed phase are hatched.
    """
    title = "Latency distribution by server (successes; whiskers p5-p95)"
    if boxes.empty:
        return no_data(title, "no successful request with a server")
    names = (
        order_strategies(boxes[group].unique())
        if group == "strategy"
        else sorted(boxes[group].unique())
    )
    marked = failed_keys(failed, (group,))
    fig = Figure(figsize=(max(6.0, 2.4 * len(names)), 4.2 if marked else 3.8), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False, sharey=True)[0]
    any_marked = False
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
        drawn = ax.bxp(
            stats, showfliers=False, showmeans=True, patch_artist=True,
            boxprops={"facecolor": "white"},
        )  # fmt: skip
        if _key(name) in marked:
            any_marked = True
            for box in drawn["boxes"]:
                _mark(box)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("latency (ms)")
    if (boxes["whishi"] > 0).all() and boxes["whishi"].max() / max(
        boxes["whislo"].min(), 1e-9
    ) > 100:
        axes[0].set_yscale("log")
    _legend_below(fig, [_marked_handle()] if any_marked else [])
    fig.suptitle(title)
    return fig


def latency_percentiles(
    curves: pd.DataFrame, failed: pd.DataFrame, scenario: str | None = None
) -> Figure:
    """Latency at each percentile, one line per strategy; one panel per scenario, each on
    its own y axis. A line that includes a failed phase is dashed."""
    title = "Latency percentiles (successes, replications pooled)"
    rows = (
        curves.loc[curves["scenario"] == scenario]
        if scenario is not None and not curves.empty
        else curves
    )
    if rows.empty:
        return no_data(title, "no successful request" + (f" in {scenario}" if scenario else ""))
    scen = order_scenarios(rows["scenario"].unique())
    fig, axes = _panels(len(scen), 3, (4.2, 3.2))
    strategies = order_strategies(rows["strategy"].unique())
    marked = failed_keys(failed, ("scenario", "strategy"))
    any_marked = False
    for ax, name in zip(axes, scen, strict=True):
        sub = rows.loc[rows["scenario"] == name]
        for i, strategy in enumerate(strategies):
            line = sub.loc[sub["strategy"] == strategy].sort_values("percentile")
            if len(line):
                dashed = _key(name, strategy) in marked
                any_marked = any_marked or dashed
                # x as "nines": -log10(1 - p) spreads out the tail (p50 -> 0.3, p99 -> 2).
                nines = -np.log10(np.clip(1 - line["percentile"] / 100.0, 1e-4, None))
                ax.plot(
                    nines, line["latency_ms"], marker=".", label=strategy, color=f"C{i}",
                    ls="--" if dashed else "-",
                )  # fmt: skip
        ticks = [0, 50, 90, 99, 99.9]
        ax.set_xticks(
            [-math.log10(1 - t / 100) for t in ticks], [f"p{t:g}" for t in ticks], fontsize=8
        )
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("latency (ms)", fontsize=8)
        ax.legend(fontsize=7)
    _legend_below(fig, [_dashed_handle()] if any_marked else [])
    fig.suptitle(title)
    return fig


def server_share(
    servers_pooled: pd.DataFrame, failed: pd.DataFrame, scenario: str | None = None
) -> Figure:
    """Share of requests each server handled, stacked per strategy (scenarios averaged).

    A strategy's bar is hatched when a phase it averages failed a validity check.
    """
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
    shown = set(rows["scenario"].astype(str))
    marked = {s for c, s in failed_keys(failed, ("scenario", "strategy")) if c in shown}
    fig = Figure(figsize=(max(5.0, 1.0 * len(table) + 2), 3.6), layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(table))
    for i, server in enumerate(table.columns):
        values = table[server].to_numpy()
        bars = ax.bar(table.index, values, bottom=bottom, label=server, color=f"C{i}")
        for bar, strategy in zip(bars, table.index, strict=True):
            if strategy in marked:
                _mark(bar)
        for x, (b, v) in enumerate(zip(bottom, values, strict=True)):
            if v >= 0.06:
                ax.text(x, b + v / 2, f"{v:.0%}", ha="center", va="center", fontsize=8)
        bottom += values
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of requests")
    servers = [Patch(facecolor=f"C{i}", label=s) for i, s in enumerate(table.columns)]
    ax.legend(handles=servers, fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    _legend_below(fig, [_marked_handle()] if marked & set(table.index) else [])
    ax.set_title(title)
    return fig


def winner_table(winners: pd.DataFrame) -> Figure:
    """The answer of each scenario (rows) and metric (columns) as a table figure.

    Labels as ``analysis/run/winners.py`` makes them ("=" a tie, "?" unresolved), and each
    cell coloured by its verdict (``VERDICT_COLOURS``), so a reader tells a winner from
    a best-so-far at a glance. The answer already leaves out the failed phases.
    """
    title = "Winner per scenario and metric"
    if winners.empty:
        return no_data(title, "no metric has values to compare")
    scen = order_scenarios(winners["scenario"].unique())
    metrics = list(dict.fromkeys(winners["metric"]))
    found = winners.set_index(["scenario", "metric"])
    cells, colours = [], []
    for s in scen:
        row, shade = [], []
        for m in metrics:
            hit = (s, m) in found.index
            row.append(found.at[(s, m), "label"] if hit else "-")
            shade.append(
                VERDICT_COLOURS.get(found.at[(s, m), "verdict"], "white") if hit else "white"
            )
        cells.append(row)
        colours.append(shade)
    fig = Figure(figsize=(1.6 + 1.7 * len(metrics), 0.45 * len(scen) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    tbl = ax.table(
        cellText=cells,
        cellColours=colours,
        rowLabels=scen,
        colLabels=[_label(m) for m in metrics],
        loc="center",
        cellLoc="center",
    )
    tbl.auto_set_font_size(False)
    tbl.set_fontsize(8)
    tbl.scale(1, 1.3)
    key = [
        Patch(facecolor=VERDICT_COLOURS[WINNER], label="a winner"),
        Patch(facecolor=VERDICT_COLOURS[TIE], label='"=": a tie'),
        Patch(facecolor=VERDICT_COLOURS[UNRESOLVED], label='"?": unresolved (best mean so far)'),
    ]
    _legend_below(fig, key, ncols=3)
    ax.set_title(title + " (paired within blocks; failed phases left out)", fontsize=9)
    return fig


def failure_kinds(pooled: pd.DataFrame, failed: pd.DataFrame) -> Figure:
    """Failure rate split by error_kind, stacked: a panel per scenario (each on its own
    y axis, as ``comparison_bars``), a bar per strategy, hatched when it includes a
    failed phase."""
    title = "Failure rate by error kind"
    kinds = [m for m in METRICS if m.startswith("failure_rate_") and "_from_" not in m]
    rows = pooled.loc[pooled["metric"].isin(kinds)] if not pooled.empty else pooled
    if rows.empty or not (rows["mean"].fillna(0) > 0).any():
        return no_data(title, "no request failed")
    table = rows.pivot_table(
        index=["scenario", "strategy"], columns="metric", values="mean", aggfunc="mean"
    ).fillna(0.0)
    shown = [k for k in kinds if k in table.columns and (table[k] > 0).any()]
    strategies = order_strategies(table.index.get_level_values(1))
    scen = order_scenarios(table.index.get_level_values(0))
    marked = failed_keys(failed, ("scenario", "strategy"))
    fig, axes = _panels(len(scen), 4, (0.45 * len(strategies) + 1.0, 2.7))
    x = np.arange(len(strategies))
    any_marked = False
    for ax, scenario in zip(axes, scen, strict=True):
        sub = table.loc[scenario].reindex(strategies).fillna(0.0)
        bottom = np.zeros(len(strategies))
        for i, kind in enumerate(shown):
            values = sub[kind].to_numpy()
            bars = ax.bar(x, values, 0.7, bottom=bottom, color=f"C{i}")
            for bar, strategy in zip(bars, strategies, strict=True):
                if _key(scenario, strategy) in marked:
                    _mark(bar)
                    any_marked = any_marked or bar.get_height() > 0
            bottom += values
        ax.set_xticks(x, strategies, fontsize=8, rotation=45 if len(strategies) > 5 else 0)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_title(scenario, fontsize=9)
        _value_axis(ax, "failure_rate")
        _say_if_all_zero(ax, bottom)
        if bottom.max() > 0:  # a 0 segment atop a stack pins the axis there: leave headroom
            ax.set_ylim(top=bottom.max() * 1.08)
    fig.supylabel("failed / sent", fontsize=9)
    handles = [
        Patch(facecolor=f"C{i}", label=k.removeprefix("failure_rate_")) for i, k in enumerate(shown)
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="error kind")
    _legend_below(fig, [_marked_handle()] if any_marked else [])
    fig.suptitle(title)
    return fig
