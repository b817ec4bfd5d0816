"""Failure-aware load in the simulator: equal servers, one of which fails part of its
requests fast; the share of requests that failed, for every strategy.

``uv run python benchmarks/failure_penalty.py [--rates 10,30,50,70,100] [--seeds 3]
[--seconds 30] [--only rr,peak-ewma] [--markdown]``

``SERVERS`` servers (exp 10 ms, one worker each) take open Poisson arrivals at ``LOAD``
of their capacity through one balancer with lblab's default health (ejection after 5
consecutive faults, panic at 50 %). From the start s1 answers each request, with
probability ``rate``, with a server-fault APPLICATION_ERROR after 1 ms (the ``fail``
timeline action; the request fails, it is not replayed). Every built-in the simulator
runs (not ``lease``: ``simulated_testbed.unsimulated``) is measured, and
``peak-ewma[failure_penalty_ms=5000]`` (Linkerd's penalty) beside plain ``peak-ewma``,
and ``rr`` and ``p2c`` with the pool's success-rate ejection at Linkerd's 80 % as well
(``SR_HEALTH``, the run's ``[health]`` table: over 10 s, at least 100 outcomes).
A cell is the mean over ``--seeds`` seeds of failed / sent, in percent; the last
columns are the share of requests s1 got at the highest rate, and the p99 of the
successful requests' latency at the lowest rate (what avoiding s1 costs the others)
beside the same without a fault. docs/FIELD-NOTES.md, "Failure-aware load", has the
table and what it says.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace

from lblab.servers.behaviour import Failing
from lblab.servers.slowdown import Control
from lblab.simulator.config import ServerEvent, SimConfig, config_from_mapping
from lblab.simulator.run import simulate
from lblab.simulator.simulated_testbed import unsimulated
from lblab.strategy_names import STRATEGY_NAMES

SERVERS = 4
SERVICE_MS = 10.0
LOAD = 0.5
"""Offered load against the servers' capacity."""
FAIL_DELAY_MS = 1.0
AWARE = ("peak-ewma", (("failure_penalty_ms", "5000"),))
"""Failure-aware Peak-EWMA: Linkerd's default penalty of 5 s."""
SR_HEALTH: dict[str, object] = {"success_rate_threshold": 80}
"""lblab's default health with success-rate ejection on at Linkerd's threshold."""
SR_STRATEGIES = ("rr", "p2c")


Health = dict[str, object]
"""A ``[health]`` table as a run config writes it (``balancer/health_options.py``)."""


def label(strategy: str, options: tuple[tuple[str, str], ...], health: Health) -> str:
    inside = ",".join(f"{k}={v}" for k, v in options)
    name = f"{strategy}[{inside}]" if inside else strategy
    return f"{name}, success-rate ejection" if health else name


def configs(
    strategy: str,
    options: tuple[tuple[str, str], ...],
    rate: float,
    seeds: int,
    seconds: float,
    health: Health | None = None,
) -> list[SimConfig]:
    base = config_from_mapping(
        {
            "health": health or {},
            "strategy": strategy,
            "strategy_options": dict(options),
            "servers": SERVERS,
            "service": f"exp:{SERVICE_MS:g}ms",
            "rate": LOAD * SERVERS * 1000.0 / SERVICE_MS,
            "duration": f"{seconds:g}s",
            "picks_every": 0,
        }
    )
    timeline = ()
    if rate > 0.0:
        fail = Control(fail=Failing(rate, FAIL_DELAY_MS))
        timeline = (ServerEvent(0.0, "fail", "s1", control=fail),)
    return [replace(base, timeline=timeline, seed=seed) for seed in range(1, seeds + 1)]


def measure(
    strategy: str,
    options: tuple[tuple[str, str], ...],
    rate: float,
    seeds: int,
    seconds: float,
    health: Health | None = None,
) -> tuple[float, float, float]:
    """(failed percent, s1's percent of the requests, p99 ms of the successes), each the
    mean over the seeds; ``health`` is the run's ``[health]`` table (none: the defaults)."""
    failed, share, p99 = [], [], []
    for config in configs(strategy, options, rate, seeds, seconds, health):
        table = simulate(config).requests
        ok = table.column("ok").to_pylist()
        servers = table.column("server").to_pylist()
        latency = sorted(
            ms for ms, good in zip(table.column("latency_ms").to_pylist(), ok, strict=True) if good
        )
        failed.append(100.0 * ok.count(False) / len(ok))
        share.append(100.0 * servers.count("s1") / len(servers))
        p99.append(latency[int(0.99 * (len(latency) - 1))] if latency else float("nan"))
    return statistics.fmean(failed), statistics.fmean(share), statistics.fmean(p99)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="10,30,50,70,100", help="s1's failure rates, percent")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--only", default="", help="comma list of strategy names")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    try:
        rates = [float(r) / 100.0 for r in args.rates.split(",")]
    except ValueError:
        parser.error(f"--rates {args.rates!r}: give percents like 10,30,100")
    if not all(0.0 < r <= 1.0 for r in rates) or args.seeds < 1 or args.seconds <= 0:
        parser.error("--rates in (0, 100], --seeds >= 1, --seconds > 0")
    names = [n for n in args.only.split(",") if n] or [
        n for n in STRATEGY_NAMES if unsimulated(n) is None
    ]
    unknown = set(names) - set(STRATEGY_NAMES)
    if unknown:
        parser.error(f"--only: {', '.join(sorted(unknown))} not built in; see lblab strategies")
    runs: list[tuple[str, tuple[tuple[str, str], ...], Health]] = [(n, (), {}) for n in names]
    if "peak-ewma" in names:
        runs.insert(names.index("peak-ewma") + 1, (*AWARE, {}))
    runs += [(n, (), SR_HEALTH) for n in SR_STRATEGIES if n in names]
    low, high = f"{rates[0] * 100:g} %", f"{rates[-1] * 100:g} %"
    head = [
        "strategy", *(f"{r * 100:g} %" for r in rates), f"s1 share at {high}",
        f"p99 ms at {low}", "p99 ms, no fault",
    ]  # fmt: skip
    rows = []
    for strategy, options, health in runs:
        cells = [measure(strategy, options, r, args.seeds, args.seconds, health) for r in rates]
        healthy = measure(strategy, options, 0.0, args.seeds, args.seconds, health)
        row = [
            label(strategy, options, health), *(f"{f:.2f}" for f, _, _ in cells),
            f"{cells[-1][1]:.1f}", f"{cells[0][2]:.1f}", f"{healthy[2]:.1f}",
        ]  # fmt: skip
        rows.append(row)
        if not args.markdown:
            print("  ".join(row), flush=True)
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
