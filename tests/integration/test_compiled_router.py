"""The compiled reference of ``benchmarks/bench_balancer.py`` routes for real.

``benchmarks/compiled_router`` is built with cargo (as the benchmark builds it), put in
front of three ``lblab server`` processes, and driven by rsocket-py (an implementation
it did not write): every request is answered, by the servers in turn. The benchmark
compares lblab against it, so a router that dropped or misrouted requests would make
that comparison meaningless.
"""

from __future__ import annotations

import asyncio

from balancer_testbed import processes, served_counts, start_server

from lblab.procs import spawn
from tests.benchmark_scripts import bench


def test_compiled_router_answers_every_request_round_robin(tmp_path):
    binary = bench("bench_balancer").build_compiled_router()
    assert binary is not None, "cargo could not build benchmarks/compiled_router (stderr above)"
    servers = [start_server(name, tmp_path) for name in ("s1", "s2", "s3")]
    with processes(*servers) as kids:
        router = spawn(
            "compiled-router",
            [str(binary), *(f"127.0.0.1:{s.ready['port']}" for s in servers)],
            log_path=tmp_path / "router.log",
        )
        kids.append(router)
        counts = asyncio.run(served_counts(int(router.ready["port"]), 60, 6))
    assert counts == {"s1": 20, "s2": 20, "s3": 20}, counts
