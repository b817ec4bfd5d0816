"""A server's queued-work estimate (``est_wait_ms``) before and after its first answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lblab.servers.service import WorkResult, WorkService
from lblab.servers.state import ServerState


@pytest.fixture
def state() -> Iterator[ServerState]:
    service = WorkService(workers=1, delay_ms=250.0, duty_cycle=None)
    try:
        yield ServerState("s1", max_inflight=32, service=service)
    finally:
        service.shutdown()


def test_a_fresh_delay_server_estimates_its_queue_from_the_delay(state: ServerState) -> None:
    # Three arrivals on one FIFO slot, none answered yet: the third waits for two.
    for _ in range(3):
        state.admit()
    assert state.report("push").est_wait_ms == 3 * 250.0


def test_measured_service_times_replace_the_delay_prior(state: ServerState) -> None:
    state.admit()
    state.record(WorkResult(work_bytes=10, items=1, queue_ms=0.0, service_ms=400.0))
    state.release()
    state.admit()
    state.admit()
    assert state.est_wait_ms() == 2 * 400.0


def test_a_fresh_cpu_server_without_delay_estimates_no_wait() -> None:
    service = WorkService(workers=2, delay_ms=0.0, duty_cycle=None)
    try:
        state = ServerState("s1", max_inflight=32, service=service)
        state.admit()
        assert state.est_wait_ms() == 0.0
    finally:
        service.shutdown()
