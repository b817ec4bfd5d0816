"""The end of a run: the HTML report if ``analysis.report`` can build it, else a table.

The plain summary (per strategy x scenario: requests, ok %, p50/p95 latency, successful
requests per second) reads only ``requests.parquet`` and the manifest, so it works for
any run directory, even when the analysis part is missing or fails. It counts the rows
inside each phase's measured window and divides by the windows' lengths, the same
definition as the report's (``lblab/windows.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lblab.errors import ConfigError, WriteFailed
from lblab.manifest import Manifest, load
from lblab.results import MANIFEST
from lblab.validity import summary_lines
from lblab.windows import INSIDE, WINDOW_COLUMN


def summary_rows(run_dir: Path) -> list[dict[str, object]]:
    import pandas as pd

    df = pd.read_parquet(run_dir / "requests.parquet")
    if df.empty:
        return []
    if WINDOW_COLUMN in df:
        df = df[df[WINDOW_COLUMN] == INSIDE]
    elif "warmup" in df:
        df = df[~df["warmup"].fillna(False).astype(bool)]
    manifest = _manifest(run_dir)
    windows = manifest.windows() if manifest is not None else {}
    rows = []
    for (strategy, scenario), g in df.groupby(["strategy", "scenario"], sort=False):
        span = 0.0
        for rep, r in g.groupby("replication"):
            window = windows.get((str(scenario), str(strategy), int(rep)))
            span += window.seconds if window else r["t_sent"].max() - r["t_sent"].min()
        ok = g[g["ok"]]
        rows.append(
            {
                "strategy": strategy,
                "scenario": scenario,
                "requests": len(g),
                "ok_pct": 100.0 * len(ok) / len(g),
                "p50_ms": float(ok["latency_ms"].quantile(0.5)) if len(ok) else float("nan"),
                "p95_ms": float(ok["latency_ms"].quantile(0.95)) if len(ok) else float("nan"),
                "ok_per_s": len(ok) / span if span > 0 else float("nan"),
            }
        )
    return rows


def _manifest(run_dir: Path) -> Manifest | None:
    """The run's manifest, or None when it cannot be read: the summary then goes by the
    requests alone (the report says why the manifest could not be read)."""
    try:
        return load(run_dir / MANIFEST)
    except ConfigError:
        return None


def print_summary(run_dir: Path, console: Console) -> None:
    table = Table(title=f"{run_dir.name}: each phase's measured window (lblab/windows.py)")
    for col in ("strategy", "scenario", "requests", "ok %", "p50 ms", "p95 ms", "ok req/s"):
        table.add_column(col, justify="left" if col in ("strategy", "scenario") else "right")
    for r in summary_rows(run_dir):
        table.add_row(
            str(r["strategy"]),
            str(r["scenario"]),
            str(r["requests"]),
            f"{r['ok_pct']:.1f}",
            f"{r['p50_ms']:.1f}",
            f"{r['p95_ms']:.1f}",
            f"{r['ok_per_s']:.0f}",
        )
    console.print(table)
    balancers = balancer_rows(run_dir)
    if balancers:
        table = Table(title="per balancer, in the measured windows (successful requests)")
        for col in ("strategy", "scenario", "balancer", "requests", "ok %", "p50 ms", "p99 ms"):
            table.add_column(col, justify="left" if col in ("strategy", "scenario") else "right")
        for r in balancers:
            table.add_row(
                *(str(r[k]) for k in ("strategy", "scenario", "balancer", "requests")),
                *(f"{r[k]:.1f}" for k in ("ok_pct", "p50_ms", "p99_ms")),
            )
        console.print(table)
    for line in aperture_lines(run_dir):
        console.print(line, highlight=False)


def balancer_rows(run_dir: Path) -> list[dict[str, object]]:
    """Each balancer's share of a run of several (``testbed.balancers``): requests, ok %
    and the latency of its successful requests inside the windows; none for one."""
    import pandas as pd

    df = pd.read_parquet(run_dir / "requests.parquet")
    if "balancer" not in df or df["balancer"].nunique() < 2:
        return []
    if WINDOW_COLUMN in df:
        df = df[df[WINDOW_COLUMN] == INSIDE]
    rows = []
    for (strategy, scenario, balancer), g in df.groupby(
        ["strategy", "scenario", "balancer"], sort=False
    ):
        ok = g[g["ok"]]
        rows.append(
            {
                "strategy": strategy,
                "scenario": scenario,
                "balancer": balancer,
                "requests": len(g),
                "ok_pct": 100.0 * len(ok) / len(g),
                "p50_ms": float(ok["latency_ms"].quantile(0.5)) if len(ok) else float("nan"),
                "p99_ms": float(ok["latency_ms"].quantile(0.99)) if len(ok) else float("nan"),
            }
        )
    return rows


def aperture_lines(run_dir: Path) -> list[str]:
    """For a simulated run with apertures, each strategy's connections per server in its
    first phase (the servers each balancer's subset held; ``apertures`` of a phase)."""
    manifest = _manifest(run_dir)
    if manifest is None:
        return []
    lines, seen = [], set()
    for phase in manifest.phases:
        subsets = phase.extra.get("apertures")
        if not subsets or phase.strategy in seen:
            continue
        seen.add(phase.strategy)
        held: dict[str, int] = {}
        for subset in subsets.values():
            for server in subset.get("servers", {}):
                held[server] = held.get(server, 0) + 1
        servers = manifest.config.get("servers") or []
        per = [held.get(str(s.get("id")), 0) for s in servers] or list(held.values())
        lines.append(
            f"{phase.label}: {len(subsets)} balancers' apertures, connections per server "
            f"mean {sum(per) / len(per):.1f}, min {min(per)}, max {max(per)} (a full mesh: "
            f"{len(subsets)})"
        )
    return lines


def print_checks(run_dir: Path, console: Console) -> None:
    """The run's validity checks in a few lines: which phases not to trust, and why."""
    manifest = _manifest(run_dir)
    checked = manifest.checked_phases() if manifest is not None else []
    if not checked:
        return
    levels = [p.verdict for p in checked]
    console.print(
        f"checks: {len(checked)} phases, {levels.count('fail')} fail, "
        f"{levels.count('warn')} warn (report: 'Can these numbers be trusted?')"
    )
    for line in summary_lines((p.label, p.verdicts) for p in checked):
        console.print(f"  {line}", highlight=False, style="yellow")


def print_answer(run_dir: Path, console: Console) -> None:
    """The run's answer (``winners.json``) in plain words, when it has one."""
    from lblab.analysis.run import read_answer, verdict

    try:
        cells = read_answer(run_dir)
    except ConfigError as exc:
        console.print(f"answer unavailable: {exc}", style="yellow")
        return
    if cells:
        console.print(f"answer: {verdict(cells)}", highlight=False)


def print_all(run_dir: Path, console: Console) -> None:
    """What a finished run prints: the summary table, the checks, the answer."""
    print_summary(run_dir, console)
    print_checks(run_dir, console)
    print_answer(run_dir, console)


def finish(run_dir: Path, console: Console) -> Path | None:
    """Build the report; on any trouble print the summary and say why. Returns its path."""
    reason = None
    try:
        report = importlib.import_module("lblab.analysis.report")
    except ImportError as exc:
        reason = f"analysis.report is not available ({exc})"
    else:
        try:
            path = report.build_report(run_dir)
        except WriteFailed as exc:  # the run is complete; only its report is missing
            print_all(run_dir, console)
            raise WriteFailed(
                f"{exc}. The run's results are complete; make room, then build the report "
                f"with: lblab report {run_dir}",
                path=exc.path,
                no_room=exc.no_room,
            ) from exc
        except Exception as exc:  # the run's data stands without its report
            reason = f"build_report failed: {type(exc).__name__}: {exc}"
        else:
            print_all(run_dir, console)
            console.print(f"report: {path}")
            return Path(path) if path else None
    print_all(run_dir, console)
    console.print(f"report unavailable: {reason}", style="yellow")
    return None
