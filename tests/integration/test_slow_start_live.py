"""Slow start through the real balancer: a backend added to a running ``lblab balancer``
(``POST /backends``) starts at ``--slow-start-min-weight`` of its weight, rises as
``(t / window) ** (1 / aggression)`` (``/status``'s ``slow_start``), and takes its share
of weighted round robin's picks once the window is over; or, with
``--slow-start-fast-after``, as soon as it has answered that often as fast as its peer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from balancer_testbed import processes, served_counts, start_balancer, start_server, status_of

from lblab.loadtests.admin_client import AdminClient
from lblab.procs import Child

WINDOW_S = 2.0


def _factor(balancer: Child, backend: str) -> float:
    rows = status_of(balancer)["backends"]
    return next(float(r["slow_start"]) for r in rows if r["id"] == backend)


def test_an_added_backend_is_eased_in_over_the_window(tmp_path: Path) -> None:
    with processes() as kids:
        kids += [start_server("s1", tmp_path), start_server("s2", tmp_path)]
        s1, s2 = kids
        flags = ["--strategy", "wrr", "--slow-start-window", f"{WINDOW_S:g}s",
                 "--slow-start-aggression", "0.5", "--slow-start-min-weight", "1",
                 "--slow-start-fast-after", "0"]  # fmt: skip
        kids.append(balancer := start_balancer([s1], tmp_path, *flags))
        port = int(balancer.ready["port"])
        added = time.monotonic()
        AdminClient("127.0.0.1", balancer.ready["admin_port"]).add_backend(
            "s2", f"127.0.0.1:{s2.ready['port']}"
        )
        early = _factor(balancer, "s2")
        at = time.monotonic() - added
        # (at / 2 s) ** 2 at most, and never below 1 % (the status steps every 0.25 s).
        assert 0.01 <= early <= max(0.01, ((at + 0.25) / WINDOW_S) ** 2), (early, at)
        first = asyncio.run(served_counts(port, 100, 4))
        assert first["s2"] <= 15, first  # an even split would give it 50
        time.sleep(max(0.0, WINDOW_S + 0.3 - (time.monotonic() - added)))
        assert _factor(balancer, "s2") == 1.0
        after = asyncio.run(served_counts(port, 100, 4))
        assert after["s2"] == 50, after  # smooth WRR over two equal weights alternates


def test_an_added_backend_as_fast_as_its_peer_ends_slow_start_early(tmp_path: Path) -> None:
    with processes() as kids:
        kids += [start_server(f"s{i}", tmp_path, "--delay-ms", "5") for i in (1, 2)]
        s1, s2 = kids
        # A window of a minute, so only the early end can give s2 its weight back soon; a
        # ratio of 2 because two equal servers on a shared machine differ by jitter.
        flags = ["--strategy", "wrr", "--slow-start-window", "60s",
                 "--slow-start-min-weight", "10", "--slow-start-fast-after", "5",
                 "--slow-start-fast-ratio", "2"]  # fmt: skip
        kids.append(balancer := start_balancer([s1], tmp_path, *flags))
        port = int(balancer.ready["port"])
        asyncio.run(served_counts(port, 20, 2))  # s1's latency EWMA: the peer's measure
        added = time.monotonic()
        AdminClient("127.0.0.1", balancer.ready["admin_port"]).add_backend(
            "s2", f"127.0.0.1:{s2.ready['port']}"
        )
        assert _factor(balancer, "s2") < 0.2  # 10 % at first, (t / 60 s)^2 after
        first = asyncio.run(served_counts(port, 200, 2))
        assert 5 <= first["s2"] < 100, first  # its fifth answer ended it: then half
        assert _factor(balancer, "s2") == 1.0
        assert time.monotonic() - added < 30.0  # the time ramp alone: 60 s
        after = asyncio.run(served_counts(port, 100, 4))
        assert after["s2"] == 50, after  # smooth WRR over two equal weights alternates
