"""``lblab validate``: the simulator against closed-form queueing results.

Every case is exponential service with mean 1 (so times are in mean service times),
Poisson arrivals at load ``rho`` per server, FIFO single-worker servers, no link delays,
no deadline, and the real ``Pool`` and strategies in ``simulator.run.Simulation``:

=================  ===============================  ====================================
case               simulated                        closed form (``simulator.theory``)
=================  ===============================  ====================================
random             ``r`` over 10 servers            M/M/1 at each server
round robin        ``rr`` over 10 servers           E_10/M/1 (every 10th arrival)
shared queue       one server with 10 workers       M/M/10, Erlang C
p2c (JSQ(2))       ``p2c`` over 200 servers         supermarket model, d = 2, n -> inf
JSQ(3)             ``ShortestOfD(3)``, 200          supermarket model, d = 3
p2c tail s_i       the p2c runs at rho = 0.9        fraction with >= i jobs, i = 1..6
JSQ, lc            ``lc`` tie=random / tie=first    between Erlang C (no policy beats
                   over 10 servers                  one shared queue) and the d=2 value
=================  ===============================  ====================================

A case's value is the mean time in system of the requests sent after a warm-up (runs
start from empty queues); the tail fractions are the time average over the same window
(up to the last send, before the queues drain) of every server sampled every 0.5 time
units. Each case runs several seeds; the interval is the 95 % t-interval over the
seeds' values (``analysis.stats.mean_ci``). At n = 200 the JSQ(d) figures sit slightly
above the n -> infinity ones, most in the far tail (measured here: T at rho = 0.9 is
+1.1 % at n = 100; s_6 is 0.0043 at n = 100, 0.0024 at n = 300, vs 0.0013).

Verdicts, with ``error`` the relative distance from the closed form (for a bound case,
how far outside the bounds; for a tail fraction the absolute difference):

- ``pass``: within the tolerance (3 %; tail fractions 0.005);
- ``within CI``: outside 3 % but not by more than the interval's half-width, so the run
  cannot tell (M/M/1 at rho = 0.9 needs millions of requests for a +-3 % interval);
- ``FAIL``: further off than the tolerance plus the half-width: the simulator is wrong
  until shown otherwise. The command exits 1 if any case fails.

Sizes: ``--quick`` (the test suite's) and the default, each fitting its time on two
cores; requests per run grow with the variance of the case (M/M/1 near saturation most).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

import typer

from lblab import stamp
from lblab.errors import ConfigError
from lblab.pages import GENERATED, table
from lblab.simulator import theory
from lblab.simulator.reproduce.parallel import run_calls
from lblab.stamp import Stamp

LOADS = (0.5, 0.7, 0.8, 0.9)
TOLERANCE = 0.03
SERVERS = 10
"""Servers of the random, round-robin, JSQ and lc cases (and workers of the shared queue)."""
SUPERMARKET_SERVERS = 200
"""Servers of the JSQ(d) cases: enough for the n -> infinity figures to hold within ~1 %
of T, few enough that warming up 200 servers stays cheap."""
TAILS = 6
TAIL_LOAD = 0.9
WARMUP = 0.1
"""Fraction of each run's sends (from empty queues) left out of the statistics, and at
least the policy's time to settle (``Policy.settle``)."""
TAIL_TOLERANCE = 0.005
"""Tail fractions are judged absolutely: the far tail converges slowly in n (at n = 200,
s_6 is about 0.002 where the n -> infinity value is 0.0013)."""
SAMPLE_PERIOD = 0.5
"""Time units between samples of every server's queue length (tail fractions)."""

Verdict = Literal["pass", "within CI", "FAIL"]


@dataclass(frozen=True, slots=True)
class Policy:
    """How one policy is simulated and what theory says of it at load ``rho``."""

    key: str
    label: str
    servers: int
    workers: int
    strategy: str
    options: tuple[tuple[str, str], ...] = ()
    d: int = 0
    """Choices of a ``ShortestOfD`` policy (0: the registered ``strategy``)."""
    settle: Callable[[float], float] = lambda rho: theory.relaxation_time(1, rho)
    """Time for queues started empty to reach the steady state at load ``rho``."""
    expected: Callable[[float], float] | None = None
    bounds: Callable[[float], tuple[float, float]] | None = None


def _supermarket_settles(rho: float) -> float:
    """The mean-field ODE of JSQ(2) from empty reaches 99 % of its fixed point's queue at
    9, 16, 24, 49 mean service times at rho 0.5, 0.7, 0.8, 0.9 (JSQ(3) sooner):
    ``5 / (1 - rho)`` covers all four."""
    return 5.0 / (1.0 - rho)


def _pooled_settles(rho: float) -> float:
    return theory.relaxation_time(SERVERS, rho)


def _jsq_bounds(rho: float) -> tuple[float, float]:
    return theory.mmc_sojourn(SERVERS, rho), theory.supermarket_sojourn(2, rho)


POLICIES = (
    Policy("r", "random (r), M/M/1", SERVERS, 1, "r", expected=theory.mm1_sojourn),
    Policy(
        "rr",
        "round robin (rr), E10/M/1",
        SERVERS,
        1,
        "rr",
        expected=lambda rho: theory.erlang_m1_sojourn(SERVERS, rho),
    ),
    Policy(
        "shared",
        "one shared queue, M/M/10",
        1,
        SERVERS,
        "r",
        expected=lambda rho: theory.mmc_sojourn(SERVERS, rho),
        settle=_pooled_settles,
    ),
    Policy(
        "p2c",
        "p2c = JSQ(2), n=200",
        SUPERMARKET_SERVERS,
        1,
        "p2c",
        expected=lambda rho: theory.supermarket_sojourn(2, rho),
        settle=_supermarket_settles,
    ),
    Policy(
        "jsq3",
        "JSQ(3), n=200",
        SUPERMARKET_SERVERS,
        1,
        "r",  # a registered name for the config; the run gets a ShortestOfD(3)
        d=3,
        expected=lambda rho: theory.supermarket_sojourn(3, rho),
        settle=_supermarket_settles,
    ),
    Policy(
        "jsq",
        "JSQ (lc tie=random)",
        SERVERS,
        1,
        "lc",
        (("tie", "random"),),
        bounds=_jsq_bounds,
        settle=_pooled_settles,
    ),
    Policy(
        "lc", "least connections (lc)", SERVERS, 1, "lc", bounds=_jsq_bounds, settle=_pooled_settles
    ),
)
POLICY = {p.key: p for p in POLICIES}


@dataclass(frozen=True, slots=True)
class Size:
    """Seeds, and requests per seed by policy and load (``PER_SEED`` times ``scale``)."""

    name: str
    seeds: int
    scale: float

    def requests(self, policy: str, rho: float) -> int:
        return int(PER_SEED[policy][LOADS.index(rho)] * self.scale)


PER_SEED = {
    "r": (2_000, 4_000, 8_000, 25_000),
    "rr": (2_000, 4_000, 6_000, 12_000),
    "shared": (1_500, 3_000, 4_000, 10_000),
    "p2c": (5_000, 7_000, 10_000, 20_000),
    "jsq3": (4_000, 5_000, 8_000, 15_000),
    "jsq": (2_000, 2_000, 2_000, 2_000),
    "lc": (2_000, 2_000, 2_000, 2_000),
}
"""Requests per seed at rho 0.5, 0.7, 0.8, 0.9 in the quick size.

The relative variance of a mean sojourn is about ``c / requests``, with c measured here
near 5, 18, 80 and 460 for M/M/1 (``r``) at rho 0.5 ... 0.9, 150 for E10/M/1 and
80-230 for M/M/10 at 0.9, 30-60 for JSQ(2) and JSQ(3) at 0.9: the budget goes where the
variance is, though M/M/1 near saturation would need millions of requests for a +-3 %
interval. The JSQ(d) runs over 200 servers spend the most on warm-up (up to 40 % of
their sends); JSQ and lc only have to meet bounds.
"""

SIZES = {
    "quick": Size("quick", 8, 1.0),
    "default": Size("default", 8, 2.0),
}


@dataclass(frozen=True, slots=True)
class SeedResult:
    sojourn: float
    """Mean time in system of the requests sent after the warm-up."""
    tails: tuple[float, ...]
    """Time-averaged fraction of servers with >= 1, 2, ... jobs (when asked for)."""


def run_seed(policy: Policy, rho: float, requests: int, seed: int, tails: int = 0) -> SeedResult:
    """One simulated run: the mean time in system after warm-up, and tail fractions."""
    from lblab.simulator.clock import at
    from lblab.simulator.config import EPOCH, ServerGroup, SimConfig, rng_stream
    from lblab.simulator.run import Simulation
    from lblab.simulator.service import Exponential
    from lblab.simulator.shortest_of_d import ShortestOfD
    from lblab.simulator.workload import OpenArrivals

    rate = policy.servers * policy.workers * rho
    cfg = SimConfig(
        strategy=policy.strategy,
        strategy_options=policy.options,
        servers=(
            ServerGroup(count=policy.servers, service=Exponential(1.0), workers=policy.workers),
        ),
        requests=requests,
        arrivals=OpenArrivals(rate=rate),
        deadline=None,
        report_period=1e6,  # no agent samples or health ticks inside the run: they cost
        tick_period=1e6,  # events and nothing here uses them
        picks_every=0,
        seed=1,
        replication=seed + 1,
        run_id="validate",
    )
    strategy = ShortestOfD(policy.d, rng=rng_stream(1, seed, "strategy")) if policy.d else None
    sim = Simulation(cfg, strategy=strategy)
    warm = max(WARMUP * requests / rate, policy.settle(rho))
    if warm >= 0.8 * requests / rate:
        raise ConfigError(
            f"validate: {requests} requests at rate {rate:g} end before {policy.label} at "
            f"rho {rho} has warmed up ({warm:.0f} mean service times); give more requests"
        )
    samples: list[tuple[float, list[int]]] = []
    """(time, servers with exactly 0, 1, ..., >= tails jobs) every SAMPLE_PERIOD."""

    def sample(_: None) -> None:
        if sim.env.now >= warm:
            counts = [0] * (tails + 1)
            for server in sim.servers:
                counts[min(server.load, tails)] += 1
            samples.append((sim.env.now, counts))
        at(sim.env, SAMPLE_PERIOD, sample)  # the run stops at its last answer

    if tails:
        at(sim.env, SAMPLE_PERIOD, sample)
    result = sim.run()
    t_sent = result.requests.column("t_sent").to_numpy() - EPOCH
    latency = result.requests.column("latency_ms").to_numpy()
    # Queues drain after the last send: only samples up to it are the steady state.
    kept = [counts for t, counts in samples if t <= t_sent.max()]
    total = len(kept) * len(sim.servers)
    return SeedResult(
        sojourn=float(latency[t_sent >= warm].mean()) / 1000.0,
        tails=tuple(sum(sum(counts[i:]) for counts in kept) / total for i in range(1, tails + 1)),
    )


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: str
    policy: str
    rho: float
    metric: str
    """``T`` (mean time in system) or ``s_i`` (fraction of servers with >= i jobs)."""
    theory: float | None
    low: float | None
    high: float | None
    simulated: float
    ci_low: float
    ci_high: float
    seeds: int
    error: float
    """``T``: relative distance from the closed form (bound cases: how far outside the
    bounds, else 0). ``s_i``: absolute difference, in fractions of the servers."""
    tolerance: float
    half_width: float
    """The interval's half-width on the same scale as ``error``."""
    verdict: Verdict

    @property
    def passed(self) -> bool:
        return self.verdict != "FAIL"


def verdict(error: float, half_width: float, tolerance: float) -> Verdict:
    if abs(error) <= tolerance:
        return "pass"
    return "within CI" if abs(error) <= tolerance + half_width else "FAIL"


def _case(
    policy: Policy, rho: float, metric: str, values: Sequence[float], expected: float | None
) -> CaseResult:
    from lblab.analysis.stats import mean_ci

    ci = mean_ci(values)
    half = (ci.hi - ci.lo) / 2.0 if ci.has_ci else math.inf
    bounds = None
    if metric != "T":  # a tail fraction: absolute scale
        assert expected is not None
        error, tolerance = ci.mean - expected, TAIL_TOLERANCE
    elif expected is not None:
        error, tolerance, half = (ci.mean - expected) / expected, TOLERANCE, half / expected
    else:
        assert policy.bounds is not None
        bounds = low, high = policy.bounds(rho)
        error = min(ci.mean - low, 0.0) / low + max(ci.mean - high, 0.0) / high
        tolerance, half = TOLERANCE, half / (low if ci.mean < (low + high) / 2 else high)
    return CaseResult(
        case=policy.label if metric == "T" else f"{policy.label}, {metric}",
        policy=policy.key,
        rho=rho,
        metric=metric,
        theory=expected,
        low=bounds[0] if bounds else None,
        high=bounds[1] if bounds else None,
        simulated=ci.mean,
        ci_low=ci.lo,
        ci_high=ci.hi,
        seeds=ci.n,
        error=error,
        tolerance=tolerance,
        half_width=half,
        verdict=verdict(error, half, tolerance),
    )


@dataclass(frozen=True, slots=True)
class Report:
    size: str
    cases: tuple[CaseResult, ...]
    requests: int
    wall_seconds: float
    jobs: int
    stamp: Stamp

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "passed": self.passed,
            "requests": self.requests,
            "wall_seconds": round(self.wall_seconds, 2),
            "jobs": self.jobs,
            "stamp": asdict(self.stamp),
            "cases": [asdict(c) | {"passed": c.passed} for c in self.cases],
        }


Task = tuple[str, float, int, int, int]
"""``(policy key, rho, requests, seed, tails)``: one simulated run."""


def _run_task(task: Task) -> SeedResult:
    key, rho, requests, seed, tails = task
    return run_seed(POLICY[key], rho, requests, seed, tails)


def _run_all(
    tasks: Sequence[Task], jobs: int, progress: Callable[[str], None] | None = None
) -> list[SeedResult]:
    """The runs, in task order, on ``jobs`` processes (largest first, so they end together)."""
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i][2])
    calls = [
        (_run_task, (tasks[i],), "{} rho {} seed {}".format(*tasks[i][:2], tasks[i][3]))
        for i in order
    ]
    results = run_calls(calls, jobs, progress)
    out: list[SeedResult] = [results[0]] * len(tasks)
    for k, i in enumerate(order):
        out[i] = results[k]
    return out


def run_validation(
    size: Size, jobs: int = 1, progress: Callable[[str], None] | None = None
) -> Report:
    """Every policy at every load, ``size.seeds`` seeds each; the verdicts. ``progress``
    hears of each finished simulation."""
    wall0 = time.perf_counter()
    plan = [
        (policy, rho, TAILS if policy.key == "p2c" and rho == TAIL_LOAD else 0)
        for policy in POLICIES
        for rho in LOADS
    ]
    tasks = [
        (policy.key, rho, size.requests(policy.key, rho), seed, tails)
        for policy, rho, tails in plan
        for seed in range(size.seeds)
    ]
    runs = iter(_run_all(tasks, jobs, progress))
    cases: list[CaseResult] = []
    for policy, rho, tails in plan:
        seeds = [next(runs) for _ in range(size.seeds)]
        expected = policy.expected(rho) if policy.expected is not None else None
        cases.append(_case(policy, rho, "T", [r.sojourn for r in seeds], expected))
        for i in range(1, tails + 1):
            values = [r.tails[i - 1] for r in seeds]
            cases.append(_case(policy, rho, f"s_{i}", values, theory.supermarket_tail(2, rho, i)))
    requests = sum(t[2] for t in tasks)
    wall = time.perf_counter() - wall0
    return Report(size.name, tuple(cases), requests, wall, jobs, stamp.take())


def _figure(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.4f}" if abs(x) >= 0.01 else f"{x:.5f}"


def _error(c: CaseResult) -> tuple[str, str]:
    """Error and interval half-width as printed: % for times, absolute for fractions."""
    if c.theory is None and c.error == 0.0:
        return "inside", f"{100 * c.half_width:.2f} %"
    if c.metric == "T":
        return f"{100 * c.error:+.2f} %", f"{100 * c.half_width:.2f} %"
    return f"{c.error:+.4f}", f"{c.half_width:.4f}"


COLUMNS = ("case", "rho", "theory", "simulated [95 % CI]", "error", "+- CI", "verdict")
CAPTION = (
    f"pass: T within {TOLERANCE:.0%} of the closed form (s_i within {TAIL_TOLERANCE} "
    "absolute); within CI: further, but not beyond the 95 % interval's half-width; FAIL: "
    "beyond both"
)


def _rows(report: Report) -> list[tuple[str, ...]]:
    """The table's rows as printed, one per case, in ``COLUMNS`` order."""
    rows: list[tuple[str, ...]] = []
    for c in report.cases:
        expected = (
            _figure(c.theory) if c.theory is not None else f"{_figure(c.low)} .. {_figure(c.high)}"
        )
        error, half = _error(c)
        simulated = f"{_figure(c.simulated)} [{_figure(c.ci_low)}, {_figure(c.ci_high)}]"
        rows.append((c.case, f"{c.rho:g}", expected, simulated, error, half, c.verdict))
    return rows


def _totals(report: Report) -> tuple[str, int]:
    """The closing line (without its count of failures) and that count."""
    failed = sum(not c.passed for c in report.cases)
    unsure = sum(c.verdict == "within CI" for c in report.cases)
    line = (
        f"{report.requests:,} simulated requests in {report.wall_seconds:.1f} s on "
        f"{report.jobs} process(es); {len(report.cases) - failed - unsure} pass, "
        f"{unsure} within CI; "
    )
    return line, failed


def print_report(report: Report) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"lblab validate ({report.size}): mean time in system T in mean service "
        f"times, s_i = fraction of servers with >= i jobs",
        caption=CAPTION,
    )
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "case" else "right")
    styles = {"pass": "green", "within CI": "yellow", "FAIL": "bold red"}
    for *cells, verdict in _rows(report):
        style = styles[verdict]
        table.add_row(*cells, f"[{style}]{verdict}[/{style}]")
    console = Console(width=150)
    console.print(table)
    line, failed = _totals(report)
    console.print(line + (f"[bold red]{failed} failed[/]" if failed else "[green]none failed[/]"))


def markdown_page(report: Report, command: str) -> str:
    """``docs/results/validation.md`` as ``command`` regenerates it: stamped, every case."""
    line, failed = _totals(report)
    rows = table(COLUMNS, list(_rows(report)))
    return "\n".join(
        [
            "# Simulator validation",
            "",
            GENERATED,
            "",
            "What the cases are and how they are judged: "
            "[Simulate, validate, twin](../guides/simulate.md#validate-the-simulator).",
            "",
            f"## The {report.size} size",
            "",
            report.stamp.markdown(command),
            "",
            "Mean time in system T in mean service times; s_i = fraction of servers with at "
            f"least i jobs. {CAPTION}.",
            "",
            *rows,
            "",
            line + (f"**{failed} failed**." if failed else "none failed."),
            "",
        ]
    )


def _every_tenth(runs: int, t0: float) -> Callable[[str], None]:
    """A progress line on stderr at every tenth of the runs, whatever stderr is (a
    terminal, a pipe, a CI log): a validation takes minutes."""
    step, heard = max(1, math.ceil(runs / 10)), [0]

    def progress(_: str) -> None:
        heard[0] += 1
        done = heard[0] if heard[0] <= runs else runs
        if done % step == 0 or done == runs:
            elapsed = time.perf_counter() - t0
            typer.echo(f"  {done}/{runs} simulations done, {elapsed:.0f} s", err=True)

    return progress


def validate(
    quick: Annotated[
        bool, typer.Option("--quick", help="The CI size: fewer requests per run.")
    ] = False,
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="table (rich), json, or markdown: the docs page results/validation.md, "
            "stamped with the commit, the date and the machine's cores and load.",
        ),
    ] = "table",
    jobs: Annotated[
        int, typer.Option(min=1, max=64, help="Processes to run the simulations on [2].")
    ] = 2,
) -> None:
    """Check the simulator against closed-form queueing results; exit 1 if a case fails."""
    if output_format not in ("table", "json", "markdown"):
        raise ConfigError(f"--format {output_format!r}: give table, json or markdown")
    size = SIZES["quick" if quick else "default"]
    runs = len(POLICIES) * len(LOADS) * size.seeds
    typer.secho(f"running {runs} simulations ({size.name}) on {jobs} process(es) ...", err=True)
    report = run_validation(size, jobs, _every_tenth(runs, time.perf_counter()))
    if output_format == "json":
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif output_format == "markdown":
        command = "uv run lblab validate" + (" --quick" if quick else "") + " --format markdown"
        typer.echo(markdown_page(report, command), nl=False)
    else:
        print_report(report)
    if not report.passed:
        raise typer.Exit(1)
