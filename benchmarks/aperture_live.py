"""Aperture live on loopback: K ``lblab balancer`` processes over N ``lblab server``
processes, full-mesh p2c beside deterministic and random aperture.

``uv run python benchmarks/aperture_live.py [--balancers 4] [--servers 8] [--size 4]
[--requests 1500] [--concurrency 3] [--delay-ms 10]``

Each server sleeps an exponential time of mean ``--delay-ms`` per request in its one
work slot (a sleep, not CPU: the machine's two cores stay free for the harness). For
each layout the K balancers are started (``--strategy p2c``, each given every server;
with an aperture ``--aperture MODE --aperture-size S --instance i --instances K``,
random ones ``--seed i+1``), then ``--concurrency`` closed-loop clients per balancer
send ``--requests`` each balancer's way, all at once. Per layout: connections per
server (the balancers whose ``/status`` lists it connected: mean, min, max), the load
deviation (the scorecard's: half the summed gap between each server's share of the
requests and 1 / N), the CV of requests per server, and the p50 and p99 of the
clients' latency. docs/FIELD-NOTES.md, "Aperture", has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.rsocket_client import RSocketClient
from rsocket.transports.tcp import TransportTCP

from lblab.analysis.hard_cases import load_deviation
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

WORK = b'{"work_bytes": 100, "pad": ""}'
LAYOUTS = ("full mesh", "deterministic", "random")


def _status(balancer: Child) -> dict[str, Any]:
    url = f"http://127.0.0.1:{balancer.ready['admin_port']}/status"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _connected(balancer: Child, deadline_s: float = 10.0) -> list[str]:
    """The backends ``balancer`` is connected to, once all of its pool are."""
    end = time.monotonic() + deadline_s
    while True:
        rows = _status(balancer)["backends"]
        if rows and all(r["connected"] for r in rows):
            return [r["id"] for r in rows]
        if time.monotonic() > end:
            raise RuntimeError(f"{balancer.name}: not connected to its backends in {deadline_s} s")
        time.sleep(0.05)


async def _drive(port: int, n: int, concurrency: int) -> list[tuple[str, float]]:
    """``n`` requests, ``concurrency`` at a time on one connection: (server, ms) each."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    out: list[tuple[str, float]] = []
    async with RSocketClient(
        single_transport_provider(TransportTCP(reader, writer)),
        data_encoding=APPLICATION_JSON,
        metadata_encoding=COMPOSITE_METADATA,
    ) as client:
        left = n

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                t0 = time.perf_counter()
                reply = await asyncio.wait_for(client.request_response(Payload(WORK)), 10)
                out.append((json.loads(reply.data)["server"], 1000 * (time.perf_counter() - t0)))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def _all(ports: list[int], n: int, concurrency: int) -> list[tuple[str, float]]:
    parts = await asyncio.gather(*(_drive(p, n, concurrency) for p in ports))
    return [x for part in parts for x in part]


def run_layout(
    layout: str, servers: list[Child], k: int, size: int, n: int, concurrency: int, logs: Path
) -> dict[str, Any]:
    balancers = []
    try:
        for i in range(k):
            args = ["balancer", "--port", "0", "--admin-port", "0", "--strategy", "p2c"]
            for s in servers:
                args += ["--backend", f"{s.ready['id']}=127.0.0.1:{s.ready['port']}"]
            if layout != "full mesh":
                args += ["--aperture", layout, "--aperture-size", str(size),
                         "--instance", str(i), "--instances", str(k), "--seed", str(i + 1)]  # fmt: skip
            balancers.append(
                spawn(f"b{i + 1}", lblab_command(*args), log_path=logs / f"b{i + 1}.log")
            )
        conns = Counter(sid for b in balancers for sid in _connected(b))
        sent = asyncio.run(_all([int(b.ready["port"]) for b in balancers], n, concurrency))
    finally:
        for b in balancers:
            stop(b, timeout=5)
    names = [s.ready["id"] for s in servers]
    per_conn = [conns.get(name, 0) for name in names]
    served = pd.Series([s for s, _ in sent])
    counts = served.value_counts()
    loads = np.array([int(counts.get(name, 0)) for name in names], dtype=float)
    p50, p99 = np.percentile([ms for _, ms in sent], [50, 99])
    return {
        "layout": layout,
        "conn_mean": float(np.mean(per_conn)),
        "conn_min": min(per_conn),
        "conn_max": max(per_conn),
        "deviation": load_deviation(served, dict.fromkeys(names, 1.0)),
        "cv": float(loads.std() / loads.mean()),
        "p50_ms": float(p50),
        "p99_ms": float(p99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--balancers", type=int, default=4)
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--size", type=int, default=4, help="the aperture (servers)")
    parser.add_argument("--requests", type=int, default=1500, help="per balancer")
    parser.add_argument("--concurrency", type=int, default=3, help="per balancer")
    parser.add_argument("--delay-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lblab-aperture-") as tmp:
        logs = Path(tmp)
        servers: list[Child] = []
        try:
            for j in range(args.servers):
                sid = f"s{j + 1}"
                argv_ = lblab_command("server", "--id", sid, "--port", "0", "--delay-ms",
                                      str(args.delay_ms), "--delay-dist", "exp")  # fmt: skip
                servers.append(spawn(sid, argv_, log_path=logs / f"{sid}.log"))
            k, size, n = args.balancers, args.size, args.requests
            rows = [
                run_layout(layout, servers, k, size, n, args.concurrency, logs)
                for layout in LAYOUTS
            ]
        finally:
            for s in servers:
                stop(s, timeout=5)
    print(f"K = {args.balancers} balancers over N = {args.servers} servers, aperture "
          f"{args.size}, {args.requests} requests per balancer, {args.concurrency} at a time")  # fmt: skip
    print("| layout | conns/server mean | min | max | load deviation | CV | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layout']} | {r['conn_mean']:.1f} | {r['conn_min']} | {r['conn_max']} | "
              f"{r['deviation']:.4f} | {r['cv']:.3f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
