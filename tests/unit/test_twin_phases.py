"""The twin of a run with its experiment file is that file's phases simulated
(``simulator/twin/solve.py``, ``file_configs``): the simulated testbed's SimConfig of each
phase the run did, with only what the twin fits in its place."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from lblab.experiment.plan import Phase, phase_entry, plan
from lblab.experiment.runconfig import resolve
from lblab.manifest import Manifest
from lblab.simulator.simulated_testbed import phase_config
from lblab.simulator.twin.measured_service import MeasuredService, fit_service
from lblab.simulator.twin.model import FrontEnd, ScenarioModel
from lblab.simulator.twin.solve import configs_for, file_configs, run_configs
from lblab.simulator.twin.testbed import file_testbed
from lblab.simulator.workload import ClosedUsers

FILE = {
    "run": {
        "strategies": ["rr", "lc"],
        "scenarios": ["sp+sr"],
        "duration": "3s",
        "warmup": "1s",
        "replications": 2,
        "seed": 7,
    },
    "testbed": {"kind": "simulated", "balancers": 2, "agent_interval": 0.5},
    "strategy_options": {"lc": {"tie": "random"}},
    "servers": [{"id": "a", "cpu_quota": 0.5}, {"id": "b", "workers": 2}],
    "weights": {"a": 1, "b": 3},
    "timeline": [
        {"at": "2s", "action": "kill", "server": "a"},
        {"at": "2.5s", "action": "add", "server": "c", "weight": 2},
    ],
}


def _run() -> tuple[Manifest, list[Phase]]:
    config = resolve(None, FILE, {})
    phases = plan(config)
    entries = [phase_entry(config, p).updated(status="done") for p in phases]
    entries[-1] = entries[-1].updated(status="failed")  # not measured: not twinned
    entries[2] = entries[2].updated(duration_s=5.0)  # lengthened, as an adaptive run may
    manifest = Manifest(run_id="r", simulated=True, config=config.raw, phases=tuple(entries))
    return manifest, phases


def _models() -> tuple[dict[str, MeasuredService], dict[str, ScenarioModel]]:
    one_ms = fit_service(
        pd.DataFrame({"package_bytes": [100] * 5, "work_bytes": [100] * 5, "service_ms": 1.0})
    )
    services = {"a": one_ms, "b": one_ms, "c": one_ms}
    model = ScenarioModel(
        front=FrontEnd(4.0),
        think_ms=20.0,
        requests=3000,
        demand_scale={"a": 1.0, "b": 1.0, "c": 1.0},
        quota_binds={"a": False, "b": False, "c": False},
    )
    return services, {"sp+sr": model}


def test_each_phase_is_the_files_with_the_fitted_parts_in_place() -> None:
    manifest, phases = _run()
    testbed = file_testbed(manifest)
    assert [s.id for s in testbed.servers] == ["a", "b", "c"]
    assert [s.id for s in testbed.start_servers] == ["a", "b"]
    services, models = _models()
    fronts = {("sp+sr", "rr"): {"a": 1.0}}
    twin = file_configs(testbed, services, models, "t", fronts)
    assert [(c.strategy, c.replication) for c in twin] == [
        (p.strategy, p.replication) for p in phases[:-1]
    ]
    config = resolve(None, FILE, {})
    for cfg, p in zip(twin, phases, strict=False):
        ran = config if p.index != 2 else replace(config, duration=5.0)
        own = phase_config(ran, p, "t")
        fitted = {"servers", "arrivals", "client_delay"}
        for name in set(own.__dataclass_fields__) - fitted:
            assert getattr(cfg, name) == getattr(own, name), name
        assert cfg.seed == 7 + p.index and cfg.balancers == 2 and cfg.timeline
        assert cfg.duration == (6.0 if p.index == 2 else 4.0)
        assert testbed.warmup_fraction_of(cfg) == pytest.approx(1.0 / cfg.duration)
        assert isinstance(own.arrivals, ClosedUsers)
        assert cfg.arrivals == replace(own.arrivals, think=0.02)  # the measured think time
        assert cfg.client_delay == pytest.approx(0.002)
        for group, mine in zip(cfg.servers, own.servers, strict=True):
            assert (group.count, group.workers, group.weight, group.capacity) == (
                mine.count,
                mine.workers,
                mine.weight,
                mine.capacity,
            )
            assert group.cpu_quota is None  # no quota bound
        assert cfg.servers[0].delay == pytest.approx(0.0005 if cfg.strategy == "rr" else 0.0)
    first = run_configs(testbed, services, models, "t", fronts, [("sp+sr", "rr")], first=True)
    assert [(c.strategy, c.replication) for c in first] == [("rr", 1)]


def test_a_scaled_twin_repeats_the_servers_the_run_started_with() -> None:
    manifest, _ = _run()
    testbed = file_testbed(manifest)
    services, models = _models()
    (cfg, *_) = configs_for(testbed, services, models, 4, 1, 500, "x4", {})
    assert [(g.count, g.weight) for g in cfg.servers] == [(2, 1.0), (2, 3.0)]
    assert cfg.requests == 500 and cfg.duration is None and not cfg.timeline
    assert testbed.warmup_fraction_of(cfg) == pytest.approx(0.25)
    assert "timeline" in testbed.unscaled[0] and "2 balancers" in testbed.unscaled[1]


def test_each_phase_is_drawn_repeats_times_as_replications_of_its_block() -> None:
    """Draws pool into the cell's figure: the first is the phase itself (its own seed),
    the others differ only in their seeds, and block b's draws are the twin's
    replications (b - 1) * repeats + 1 .. b * repeats."""
    manifest, _ = _run()
    testbed = file_testbed(manifest)
    services, models = _models()
    once = file_configs(testbed, services, models, "t", {})
    thrice = file_configs(testbed, services, models, "t", {}, repeats=3)
    assert len(thrice) == 3 * len(once)
    for i, own in enumerate(once):
        draws = thrice[3 * i : 3 * i + 3]
        assert draws[0].seed == own.seed  # the phase itself, then other draws of it
        assert [d.replication for d in draws] == [(own.replication - 1) * 3 + k for k in (1, 2, 3)]
        for d in draws:  # the same phase, fitted once (its service models are one object)
            assert d.servers is draws[0].servers
            same = replace(d, seed=own.seed, replication=own.replication, servers=own.servers)
            assert same == own
    seeds = [c.seed for c in thrice]
    assert len(set(seeds)) == len(seeds)
    cells = {(c.strategy, c.replication) for c in thrice}
    assert len(cells) == len(thrice)  # no two draws of a cell share a replication
    first = run_configs(testbed, services, models, "t", {}, first=True, repeats=3)
    assert len(first) == 2  # solving the front ends takes each cell's first phase, once
