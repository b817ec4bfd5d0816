"""Simulator speed: simulated requests per wall second at scale.

    uv run python benchmarks/bench_simulator.py                    # 1000 servers, 1M requests, p2c
    uv run python benchmarks/bench_simulator.py --requests 200000 --strategy lc --delay 1ms

Prints one line per run: strategy, servers, requests, wall seconds, simulated requests
per wall second and heap events per request. Open Poisson arrivals at 80 % of the
pool's capacity (exp:10ms service, one worker per server), picks sampled 1 in 100.
"""

from __future__ import annotations

import argparse
import time

from simulator.config import config_from_mapping
from simulator.run import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--strategy", action="append", help="repeatable; default p2c")
    ap.add_argument("--servers", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--delay", default="0", help="one-way balancer<->server delay, e.g. 1ms")
    ap.add_argument("--picks-every", type=int, default=100)
    args = ap.parse_args()
    capacity = args.servers / 0.010
    for name in args.strategy or ["p2c"]:
        cfg = config_from_mapping(
            {
                "strategy": name,
                "servers": args.servers,
                "requests": args.requests,
                "rate": 0.8 * capacity,
                "service": "exp:10ms",
                "server_delay": args.delay,
                "picks_every": args.picks_every,
            }
        )
        t0 = time.perf_counter()
        result = simulate(cfg)
        total = time.perf_counter() - t0
        print(
            f"{name:>10}  servers={args.servers}  requests={result.requests.num_rows}  "
            f"wall={total:.1f}s (simulate {result.wall_seconds:.1f}s)  "
            f"{result.requests.num_rows / total:,.0f} req/wall-s  "
            f"{result.events / result.requests.num_rows:.2f} events/req"
        )


if __name__ == "__main__":
    main()
