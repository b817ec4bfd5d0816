"""Prequal's hot/cold quantile in the simulator: the paper's ``q_rif = 0.84`` against the
0.6 prequal-rs chose (0.84 herded in its testbed), beside p2c and Envoy's least request,
over identical, unequal and antagonised servers, with 1 and 8 independent balancers.

``uv run python benchmarks/prequal_quantile.py [--seeds 3] [--requests 40000] [--markdown]``

Sixteen servers of four workers, exponential 10 ms work, open Poisson arrivals at
``LOAD`` of the servers' capacity; cells are the mean over ``--seeds`` seeds of each
run's mean, p50 and p99 latency of the successful requests. Simulated time: the machine's
load does not move the figures. docs/FIELD-NOTES.md, "Prequal's hot/cold quantile", has
the table and what it says.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.pages import table, this_script
from lblab.simulator.config import config_from_mapping
from lblab.simulator.run import simulate

LOAD = 0.75
CASES = {
    "16 identical": [{"count": 16, "workers": 4, "speed": 1.0}],
    "8 fast, 8 at half speed": [
        {"count": 8, "workers": 4, "speed": 1.0},
        {"count": 8, "workers": 4, "speed": 0.5},
    ],
    "15 fast, 1 at a tenth (an antagonist)": [
        {"count": 15, "workers": 4, "speed": 1.0},
        {"count": 1, "workers": 4, "speed": 0.1},
    ],
}
STRATEGIES = (("prequal", {}), ("prequal", {"q_rif": "0.6"}), ("p2c", {}), ("least-request", {}))


def capacity(groups: list[dict[str, float]]) -> float:
    """Requests per second the servers serve at most (10 ms a request per worker)."""
    return sum(g["count"] * g["workers"] * g["speed"] * 100.0 for g in groups)


def figures(groups: list[dict[str, float]], strategy: str, options: dict[str, str],
            balancers: int, seeds: int, requests: int) -> list[float]:  # fmt: skip
    """Mean, p50 and p99 (ms), each the mean over the seeds."""
    runs = []
    for seed in range(1, seeds + 1):
        config = config_from_mapping(
            {"strategy": strategy, "strategy_options": options, "servers": groups,
             "service": "exp:10ms", "rate": LOAD * capacity(groups), "requests": requests,
             "balancers": balancers, "seed": seed, "picks_every": 0}
        )  # fmt: skip
        requests_table = simulate(config).requests.to_pandas()
        latency = requests_table[requests_table.ok].latency_ms.to_numpy()
        runs.append((latency.mean(), *np.quantile(latency, [0.5, 0.99])))
    return [statistics.mean(run[i] for run in runs) for i in range(3)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    for case, groups in CASES.items():
        for balancers in (1, 8):
            for strategy, options in STRATEGIES:
                name = strategy + "".join(f"[{k}={v}]" for k, v in options.items())
                mean, p50, p99 = figures(
                    groups, strategy, options, balancers, args.seeds, args.requests
                )
                rows.append([case, balancers, f"`{name}`", f"{mean:.2f}", f"{p50:.2f}",
                             f"{p99:.2f}"])  # fmt: skip
                print(rows[-1], file=sys.stderr, flush=True)
    text = "\n".join(table(["servers", "balancers", "strategy", "mean ms", "p50 ms", "p99 ms"],
                           rows))  # fmt: skip
    print(f"    {this_script()}\n\n{text}" if args.markdown else text)


if __name__ == "__main__":
    main()
