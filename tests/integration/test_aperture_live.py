"""Aperture live: K = 4 ``lblab balancer`` processes on loopback over the same 6 servers,
each given the whole list and ``--aperture deterministic --instance i --instances 4``,
connect to and send to their own subset only (``balancer/aperture.py``)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

from balancer_testbed import (
    processes,
    served_counts,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)

from lblab.balancer.aperture import subset

K, N, SIZE = 4, 6, 3
SERVERS = [f"s{i + 1}" for i in range(N)]


def _place(mode: str, i: int, *extra: str) -> tuple[str, ...]:
    return ("--strategy", "p2c", "--aperture", mode, "--aperture-size", str(SIZE),
            "--instance", str(i), "--instances", str(K), *extra)  # fmt: skip


def test_four_balancers_each_connect_only_to_their_subset(tmp_path: Path) -> None:
    with processes() as kids:
        kids += [start_server(sid, tmp_path) for sid in SERVERS]
        servers = list(kids)
        balancers = [
            start_balancer(servers, tmp_path, *_place("deterministic", i), name=f"b{i + 1}")
            for i in range(K)
        ]
        kids += balancers
        # Width ceil(3/6 * 4) / 4 = 1/2 at offsets 0, 1/4, 1/2, 3/4 over arcs of 1/6: b1
        # holds s1-s3; b2 [1/4, 3/4) half of s2, s3, s4, half of s5; and round the ring.
        expected = [
            {"s1": 1.0, "s2": 1.0, "s3": 1.0},
            {"s2": 0.5, "s3": 1.0, "s4": 1.0, "s5": 0.5},
            {"s4": 1.0, "s5": 1.0, "s6": 1.0},
            {"s5": 0.5, "s6": 1.0, "s1": 1.0, "s2": 0.5},
        ]
        connections: Counter[str] = Counter()
        for i, balancer in enumerate(balancers):
            status = status_of(balancer)
            assert status["aperture"]["servers"] == expected[i], i
            assert (status["aperture"]["instance"], status["aperture"]["instances"]) == (i, K)
            rows = wait_for(
                lambda b=balancer: (
                    (r := status_of(b)["backends"]) and all(x["connected"] for x in r) and r
                ),
                10,
                f"b{i + 1} connected to its subset",
            )
            assert {r["id"] for r in rows} == set(expected[i]), i  # no other backend at all
            assert {r["id"]: r["weight"] for r in rows} == expected[i]  # edges at their share
            connections.update(r["id"] for r in rows)
            counts = asyncio.run(served_counts(int(balancer.ready["port"]), 80, 4))
            assert set(counts) <= set(expected[i]), (i, counts)
            assert sum(counts.values()) == 80
            assert len(counts) >= len(expected[i]) - 1, (i, counts)  # it spreads over them
        # K * aperture / N = 2 windows' worth per server; s2 and s5 have two halves more.
        assert connections == Counter(s1=2, s2=3, s3=2, s4=2, s5=3, s6=2)


def test_a_random_aperture_takes_its_order_from_the_seed(tmp_path: Path) -> None:
    with processes() as kids:
        kids += [start_server(sid, tmp_path) for sid in SERVERS]
        servers = list(kids)
        kids.append(b := start_balancer(servers, tmp_path, *_place("random", 2, "--seed", "11")))
        want = subset("random", SERVERS, [1.0] * N, 2, K, SIZE, random.Random(11))
        status = status_of(b)
        assert status["aperture"]["mode"] == "random"
        assert sorted(status["aperture"]["servers"]) == sorted(want.ids)
        assert sorted(r["id"] for r in status["backends"]) == sorted(want.ids)
        counts = asyncio.run(served_counts(int(b.ready["port"]), 30, 2))
        assert set(counts) <= set(want.ids), counts
