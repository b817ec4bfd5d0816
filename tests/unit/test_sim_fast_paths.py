"""The simulator's fast paths give exactly what the slow, obvious code gives."""

from __future__ import annotations

import gc

import pytest
import simpy

from lblab.simulator.clock import at, run_events, snap


def test_run_events_runs_callbacks_and_simpy_events_in_simpys_order() -> None:
    env = simpy.Environment()
    seen: list[tuple[float, str]] = []

    def note(what: str) -> None:
        seen.append((env.now, what))
        if what == "a":
            at(env, 0.0, note, "c")  # same instant, NORMAL priority: before the later b

    at(env, 1.0, note, "b", priority=2)
    at(env, 1.0, note, "a")
    env.timeout(1.0).callbacks.append(lambda _: note("simpy"))  # after a: numbered later
    at(env, 0.5, note, "first")
    env.timeout(0.25).callbacks.append(lambda _: note("simpy early"))
    assert run_events(env) == 6
    assert seen == [
        (0.25, "simpy early"),
        (0.5, "first"),
        (1.0, "a"),
        (1.0, "simpy"),
        (1.0, "c"),
        (1.0, "b"),
    ]


def test_at_snaps_to_the_grid() -> None:
    env = simpy.Environment()
    seen: list[float] = []
    for _ in range(12):
        at(env, 0.0, lambda _: None)
    at(env, 0.1 + 0.2, lambda _: seen.append(env.now))
    run_events(env)
    assert seen == [0.3] == [snap(0.025 * 12)]


def test_run_events_stops_on_stop_simulation_and_raises_an_undefused_failure() -> None:
    env = simpy.Environment()

    def stop(_: object) -> None:
        raise simpy.core.StopSimulation(None)

    at(env, 1.0, stop)
    at(env, 2.0, stop)
    assert run_events(env) == 1
    assert env.now == 1.0

    env = simpy.Environment()
    env.event().fail(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        run_events(env)


def test_run_events_turns_the_collector_back_on_however_it_ends() -> None:
    env = simpy.Environment()
    at(env, 1.0, lambda _: gc_states.append(gc.isenabled()))
    gc_states: list[bool] = []
    run_events(env)
    assert gc_states == [False]
    assert gc.isenabled()

    env = simpy.Environment()
    env.event().fail(ValueError("boom"))
    with pytest.raises(ValueError):
        run_events(env)
    assert gc.isenabled()
