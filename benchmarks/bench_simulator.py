"""Simulator speed: lblab's simulator against bare SimPy models of the same experiment.

    uv run python benchmarks/bench_simulator.py                 # 1000 servers, 1M requests, p2c, 3 rounds
    uv run python benchmarks/bench_simulator.py --requests 200000 --rounds 5
    uv run python benchmarks/bench_simulator.py --markdown       # a section of docs/results/benchmarks.md

The experiment: 1000 FIFO single-worker servers, exponential service (mean 10 ms),
Poisson arrivals at 80 % of the pool's capacity, p2c on queue length, no records.

- textbook: the model as SimPy's own examples write it (a process per request, a
  ``Resource(capacity=1)`` per server, p2c on ``len(queue) + count``): the reference
  of issue 10's target (lblab within 5 % of it);
- bare: the least SimPy can do for it: one ``env.timeout`` with a callback per arrival
  and per service, a load counter per server, no ``Request`` or process objects. The
  floor of SimPy's event loop; no driver of a real balancer ``Pool`` gets near it;
- lblab: ``simulator.run.simulate`` with its defaults for this experiment (the
  balancer's ``Pool`` and ``p2c``, a row per request, picks sampled 1 in 100, a cpu
  sample per server every 250 ms, a 30 s deadline per request, the pool's 100 ms tick),
  timed including the Arrow tables it returns. Its event loop runs with Python's cyclic
  garbage collector off (``simulator.clock.run_events``); the two SimPy models run as
  written, with it on (off, the textbook model is no faster: its processes and events
  form cycles, which then pile up).

The three alternate in one process (bare, textbook, lblab, bare, ...; the same seed
each round), so the machine's load drifts over all alike. It prints each round, the
medians, the ratios lblab / textbook and lblab / bare (median over rounds and their
range), per wall second and per CPU second (``time.process_time``: on a shared machine
it moves far less than wall time), the load average before and after, and the
process's peak RSS at start and after the first round of each model (each figure is
the peak so far; lblab runs last, so its figure is its peak).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from lblab.pages import table, this_script
from lblab.simulator.config import config_from_mapping
from lblab.simulator.run import simulate
from lblab.stamp import Stamp, take

MEAN_S = 0.010
UTILISATION = 0.8


def bare_run(servers: int, requests: int, seed: int) -> float:
    """The barest SimPy model of the experiment; returns its wall seconds."""
    t0 = time.perf_counter()
    env = simpy.Environment()
    timeout = env.timeout
    arrivals = random.Random(f"bare:{seed}:arrivals")
    service = random.Random(f"bare:{seed}:service")
    pick = random.Random(f"bare:{seed}:pick")
    gap, work, randrange = arrivals.expovariate, service.expovariate, pick.randrange
    rate, mu = UTILISATION * servers / MEAN_S, 1.0 / MEAN_S
    load = [0] * servers  # queued plus in service
    sent = done = 0

    def start(k: int) -> None:
        timeout(work(mu), k).callbacks.append(finish)

    def finish(event: simpy.Timeout) -> None:
        nonlocal done
        k = event._value
        load[k] -= 1
        if load[k]:
            start(k)
        done += 1
        if done == requests:
            raise simpy.core.StopSimulation(None)  # env.run() returns args[0]

    def arrive(_: simpy.Timeout) -> None:
        nonlocal sent
        i = randrange(servers)
        j = randrange(servers - 1)
        if j >= i:
            j += 1
        k = j if load[j] < load[i] else i
        load[k] += 1
        if load[k] == 1:
            start(k)
        sent += 1
        if sent < requests:
            timeout(gap(rate)).callbacks.append(arrive)

    arrive(timeout(0))
    env.run()
    if done != requests:
        raise RuntimeError(f"bare model ended with {requests - done} requests unfinished")
    return time.perf_counter() - t0


def textbook_run(servers: int, requests: int, seed: int) -> float:
    """The same model as SimPy's tutorials write it; returns its wall seconds.

    A process per request holding a ``Resource(capacity=1)`` per server for an
    ``env.timeout`` of its service time; p2c on ``len(queue) + count``.
    """
    t0 = time.perf_counter()
    env = simpy.Environment()
    arrivals = random.Random(f"bare:{seed}:arrivals")
    service = random.Random(f"bare:{seed}:service")
    pick = random.Random(f"bare:{seed}:pick")
    rate, mu = UTILISATION * servers / MEAN_S, 1.0 / MEAN_S
    pool = [simpy.Resource(env, capacity=1) for _ in range(servers)]
    done = 0

    def request(server: simpy.Resource) -> simpy.events.ProcessGenerator:
        nonlocal done
        with server.request() as turn:
            yield turn
            yield env.timeout(service.expovariate(mu))
        done += 1

    def source() -> simpy.events.ProcessGenerator:
        for _ in range(requests):
            i = pick.randrange(servers)
            j = pick.randrange(servers - 1)
            if j >= i:
                j += 1
            a, b = pool[i], pool[j]
            env.process(request(b if len(b.queue) + b.count < len(a.queue) + a.count else a))
            yield env.timeout(arrivals.expovariate(rate))

    env.process(source())
    env.run()
    if done != requests:
        raise RuntimeError(f"textbook model ended with {requests - done} requests unfinished")
    return time.perf_counter() - t0


def lblab_run(servers: int, requests: int, seed: int) -> float:
    """``simulate`` on the same experiment; returns its wall seconds (tables included)."""
    t0 = time.perf_counter()
    cfg = config_from_mapping(
        {
            "strategy": "p2c",
            "servers": servers,
            "requests": requests,
            "rate": UTILISATION * servers / MEAN_S,
            "service": f"exp:{MEAN_S * 1000:g}ms",
            "picks_every": 100,
            "seed": seed,
        }
    )
    result = simulate(cfg)
    if result.requests.num_rows != requests:
        raise RuntimeError(f"lblab returned {result.requests.num_rows} of {requests} rows")
    return time.perf_counter() - t0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def load_average(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def slashed(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.1f}" for x in load)


RUNS: dict[str, Callable[[int, int, int], float]] = {
    "bare": bare_run,
    "textbook": textbook_run,
    "lblab": lblab_run,
}
MODELS = {
    "lblab": "lblab (`Pool`, `p2c`, records)",
    "textbook": "the textbook SimPy model (a process and a `Resource` request per request, "
    "no records)",
    "bare": "a bare callback model (no `Pool`, no records)",
}
"""The models as the markdown section names them, in its order."""


@dataclass
class SimBench:
    """Simulated requests per second of each model, one figure per round."""

    servers: int
    requests: int
    rounds: int
    load_before: tuple[float, float, float]
    wall: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in RUNS})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in RUNS})
    rss: dict[str, float] = field(default_factory=dict)
    """Peak RSS (MB) at start and after each model's first round."""
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def ratios(self, base: str, unit: str) -> list[float]:
        """lblab / ``base`` per round, per wall or CPU second."""
        rates = self.wall if unit == "wall" else self.cpu
        return [a / b for a, b in zip(rates["lblab"], rates[base], strict=True)]


def measure(
    servers: int, requests: int, rounds: int, seed: int, say: Callable[[str], None]
) -> SimBench:
    """The interleaved rounds; ``say`` gets the heading line and a line per round."""
    n = requests
    bench = SimBench(servers, requests, rounds, os.getloadavg())
    say(
        f"{servers} servers, {n:,} requests, p2c, exp {MEAN_S * 1000:g} ms at "
        f"{UTILISATION:.0%}; {rounds} rounds; load average {load_average(bench.load_before)}"
    )
    for run in RUNS.values():
        run(servers, 2000, seed)  # lazy imports (and their compiles) out of round 1
    bench.rss["start"] = peak_rss_mb()
    for r in range(rounds):
        for name, run in RUNS.items():
            cpu0 = time.process_time()
            seconds = run(servers, n, seed)
            bench.cpu[name].append(n / (time.process_time() - cpu0))
            bench.wall[name].append(n / seconds)
            bench.rss.setdefault(name, peak_rss_mb())
            say(
                f"  round {r + 1}  {name:>8}  {seconds:6.2f} s  {n / seconds:>9,.0f} req/wall-s"
                f"  {bench.cpu[name][-1]:>9,.0f} req/cpu-s"
            )
    bench.load_after = os.getloadavg()
    return bench


def print_text(bench: SimBench) -> None:
    wall, cpu, rss = bench.wall, bench.cpu, bench.rss
    for name in RUNS:
        print(
            f"{name:>8}  median {statistics.median(wall[name]):>9,.0f} req/wall-s "
            f"(min {min(wall[name]):,.0f}, max {max(wall[name]):,.0f}); "
            f"{statistics.median(cpu[name]):,.0f} req/cpu-s"
        )
    for base in ("textbook", "bare"):
        for unit in ("wall", "cpu"):
            ratios = bench.ratios(base, unit)
            print(
                f"lblab/{base} ({unit}): median {statistics.median(ratios):.3f} "
                f"(rounds {min(ratios):.3f}-{max(ratios):.3f})"
            )
    print(
        f"peak RSS: {rss['start']:.0f} MB at start, {rss['bare']:.0f} MB after bare, "
        f"{rss['textbook']:.0f} MB after textbook, {rss['lblab']:.0f} MB after lblab"
    )
    print(f"load average after: {load_average(bench.load_after)}")


def markdown(bench: SimBench, stamp: Stamp, command: str) -> str:
    """The section of ``docs/results/benchmarks.md``: stamp, tables, how to read them."""
    wall, cpu, rss = bench.wall, bench.cpu, bench.rss

    def rate(values: list[float]) -> str:
        return f"{values[0]:,.0f}" if len(values) == 1 else f"{min(values):,.0f}-{max(values):,.0f}"

    def ratio(values: list[float]) -> str:
        return f"{values[0]:.3f}" if len(values) == 1 else f"{min(values):.3f}-{max(values):.3f}"

    speed = [
        {
            "model": label,
            "requests per CPU second": f"{statistics.median(cpu[name]):,.0f}",
            "per CPU second, rounds": rate(cpu[name]),
            "per wall second": f"{statistics.median(wall[name]):,.0f}",
            "per wall second, rounds": rate(wall[name]),
            "peak RSS MB": f"{rss[name]:.0f}",
        }
        for name, label in MODELS.items()
    ]
    ratios = [
        {
            "ratio": f"lblab / {base}",
            "per CPU second": f"{statistics.median(bench.ratios(base, 'cpu')):.3f}",
            "per CPU second, rounds": ratio(bench.ratios(base, "cpu")),
            "per wall second": f"{statistics.median(bench.ratios(base, 'wall')):.3f}",
            "per wall second, rounds": ratio(bench.ratios(base, "wall")),
        }
        for base in ("textbook", "bare")
    ]
    busy = max(bench.load_before[0], bench.load_after[0]) > stamp.cores
    textbook = statistics.median(bench.ratios("textbook", "cpu"))
    return "\n".join(
        [
            "## The simulator's speed",
            "",
            stamp.markdown(command),
            "",
            f"{bench.servers:,} FIFO single-worker servers, exponential service of "
            f"{MEAN_S * 1000:g} ms, Poisson arrivals at {UTILISATION:.0%} of capacity, `p2c`, "
            f"{bench.requests:,} requests per model and round, {bench.rounds} interleaved "
            "round(s) with the same seed; simulated requests per second, medians over rounds "
            "(the range over rounds beside them):",
            "",
            *table(list(speed[0]), speed),
            "",
            *table(list(ratios[0]), ratios),
            "",
            f"Peak RSS is the process's peak after each model's first round ({rss['start']:.0f} MB "
            "at start; lblab runs last, so its figure is its own peak). Load average "
            f"{slashed(bench.load_before)} before, {slashed(bench.load_after)} after"
            + (
                ": the machine was shared, so read the CPU-second figures, which move far less "
                "than wall time."
                if busy
                else "."
            )
            + f" Per CPU second lblab simulates {textbook:.2f}x as many requests as the "
            "textbook SimPy model.",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--servers", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--markdown",
        action="store_true",
        help="print only a stamped section of docs/results/benchmarks.md (rounds on stderr)",
    )
    args = ap.parse_args()
    if args.servers < 2 or args.requests < 1 or args.rounds < 1:
        sys.exit("bench_simulator: --servers must be >= 2, --requests and --rounds >= 1")
    if not args.markdown:
        print_text(measure(args.servers, args.requests, args.rounds, args.seed, print))
        return
    command = this_script()
    stamp = take()
    bench = measure(
        args.servers,
        args.requests,
        args.rounds,
        args.seed,
        lambda line: print(line, file=sys.stderr),
    )
    print(markdown(bench, stamp, command))


if __name__ == "__main__":
    main()
