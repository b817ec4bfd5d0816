"""Microseconds per pick, and per pick + dispatch + complete, for every strategy.

    uv run python benchmarks/bench_pick.py [--sizes 3,100,10000] [--seconds 0.2] [--markdown]

Each cell times the real ``Pool`` (its bookkeeping included) for about ``--seconds``
of wall time after one warm-up pass, on a fake clock that advances 0.1 ms per request
(so periodic recomputations, e.g. dwrr's 0.5 s, happen at their real rate). Every
backend first gets an agent and a response load report and a large lease, so that
every strategy runs its normal path. "scan" marks strategies whose pick is a documented
full scan over the available backends. Figures are indicative: run on a shared 2-core
machine, compare within one run. ``--markdown`` prints only a section of
``docs/results/benchmarks.md`` (stamped; progress on stderr).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Outcome, RequestView
from lblab.balancer.strategies.registry import STRATEGIES, make_strategy
from lblab.loadreport import LoadReport
from lblab.pages import table, this_script
from lblab.stamp import Stamp, take

OK = Outcome(ok=True, latency_ms=2.0)
TICK_S = 1e-4


def build(name: str, n: int) -> Pool:
    rng = random.Random(1)
    specs = [BackendSpec(f"s{i}", 1 + i % 4) for i in range(n)]
    pool = Pool(specs, make_strategy(name, rng=rng))
    for i, view in enumerate(pool.views):
        view.lease_remaining, view.lease_expires_at = 10**9, 1e9
        for source in ("agent", "response", "push"):
            report = LoadReport(
                server=view.id,
                source=source,
                t=0.0,
                cpu_util=0.2 + (i % 7) / 10,
                qps=50.0 + i % 13,
                inflight=i % 3,
                queue_ms=float(i % 5),
                service_ms=1.0 + i % 9,
            )
            pool.report(view.id, report, 0.0)
    return pool


def requests(count: int) -> list[RequestView]:
    return [
        RequestView(request_id=i, routing_key=b"k%d" % i, client_address=f"10.{i % 251}.{i % 7}.1")
        for i in range(count)
    ]


def time_picks(pool: Pool, reqs: list[RequestView], seconds: float, cycle: bool) -> float:
    """Mean microseconds per pick (or per pick + dispatch + complete)."""
    now = 1.0
    done = 0
    spent = 0.0
    pick, dispatch, complete = pool.pick, pool.dispatch, pool.complete
    while spent < seconds or done < 50:
        start = time.perf_counter()
        for req in reqs:
            now += TICK_S
            view = pick(req, now)
            if cycle and view is not None:
                dispatch(view, req, now)
                complete(view, req, OK, now)
        spent += time.perf_counter() - start
        done += len(reqs)
    return spent / done * 1e6


@dataclass(frozen=True)
class PickRow:
    strategy: str
    scan: bool
    picks: list[float]
    """Microseconds per pick, one per size."""
    cycles: list[float]
    """Microseconds per pick + dispatch + complete, one per size."""


def measure(names: list[str], sizes: list[int], seconds: float) -> Iterator[PickRow]:
    """A row per strategy, as soon as it is measured."""
    for name in names:
        picks, cycles = [], []
        for n in sizes:
            reqs = requests(min(1024, max(64, n)))
            pool = build(name, n)
            time_picks(pool, reqs[:32], 0.0, cycle=True)  # warm-up
            picks.append(time_picks(pool, reqs, seconds, cycle=False))
            pool = build(name, n)
            cycles.append(time_picks(pool, reqs, seconds, cycle=True))
        yield PickRow(name, STRATEGIES[name].full_scan, picks, cycles)


def print_text(rows: Iterator[PickRow], sizes: list[int]) -> None:
    header = ["strategy", "scan"] + [f"pick@{n}" for n in sizes] + [f"cycle@{n}" for n in sizes]
    print(" | ".join(f"{h:>17}" if i else f"{h:<17}" for i, h in enumerate(header)))
    for row in rows:
        scan = "scan" if row.scan else ""
        cells = [f"{row.strategy:<17}", f"{scan:>17}"]
        cells += [f"{v:17.2f}" for v in row.picks + row.cycles]
        print(" | ".join(cells), flush=True)


def spoken(sizes: list[int]) -> str:
    """``3, 100 and 10,000``."""
    words = [f"{n:,}" for n in sizes]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def markdown(
    rows: list[PickRow], sizes: list[int], seconds: float, stamp: Stamp, command: str
) -> str:
    """The section of ``docs/results/benchmarks.md``: stamp, table, how to read it."""
    columns = ["strategy", "full scan"]
    columns += [f"pick us @{n:,}" for n in sizes] + [f"cycle us @{n:,}" for n in sizes]
    cells = [[r.strategy, "scan" if r.scan else "", *r.picks, *r.cycles] for r in rows]
    lines = [
        "## A pick's cost per strategy",
        "",
        stamp.markdown(command),
        "",
        *table(columns, cells),
        "",
        f"Microseconds per call of the real `Pool` over {spoken(sizes)} backends, about "
        f"{seconds:g} s of calls per cell after a warm-up, on a fake clock that advances "
        f"{TICK_S * 1000:g} ms per request: *pick* is `Pool.pick` alone, *cycle* is pick + "
        "dispatch + complete. *full scan* marks strategies whose pick is a documented scan over "
        "the available backends.",
    ]
    if rows:
        big = len(sizes) - 1
        cheap = min(rows, key=lambda r: r.picks[big])
        dear = max(rows, key=lambda r: r.picks[big])
        lines += [
            "",
            f"At {sizes[big]:,} backends the cheapest pick is `{cheap.strategy}` "
            f"({cheap.picks[big]:.3g} us) and the dearest `{dear.strategy}` "
            f"({dear.picks[big]:.3g} us, {dear.picks[big] / cheap.picks[big]:.3g}x). "
            "Compare within one run: figures move between runs on a shared machine.",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,100,10000")
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--only", default="", help="comma-separated strategy names")
    parser.add_argument(
        "--markdown", action="store_true", help="print only a stamped markdown section"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [n for n in STRATEGIES if not args.only or n in args.only.split(",")]
    if not args.markdown:
        print_text(measure(names, sizes, args.seconds), sizes)
        return
    command = this_script()
    stamp = take()
    rows = []
    for row in measure(names, sizes, args.seconds):
        print(f"{row.strategy}: done", file=sys.stderr, flush=True)
        rows.append(row)
    print(markdown(rows, sizes, args.seconds, stamp, command))


if __name__ == "__main__":
    main()
