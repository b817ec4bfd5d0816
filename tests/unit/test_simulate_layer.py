"""``lblab simulate``'s flags (and an old simulate file) say an experiment file
(``app/simulate_layer.py``): the simulation of that file's phase is the simulation the
simulator's own dialect (``simulator/config.config_from_mapping``, which sweeps read)
makes of the same settings, so the two dialects mean one thing."""

from __future__ import annotations

from typing import Any

import pytest

from lblab.app.simulate_layer import experiment_layer
from lblab.errors import ConfigError
from lblab.experiment.plan import plan
from lblab.experiment.presets import NO_PRESET, load_preset
from lblab.experiment.runconfig import RunConfig, resolve
from lblab.simulator.capacity import capacities
from lblab.simulator.config import SimConfig, config_from_mapping
from lblab.simulator.run import simulate
from lblab.simulator.simulated_testbed import phase_config


def _file(settings: dict[str, Any], strategies: tuple[str, ...] = ()) -> RunConfig:
    return resolve(load_preset(NO_PRESET), None, experiment_layer(settings, strategies))


def _first_phase(settings: dict[str, Any]) -> SimConfig:
    config = _file(settings)
    return phase_config(config, plan(config)[0], "sim")


SETTINGS = [
    {"servers": 3, "requests": 500, "rate": 200},
    {"servers": 2, "workers": 3, "service": "bimodal:1ms,20ms,0.1", "requests": 300,
     "rate": 400, "poisson": False, "deadline": "2s", "report_period": "100ms"},
    {"users": 4, "think": "5ms", "requests": 200, "scenario": "mp+mr",
     "service": "json:a=0.5ms,b=2e-8,c=4e-9"},
    {"servers": [{"count": 2, "service": "exp:5ms", "capacity": 8},
                 {"speed": 4, "weight": 4, "workers": 2, "delay": "1ms"}],
     "requests": 400, "rate": 300, "client_delay": "2ms", "max_tries": 2, "balancers": 2},
    {"servers": 4, "requests": 400, "rate": 300, "balancers": 4, "aperture": "deterministic",
     "aperture_size": 2},
]  # fmt: skip


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_flags_file_simulates_what_the_simulators_dialect_does(
    settings: dict[str, Any],
) -> None:
    ours, pool = _first_phase(settings), config_from_mapping(settings)
    assert ours.server_names == pool.server_names
    members = [g for g in pool.servers for _ in range(g.count)]
    for a, b in zip(ours.servers, members, strict=True):
        assert (a.service.spec(), a.workers, a.speed, a.weight, a.capacity, a.delay) == (
            b.service.spec(), b.workers, b.speed, b.weight, b.capacity, b.delay,
        )  # fmt: skip
        assert not a.serial_cpu and a.sleep is None and a.cpu_quota is None
    same = ("requests", "duration", "arrivals", "scenario", "cells", "deadline",
            "report_period", "client_delay", "server_delay", "max_tries", "routing_keys",
            "picks_every", "balancers", "aperture", "health", "strategy", "seed")  # fmt: skip
    assert {k: getattr(ours, k) for k in same} == {k: getattr(pool, k) for k in same}


def test_so_the_first_phase_draws_the_same_requests() -> None:
    settings = SETTINGS[3]
    ours, pool = simulate(_first_phase(settings)), simulate(config_from_mapping(settings))
    columns = ["t_sent", "server", "latency_ms", "ok", "balancer"]
    assert ours.requests.select(columns).equals(pool.requests.select(columns))


def test_the_file_says_queue_servers_one_scenario_no_warmup_and_no_preset() -> None:
    config = _file({"servers": 2, "requests": 50}, ("lc",))
    assert [(s.id, s.service, s.workers) for s in config.servers] == [
        ("s1", "exp:10ms", 1), ("s2", "exp:10ms", 1)
    ]  # fmt: skip
    assert config.strategies == ("lc",) and config.strategy_options["lc"] == {}  # not quick's
    assert [s.name for s in config.scenarios] == ["sp+sr"] and config.warmup == 0
    assert config.replications == 1 and config.max_replications == 0
    assert config.loads["sp+sr"].count == 50 and config.weights == {"s1": 1.0, "s2": 1.0}


def test_a_queue_servers_capacity_is_its_slots_over_its_service() -> None:
    settings = {"servers": [{"count": 1, "service": "fixed:10ms", "workers": 3},
                            {"service": "fixed:10ms", "speed": 2}], "requests": 10}  # fmt: skip
    (capacity,) = capacities(_file(settings))
    assert capacity.servers == pytest.approx({"s1": 300.0, "s2": 200.0})


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"requests": 10, "duration": "5s"}, "requests, duration: give one"),
        ({"requests": 10**12}, "requests: 1000000000000 must be at most"),
        ({"rate": 10, "users": 2}, "give either rate (open arrivals) or users (closed)"),
        ({"tick_period": "1s"}, "tick_period: `lblab simulate` runs an experiment file"),
        ({"replication": 2}, "replication: `lblab simulate` runs an experiment file"),
        ({"nope": 1}, "unknown settings ['nope']"),
        ({"servers": [{"count": 1, "colour": "red"}]}, "servers[0]: unknown keys ['colour']"),
        ({"servers": [{"capacity": 0}]}, "servers[0].capacity: 0 must be 1 or more"),
        ({"servers": [{"speed": "fast"}]}, "servers[0].speed"),
        ({"servers": [{"weight": 0}]}, "servers[0].weight"),
        ({"report_period": "0.1ms"}, "report_period: 0.0001 must be 0.001 or more"),
        ({"deadline": 0}, "deadline"),
    ],
)
def test_a_bad_setting_is_refused_by_its_own_name(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _file(settings)
    assert says in str(refused.value)


def test_one_strategy_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="names 'prequal' twice"):
        experiment_layer({}, ("prequal", "prequal[q_rif=0.6]"))


@pytest.mark.parametrize("kind", ["local", "external"])
def test_a_live_testbed_refuses_what_only_a_simulated_one_has(kind: str) -> None:
    live = {"testbed": {"kind": kind, "balancer": "127.0.0.1:9", "admin": "127.0.0.1:9"}}
    queue = {**live, "servers": [{"id": "s1", "service": "exp:10ms", "speed": 2}],
             "weights": {"s1": 1}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"servers\.s1: service, speed describe a simulated"):
        resolve(load_preset("quick"), queue, {})
    closed = {**live, "load": {"model": "closed", "count": 100}}
    with pytest.raises(ConfigError, match=r"load\.count: 100 requests of the closed model"):
        resolve(load_preset("quick"), closed, {})


def test_a_queue_server_takes_no_sleep() -> None:
    given = {"servers": [{"id": "s1", "service": "exp:10ms", "delay_ms": 5}], "weights": {"s1": 1},
             "testbed": {"kind": "simulated"}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"servers\.s1: delay_ms is slept"):
        resolve(load_preset("quick"), given, {})
