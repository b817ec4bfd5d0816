"""The one reconnect backoff (lblab.backoff) and the one stop-signal hook (lblab.procs)."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from lblab.backoff import jittered_backoff
from lblab.procs import STOP_SIGNALS, stop_on_signals


def test_backoff_grows_to_its_cap_with_jitter_and_a_floor():
    rng = random.Random(1)
    for failures, high in ((0, 0.1), (1, 0.2), (3, 0.8), (10, 5.0), (10_000, 5.0)):
        draws = [jittered_backoff(failures, 0.1, 5.0, rng) for _ in range(500)]
        assert min(draws) >= 0.05 and max(draws) <= high
        assert max(draws) - min(draws) > (high - 0.05) / 2  # jittered, not fixed


def test_backoff_is_deterministic_under_a_seed():
    a = [jittered_backoff(n, 0.1, 2.0, random.Random(7)) for n in range(6)]
    b = [jittered_backoff(n, 0.1, 2.0, random.Random(7)) for n in range(6)]
    assert a == b


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_stop_signals_set_the_stop_event(sig):
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        stop = stop_on_signals(loop)
        try:
            os.kill(os.getpid(), sig)
            await asyncio.wait_for(stop.wait(), 5)
            return stop.is_set()
        finally:
            for s in STOP_SIGNALS:
                loop.remove_signal_handler(s)

    assert asyncio.run(main())
