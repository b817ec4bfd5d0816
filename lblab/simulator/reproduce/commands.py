"""``lblab reproduce ingram|cheetah|martins|linkerd|prequal|thesis``: tables on stdout, charts
and JSON in ``--out`` (``thesis``: in the run directory)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lblab.config import MAX_SEED, check_range
from lblab.errors import ConfigError
from lblab.pages import FORMAT_HELP, check_format, stamped, table, this_command
from lblab.simulator.config import MAX_SERVERS
from lblab.simulator.reproduce.thesis import thesis
from lblab.stamp import Stamp, take

if TYPE_CHECKING:  # the command line imports this module; the claims bring numpy
    from lblab.analysis.paper_claims import Verdict

MAX_JOBS = 64
MAX_RUNS = 1000
"""Most runs (seeds) per row: a thousand already resolves medians far past the papers'."""


def _ints(text: str, field: str, maximum: int = 10_000_000) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"{field}: {text!r} is not a comma list of numbers, e.g. 10,100,500"
        ) from None
    if not values or min(values) < 1 or max(values) > maximum:
        raise ConfigError(f"{field}: {text!r} needs numbers in 1..{maximum}, e.g. 10,100,500")
    return values


def _names(text: str, valid: Sequence[str], field: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise ConfigError(f"{field}: {bad or text!r} not among {', '.join(valid)}")
    return names


LEFT = {"algorithm", "strategy", "note", "nodes", "claim", "paper", "lblab", "verdict", "source",
        "why", "holds if"}  # fmt: skip


def _print_table(title: str, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    from lblab.analysis.paper_claims import VERDICT_STYLE

    table = Table(title=title, show_lines="verdict" in columns)
    for c in columns:
        table.add_column(c, justify="left" if c in LEFT else "right")
    for row in rows:
        cells = []
        for c in columns:
            text = "" if row.get(c) is None else str(row.get(c))
            style = VERDICT_STYLE.get(text) if c == "verdict" else None
            cells.append(f"[{style}]{text}[/]" if style else text)
        table.add_row(*cells)
    Console(width=200).print(table)


def _stamp_section(fmt: str, stamp: Stamp, command: str | None = None) -> None:
    """In markdown: the section's stamp (``pages.stamped``)."""
    if fmt == "markdown":
        typer.echo(stamped(stamp, command or this_command()))


def _emit(
    fmt: str,
    title: str,
    rows: list[dict[str, Any]],
    columns: Sequence[str],
    out: Path | None,
    table_rows: list[dict[str, Any]] | None = None,
) -> None:
    """``table_rows`` (default: ``rows``) as a table (rich, or markdown under a ``###``
    heading; in JSON ``_claims`` prints them with the claims); ``rows`` as JSON in ``out``."""
    if fmt == "table":
        _print_table(title, table_rows or rows, columns)
    elif fmt == "markdown":
        typer.echo("\n".join([f"### {title}", "", *table(columns, table_rows or rows), ""]))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        name = title.split()[0].lower()
        (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")


def _claims(
    fmt: str,
    name: str,
    title: str,
    seeds: Sequence[int],
    verdicts: Sequence[Verdict],
    out: Path | None,
    tables: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> None:
    """The paper's claims, each with its verdict and interval over ``seeds``: after the
    tables (rich or markdown), or with them as one JSON object (``paper_claims.document``,
    ``tables``, then ``extra``); in ``out``, ``NAME-claims.json`` and ``NAME-claims.md``."""
    from lblab.analysis import paper_claims

    data = paper_claims.document(name, title, seeds, verdicts)
    if fmt == "json":
        typer.echo(json.dumps({**data, "tables": tables, **(extra or {})}, indent=2))
    elif fmt == "markdown":
        typer.echo(paper_claims.markdown(verdicts, title, level=3))
    else:
        _print_table(title, [v.table_row() for v in verdicts], paper_claims.COLUMNS)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}-claims.json").write_text(json.dumps(data, indent=2) + "\n")
        (out / f"{name}-claims.md").write_text(paper_claims.markdown(verdicts, title))


def _seeds(first: int, count: int) -> list[int]:
    """``count`` seeds counting up from ``first``; past ``MAX_SEED`` they go on from 0, so
    every ``--seed`` works with every ``--seeds`` (and distinct seeds stay distinct)."""
    return [(first + i) % (MAX_SEED + 1) for i in range(count)]


def _progress(fmt: str):  # -> Callable[[str], None] | None
    if fmt != "table":
        return None
    return lambda msg: typer.echo(f"  running {msg} ...", err=True)


def ingram(
    requests: Annotated[str, typer.Option(help="Request counts, comma separated.")] = "10,100,500",
    algorithms: Annotated[str, typer.Option(help="Algorithms to run.")] = (
        "first,rr,r,lc,dynamic,dynamic-immediate,dynamic-hybrid"
    ),
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="Runs per row (own timer jitter each): medians shown, each claim's interval "
            "over them.",
        ),
    ] = 20,
    lblab_strategies: Annotated[
        bool,
        typer.Option(
            "--lblab-strategies",
            help="Run lblab's dynamic* (numeric estimates) instead of the report's code.",
        ),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
    out: Annotated[
        Path | None, typer.Option(help="Also write ingram.json and a chart here.")
    ] = None,
) -> None:
    """Ingram's 5 FIFO servers (250/500/100/200/700 ms), requests 25 ms apart; his claims judged."""
    from lblab.simulator.reproduce.ingram import ALGORITHMS, judge_claims, reproduce_ingram

    stamp = take()
    check_format(fmt)
    rows = reproduce_ingram(
        _ints(requests, "--requests"),
        _names(algorithms, ALGORITHMS, "--algorithms"),
        seeds,
        as_coded=not lblab_strategies,
    )
    data = [r.as_dict() for r in rows]
    columns = ("algorithm", "paper_name", "requests", "total_ms", "total_range_ms",
               "paper_total_ms", "total_diff_pct", "average_ms", "paper_average_ms",
               "average_diff_pct", "rank", "paper_rank", "note")  # fmt: skip
    _stamp_section(fmt, stamp)
    _emit(fmt, "Ingram (CS 422): simulated vs published", data, columns, out)
    title = f"Ingram (CS 422): the report's claims over {seeds} seeds"
    _claims(fmt, "ingram", title, range(1, seeds + 1), judge_claims(rows), out, {"ingram": data})
    if out is not None:
        from lblab.simulator.reproduce.ingram import ingram_chart

        ingram_chart(rows, out / "ingram.png")


def cheetah(
    servers: Annotated[
        int, typer.Option(min=1, max=100_000, help="Servers in the imbalance study (paper: 468).")
    ] = 468,
    active: Annotated[
        str, typer.Option(help="Active connections per point (paper: 20K..200K).")
    ] = "20000,50000,100000",
    duration: Annotated[str, typer.Option(help="Connection duration model.")] = "lognormal:1s,1.0",
    study: Annotated[
        str, typer.Option(help="Which studies to run: imbalance, broken, awrr.")
    ] = "imbalance,broken,awrr",
    awrr_servers: Annotated[
        str | None,
        typer.Option(
            help="AWRR comparison: server counts (default 64, the paper's; --full 16,32,64)."
        ),
    ] = None,
    awrr_load: Annotated[
        float, typer.Option(help="AWRR comparison: load per server (0.05..0.95).")
    ] = 0.6,
    runs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="AWRR comparison: 15 s runs per strategy (default --seeds; --full 10).",
        ),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="Imbalance and broken connections: seeds per point (from --seed); the tables "
            "average them, each claim's interval is over them.",
        ),
    ] = 5,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="The old depth: imbalance over 2 + 4 mean durations, 10 AWRR runs."
        ),
    ] = False,
    jobs: Annotated[
        int | None, typer.Option(min=1, max=MAX_JOBS, help="Worker processes (default 2).")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="The first seed.")] = 1,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
    out: Annotated[Path, typer.Option(help="Charts and JSON here.")] = Path(
        "results/reproduce-cheetah"
    ),
) -> None:
    """Cheetah: imbalance, broken connections, AWRR vs Pow2 vs LL; its claims judged."""
    from lblab.simulator.reproduce import cheetah as ch
    from lblab.simulator.reproduce import cheetah_awrr as aw
    from lblab.simulator.reproduce.parallel import default_jobs, run_calls
    from lblab.simulator.service import LogNormal, parse_service

    stamp = take()
    check_format(fmt)
    check_range("--awrr-load", awrr_load, minimum=0.05, maximum=0.95)
    studies = _names(study, ("imbalance", "broken", "awrr"), "--study")
    model = parse_service(duration, "--duration")
    if not isinstance(model, LogNormal):
        raise ConfigError("--duration: give a lognormal model, e.g. lognormal:1s,1.0")
    actives = _ints(active, "--active")
    depth = ch.FULL if full else ch.QUICK
    seed_list = _seeds(seed, seeds)
    awrr_runs = runs or (10 if full else seeds)
    awrr_counts = _ints(
        awrr_servers or ("16,32,64" if full else "64"), "--awrr-servers", MAX_SERVERS
    )
    awrr_calls, imbalance_calls, broken_calls = [], [], []
    if "awrr" in studies:
        awrr_calls = [(aw.awrr_point, (name, n, awrr_load, 15.0, awrr_runs, seed),
                       f"awrr comparison {name} {n} servers")
                      for n in sorted(awrr_counts, reverse=True) for name in aw.STRATEGIES]  # fmt: skip
    if "imbalance" in studies:
        imbalance_calls = [(ch.imbalance_point, (name, servers, n, model, s, depth),
                            f"imbalance {name} {n} active, seed {s}")
                           for n in sorted(actives, reverse=True)
                           for name in ch.IMBALANCE_STRATEGIES for s in seed_list]  # fmt: skip
    if "broken" in studies:
        broken_calls = [(ch.broken_run, (name, ch.ScalingPlan(), LogNormal(0.3, 1.0), s),
                         f"broken connections {name}, seed {s}")
                        for name in ch.BROKEN_STRATEGIES for s in seed_list]  # fmt: skip
    # The costliest first (workers take calls in order): the pool-driven imbalance points.
    heavy = [c for c in imbalance_calls if c[1][0] not in ch.STATELESS]
    light = [c for c in imbalance_calls if c[1][0] in ch.STATELESS]
    calls = heavy + awrr_calls + broken_calls + light
    claim_sets = {"imbalance": ch.IMBALANCE_CLAIMS, "broken": ch.BROKEN_CLAIMS, "awrr": aw.CLAIMS}
    echo = None if fmt != "table" else (lambda msg: typer.echo(f"  {msg}", err=True))
    results = run_calls(calls, jobs or default_jobs(), echo)
    out.mkdir(parents=True, exist_ok=True)
    _stamp_section(fmt, stamp)
    awrr_rows = sorted(
        (r for r in results if isinstance(r, aw.AwrrRow)),
        key=lambda r: (r.servers, list(aw.STRATEGIES).index(r.strategy)),
    )
    tables: dict[str, Any] = {}
    if awrr_rows:
        data = tables["awrr"] = aw.awrr_table(awrr_rows)
        _emit(fmt, "AWRR vs Pow2 vs least loaded (Cheetah Fig. 8)", data, tuple(data[0]), out)
        aw.awrr_chart(awrr_rows, out / "awrr.png")
    imbalance_runs = [r for r in results if isinstance(r, ch.ImbalanceRow)]
    rows = sorted(
        ch.mean_imbalance(imbalance_runs),
        key=lambda r: (list(ch.IMBALANCE_STRATEGIES).index(r.strategy), r.active),
    )
    if rows:
        hash_excess = {r.active: r.excess_pct for r in rows if r.strategy == "maglev"}
        data = tables["imbalance"] = [
            {
                "strategy": r.strategy,
                "servers": r.servers,
                "active": r.active,
                "seeds": seeds,
                "max_over_mean": round(r.imbalance, 4),
                "excess_pct": round(r.excess_pct, 2),
                "better_than_hash_x": round(hash_excess[r.active] / r.excess_pct, 1)
                if r.active in hash_excess and r.excess_pct > 0
                else None,
                "paper_x": ch.PAPER_IMBALANCE_FACTORS.get(r.strategy),
            }
            for r in rows
        ]
        _emit(fmt, f"Imbalance (Cheetah Fig. 2b), mean of {seeds} seeds", data, tuple(data[0]), out)
        ch.imbalance_chart(rows, out / "imbalance.png")
    rows_b = [r for r in results if isinstance(r, ch.BrokenRow)]
    if rows_b:
        data = tables["broken"] = [
            {
                "strategy": r.strategy,
                "seed": r.seed,
                "connections": r.connections,
                "broken": r.broken,
                "broken_pct": round(r.broken_pct, 3),
                "peak_pct_per_s": round(r.peak_pct_per_s, 2),
                "paper_peak_pct": ch.PAPER_BROKEN_PCT.get(r.strategy),
            }
            for r in rows_b
        ]
        _emit(fmt, "Broken connections (Cheetah Fig. 9), each seed", data, tuple(data[0]), out)
        ch.broken_chart([r for r in rows_b if r.seed == seed], out / "broken.png")
    claims = [c for study in studies for c in claim_sets[study]]
    verdicts = [*ch.judge_claims(imbalance_runs, rows_b, [c for c in claims if c not in aw.CLAIMS]),
                *aw.judge_claims(awrr_rows, [c for c in claims if c in aw.CLAIMS])]  # fmt: skip
    title = f"Cheetah: the paper's claims over {seeds} seeds ({awrr_runs} AWRR runs)"
    _claims(fmt, "cheetah", title, seed_list, verdicts, out, tables)
    if fmt == "table":
        typer.echo(f"charts in {out}")


def martins(
    sim: Annotated[
        bool,
        typer.Option(
            "--sim/--live", help="Simulate (the live run is `lblab run --preset martins`)."
        ),
    ] = True,
    rates: Annotated[str, typer.Option(help="Request rates, req/s.")] = "10,50,100,150,200",
    algorithms: Annotated[str, typer.Option(help="Algorithms to run.")] = "rr,lc,lrt",
    seconds: Annotated[
        float, typer.Option(help="Seconds of arrivals per point (0.1..3600).")
    ] = 20.0,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="Seeds per point (1, 2, ...): the table pools them, each claim's interval "
            "is over them.",
        ),
    ] = 5,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
    out: Annotated[Path, typer.Option(help="Chart and JSON here.")] = Path(
        "results/reproduce-martins"
    ),
) -> None:
    """Martins et al.: 10 nodes x 5 workers, (in)homogeneous, RR/LC/LRT; their claims judged."""
    from lblab.simulator.reproduce.martins import (
        ALGORITHMS,
        judge_claims,
        martins_chart,
        martins_nodes_chart,
        martins_service_chart,
        reproduce_martins,
    )

    stamp = take()
    check_format(fmt)
    if not sim:
        raise ConfigError("the live Martins experiment runs with `lblab run --preset martins`")
    check_range("--seconds", seconds, minimum=0.1, maximum=3600)
    rows = reproduce_martins(
        _ints(rates, "--rates"),
        _names(algorithms, ALGORITHMS, "--algorithms"),
        seconds,
        seeds,
        progress=_progress(fmt),
    )
    data = [r.as_dict() for r in rows]
    shown = [r.table_dict() for r in rows]
    title = "Martins average service time (Fig. 15 / 18), requests per node (Fig. 13 / 16)"
    _stamp_section(fmt, stamp)
    _emit(fmt, title, data, tuple(shown[0]), out, shown)
    title = f"Martins et al.: the paper's claims over {seeds} seeds"
    _claims(fmt, "martins", title, range(1, seeds + 1), judge_claims(rows), out, {"martins": data})
    martins_chart(rows, out / "martins.png")
    martins_nodes_chart(rows, out / "martins-nodes.png")
    martins_service_chart(rows, out / "martins-service.png")
    if fmt == "table":
        typer.echo(f"charts in {out}: martins.png, martins-nodes.png, martins-service.png")


def linkerd(
    strategies: Annotated[str, typer.Option(help="Strategies to run.")] = "rr,lc,peak-ewma",
    model: Annotated[
        str,
        typer.Option(
            help="Timeout models: post (balancer waits, 1 s caller timeout), lblab (1 s "
            "deadline at the balancer, passive ejection)."
        ),
    ] = "post,lblab",
    seconds: Annotated[
        float, typer.Option(help="Run length, 1..3600 s (post: 60); the window scales.")
    ] = 60.0,
    rate: Annotated[float, typer.Option(help="Requests/s (1..100000).")] = 1000.0,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="The first seed.")] = 1,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="Seeds per run (from --seed): the table pools them, each claim's interval "
            "is over them.",
        ),
    ] = 5,
    jobs: Annotated[
        int | None, typer.Option(min=1, max=MAX_JOBS, help="Worker processes (default 2).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
    out: Annotated[Path, typer.Option(help="Chart and JSON here.")] = Path(
        "results/reproduce-linkerd"
    ),
) -> None:
    """Linkerd "Beyond Round Robin": 11 backends, one at 2 s for 30 s; the post's claims judged."""
    from lblab.balancer.strategies.registry import strategy_class
    from lblab.simulator.reproduce.linkerd import (
        MODES,
        judge_claims,
        linkerd_chart,
        pooled,
        reproduce_linkerd,
    )
    from lblab.simulator.reproduce.parallel import default_jobs

    stamp = take()
    check_format(fmt)
    check_range("--seconds", seconds, minimum=1, maximum=3600)
    check_range("--rate", rate, minimum=1, maximum=100_000)
    names = [x.strip() for x in strategies.split(",") if x.strip()]
    if not names:
        raise ConfigError("--strategies: give strategy names, e.g. rr,lc,peak-ewma")
    for name in names:
        strategy_class(name)  # an unknown name is a ConfigError naming the known ones
    modes = _names(model, MODES, "--model")
    seed_list = _seeds(seed, seeds)
    runs = reproduce_linkerd(
        names,
        modes,
        seconds,
        rate,
        seed_list,
        jobs or default_jobs(),
        None if fmt != "table" else (lambda msg: typer.echo(f"  {msg}", err=True)),
    )
    rows = pooled(runs)
    data = [r.as_dict() for r in rows]
    _stamp_section(fmt, stamp)
    title = f"Linkerd Beyond Round Robin: simulated ({seeds} seeds pooled) vs published"
    _emit(fmt, title, data, tuple(data[0]), out)
    title = f"Linkerd Beyond Round Robin: the post's claims over {seeds} seeds"
    _claims(fmt, "linkerd", title, seed_list, judge_claims(runs), out, {"linkerd": data})
    linkerd_chart(rows, out / "linkerd.png")
    if fmt == "table":
        typer.echo(f"chart in {out / 'linkerd.png'}")


def prequal(
    study: Annotated[
        str,
        typer.Option(
            help="claims: the paper's claims (prequal, wrr-orca, p2c; r_probe 3 to 0.25); "
            "table: the p99 of every production strategy with 1 and 8 balancers."
        ),
    ] = "claims",
    seconds: Annotated[
        float,
        typer.Option(help="Seconds of arrivals per run, 14..3600; the first 12 are warm-up."),
    ] = 32.0,
    seed: Annotated[
        int, typer.Option(min=0, max=MAX_SEED, help="The first seed (the table: its one seed).")
    ] = 1,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_RUNS,
            help="Claims: seeds per run (from --seed); the runs table averages them, each "
            "claim's interval is over them.",
        ),
    ] = 5,
    jobs: Annotated[
        int | None, typer.Option(min=1, max=MAX_JOBS, help="Worker processes (default 2).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
    out: Annotated[
        Path | None, typer.Option(help="Also write prequal.json and the claims here.")
    ] = None,
) -> None:
    """Prequal (NSDI 2024): tail latency and RIF against wrr-orca and P2C; its claims judged."""
    import time
    from dataclasses import replace

    from lblab.simulator.reproduce import prequal as pq
    from lblab.simulator.reproduce.parallel import default_jobs

    check_format(fmt)
    studies = _names(study, ("claims", "table"), "--study")
    check_range("--seconds", seconds, minimum=14, maximum=3600)
    seed_list = _seeds(seed, seeds)
    progress = None if fmt != "table" else (lambda msg: typer.echo(f"  {msg}", err=True))
    started, stamp = time.perf_counter(), take()
    command = (
        f"lblab reproduce prequal --study {','.join(studies)} --seconds {seconds:g} --seed {seed}"
        f" --seeds {seeds}"
    )
    tables: dict[str, Any] = {}
    settings: dict[str, str] = {}
    verdicts: list[Verdict] = []
    if "claims" in studies:
        setting = replace(pq.CLAIMS, seconds=seconds)
        rows = pq.reproduce_claims(setting, seed_list, jobs or default_jobs(), progress)
        settings["runs"] = setting.describe()
        tables["runs"] = pq.runs_table(rows)
        verdicts = pq.judge_claims(rows)
    if "table" in studies:
        setting = replace(pq.TABLE, seconds=seconds)
        rows = pq.reproduce_table(setting, seed, jobs or default_jobs(), progress)
        settings["table"] = f"{setting.describe()}; seed {seed}"
        tables["table"] = pq.strategies_table(rows)
    wall = time.perf_counter() - started
    title = f"Prequal (NSDI 2024): the paper's claims over {seeds} seeds"
    extra = {"settings": settings, "not_modelled": list(pq.TESTBED_GAPS),
             "stamp": stamp.markdown(command), "wall_seconds": round(wall, 1)}  # fmt: skip
    if out is not None:
        from lblab.analysis.paper_claims import document

        out.mkdir(parents=True, exist_ok=True)
        data = {**document("prequal", title, seed_list, verdicts), "tables": tables, **extra}
        (out / "prequal.json").write_text(json.dumps(data, indent=2) + "\n")
    _stamp_section(fmt, stamp, command)
    if "runs" in tables and fmt != "json":
        runs = tables["runs"]
        _emit(fmt, f"Runs, mean of {seeds} seeds: {settings['runs']}", runs, tuple(runs[0]), None)
        gaps = [f"- {gap}" if fmt == "markdown" else f"  - {gap}" for gap in pq.TESTBED_GAPS]
        head = ["What the paper's testbed had that this simulation does not:"]
        typer.echo("\n".join([*head, *([""] if fmt == "markdown" else []), *gaps, ""]))
    if "table" in tables:
        rows_t = tables["table"]
        title_t = f"p99 latency, failures at their latency: {settings['table']}"
        _emit(fmt, title_t, rows_t, tuple(rows_t[0]), None)
    if verdicts or fmt == "json":
        _claims(fmt, "prequal", title, seed_list, verdicts, out, tables, extra)
    if fmt == "markdown":
        typer.echo(f"Ran in {wall:.1f} s.")
    elif fmt == "table":
        typer.echo(f"{extra['stamp']} Ran in {wall:.1f} s.")


def register_reproductions(app: typer.Typer) -> None:
    app.command("ingram")(ingram)
    app.command("cheetah")(cheetah)
    app.command("martins")(martins)
    app.command("linkerd")(linkerd)
    app.command("prequal")(prequal)
    app.command("thesis")(thesis)
