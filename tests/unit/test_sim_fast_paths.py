"""The simulator's fast paths give exactly what the slow, obvious code gives."""

from __future__ import annotations

import pytest
import simpy

from balancer.strategies.base import Outcome, RequestView
from simulator.clock import At, run_events
from simulator.views import outcome, request_view


def test_request_view_equals_the_dataclass_constructor() -> None:
    fast = request_view(7, 512, b"k", frozenset({"s1"}), 2)
    slow = RequestView(
        request_id=7, package_bytes=512, routing_key=b"k", exclude=frozenset({"s1"}), attempt=2
    )
    assert fast == slow
    assert hash(fast) == hash(slow)
    with pytest.raises(AttributeError):
        fast.attempt = 3  # type: ignore[misc]  # still frozen


@pytest.mark.parametrize("ok, kind", [(True, None), (False, "timeout"), (False, "rejected")])
def test_outcome_equals_the_dataclass_constructor(ok: bool, kind: str | None) -> None:
    fast = outcome(ok, 12.5, kind)
    assert fast == Outcome(ok=ok, latency_ms=12.5, error_kind=kind)
    assert fast.backend_fault == (kind == "timeout")


def test_run_events_runs_in_simpys_order_and_counts_like_step() -> None:
    def trace(env: simpy.Environment) -> list[tuple[float, str]]:
        seen: list[tuple[float, str]] = []

        def note(event: At) -> None:
            seen.append((env.now, event._value))
            if event._value == "a":
                At(env, 0.0, "c", note)  # same instant, NORMAL priority: before the later b

        At(env, 1.0, "b", note, priority=2)
        At(env, 1.0, "a", note)
        At(env, 0.5, "first", note)
        return seen

    ours, theirs = simpy.Environment(), simpy.Environment()
    seen_ours, seen_theirs = trace(ours), trace(theirs)
    assert run_events(ours) == 4
    theirs.run()
    assert seen_ours == seen_theirs == [(0.5, "first"), (1.0, "a"), (1.0, "c"), (1.0, "b")]


def test_run_events_stops_on_stop_simulation_and_raises_an_undefused_failure() -> None:
    env = simpy.Environment()

    def stop(_: At) -> None:
        raise simpy.core.StopSimulation(None)

    At(env, 1.0, None, stop)
    At(env, 2.0, None, stop)
    assert run_events(env) == 1
    assert env.now == 1.0

    env = simpy.Environment()
    env.event().fail(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        run_events(env)
