"""The balancer's clock resolves well below a millisecond.

Its ``now`` times every request (the latency each strategy and the pool observe) and
stamps every pick. uvloop's ``loop.time()`` counts whole milliseconds, so a balancer on
it saw every latency as 0, 1, 2... ms and stamped picks on a 1 ms grid. The picks log
shows the clock the router is driven by: consecutive picks of sequential requests on
loopback are a fraction of a millisecond apart, and on a millisecond clock each gap is a
whole number of milliseconds. The pool's latency EWMA shows that both ends of a request
are read on that one clock: a latency taken across two clocks can come out negative.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

from balancer_testbed import (
    WORK,
    processes,
    rsocket_client,
    start_balancer,
    start_echo,
    status_of,
)
from rsocket.payload import Payload

from lblab.procs import stop

REQUESTS = 300


def test_picks_are_stamped_by_a_clock_finer_than_a_millisecond(tmp_path: Path) -> None:
    picks = tmp_path / "picks.jsonl"
    with processes(start_echo("e0", tmp_path)) as kids:
        balancer = start_balancer(kids, tmp_path, "--picks", str(picks))
        kids.append(balancer)

        async def sequential() -> None:
            async with rsocket_client(int(balancer.ready["port"])) as client:
                for _ in range(REQUESTS):
                    await asyncio.wait_for(client.request_response(Payload(WORK)), 10)

        asyncio.run(sequential())
        (row,) = status_of(balancer)["backends"]
        # A latency read across two clocks (uvloop's lags time.monotonic() by up to a
        # millisecond) comes out negative; an echo on loopback, even on a busy machine,
        # answers far below the upper bound.
        assert 0 < row["latency_ewma_ms"] < 100, row
        stop(balancer, timeout=10)  # the picks log is flushed at exit
    times = [json.loads(line)["t"] for line in picks.read_text().splitlines()]
    assert len(times) == REQUESTS
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Epoch seconds as floats carry ~0.25 us of rounding: a whole-millisecond gap is
    # within 2 us of one; a gap from a fine clock lands there 0.4 % of the time.
    on_grid = [g for g in gaps if abs(g * 1000 - round(g * 1000)) < 0.002]
    assert len(on_grid) < 0.2 * len(gaps), (
        f"{len(on_grid)} of {len(gaps)} gaps between picks are whole milliseconds: "
        "the balancer's clock counts milliseconds"
    )
    assert sorted(times) == times
