"""Scenarios, presets, config resolution and the open-loop schedule (no processes)."""

from __future__ import annotations

import itertools
import json
import random
import statistics
import tomllib

import pytest

from lblab.errors import ConfigError
from lblab.experiment import config_layers, runconfig
from lblab.experiment.plan import plan, plan_block
from lblab.experiment.presets import load_preset, preset_names
from lblab.experiment.runner import CHECKABLE_OK, lengthened
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.openloop import due_times
from lblab.scenarios import CELLS, builtin_scenario, request_body


def resolve(preset: str = "tiny", file: dict | None = None, flags: dict | None = None):
    return runconfig.resolve(load_preset(preset), file, flags or {})


# ------------------------------------------------------------------ scenarios


def test_matrix_has_the_nine_thesis_cells_with_decimal_sizes() -> None:
    assert list(CELLS) == [
        "sp+sr", "sp+mr", "sp+lr", "mp+sr", "mp+mr", "mp+lr", "lp+sr", "lp+mr", "lp+lr",
    ]  # fmt: skip
    assert (CELLS["sp+lr"].package_bytes, CELLS["sp+lr"].work_bytes) == (100, 1_000_000)
    assert (CELLS["mp+sr"].package_bytes, CELLS["mp+sr"].work_bytes) == (10_000, 10_000)
    assert (CELLS["lp+mr"].package_bytes, CELLS["lp+mr"].work_bytes) == (1_000_000, 100_000)


@pytest.mark.parametrize("package,work", [(100, 10_000), (10_000, 1_000_000), (1_000_000, 7)])
def test_request_body_is_exactly_the_package_size_and_valid_json(package: int, work: int) -> None:
    body = request_body(package, work)
    assert len(body) == package
    assert json.loads(body)["work_bytes"] == work


def test_request_body_below_the_minimum_is_the_bare_object() -> None:
    body = request_body(5, 10)
    assert json.loads(body) == {"work_bytes": 10, "pad": ""}


def test_variation_draws_every_cell_evenly_and_reproducibly() -> None:
    draws = [builtin_scenario("variation").chooser(random.Random(7)).next() for _ in range(1)]
    chooser = builtin_scenario("variation").chooser(random.Random(7))
    seq = [chooser.next().name for _ in range(9000)]
    again = builtin_scenario("variation").chooser(random.Random(7))
    assert [again.next().name for _ in range(9000)] == seq
    counts = {name: seq.count(name) for name in CELLS}
    assert min(counts.values()) > 850 and max(counts.values()) < 1150
    assert draws[0].name in CELLS


def test_unknown_scenario_lists_the_valid_names() -> None:
    with pytest.raises(ConfigError, match=r"unknown scenario 'xp\+sr'.*sp\+sr.*variation"):
        builtin_scenario("xp+sr")


# ------------------------------------------------------------------ presets and config


def test_every_preset_resolves() -> None:
    assert {"quick", "thesis", "tiny", "ingram", "martins"} <= set(preset_names())
    for name in preset_names():
        raw = load_preset(name)
        config_layers.check_keys(raw, name)
        # Strategy names are checked against the balancer registry when it is importable;
        # here only the shape matters, so use strategies every registry has.
        cfg = runconfig.resolve(raw, None, {"run": {"strategies": ["rr"]}})
        assert cfg.scenarios and cfg.servers


def test_thesis_preset_is_the_published_design() -> None:
    cfg = runconfig.resolve(load_preset("thesis"), None, {"run": {"strategies": ["rr"]}})
    assert len(cfg.scenarios) == 10 and cfg.scenarios[-1].name == "variation"
    assert cfg.duration == 1200 and cfg.replications == 3
    assert cfg.loads["sp+sr"].users == 50
    assert [(s.id, s.cpu_quota) for s in cfg.servers] == [("s1", 0.25), ("s2", 0.25), ("s3", 1.0)]
    assert load_preset("thesis")["run"]["strategies"] == ["r", "rr", "wrr", "lc", "dwrr"]


def test_ingram_and_martins_use_the_open_model_with_their_parameters() -> None:
    ingram = runconfig.resolve(load_preset("ingram"), None, {"run": {"strategies": ["rr"]}})
    assert [s.delay_ms for s in ingram.servers] == [250, 500, 100, 200, 700]
    assert all(s.workers == 1 for s in ingram.servers)
    assert ingram.loads["ingram-100"].model == "open"
    assert ingram.loads["ingram-100"].rate == 40 and ingram.loads["ingram-100"].count == 100
    martins = runconfig.resolve(load_preset("martins"), None, {"run": {"strategies": ["rr"]}})
    assert len(martins.servers) == 10 and all(s.workers == 5 for s in martins.servers)
    assert sorted({s.delay_ms for s in martins.servers}) == [10, 500, 900]
    assert [martins.loads[s.name].rate for s in martins.scenarios] == [10, 50, 100, 150, 200]
    assert set(martins.weights) == {f"n{i}" for i in range(10)}  # weights replace, not merge


def test_layers_override_in_order_defaults_preset_file_flags() -> None:
    cfg = resolve(
        "tiny",
        {"run": {"duration": "7s", "replications": 2}, "load": {"users": 9}},
        {"run": {"duration": "11s"}},
    )
    assert cfg.duration == 11  # flag beats file
    assert cfg.replications == 2  # file beats preset
    assert cfg.loads["sp+sr"].users == 9
    assert cfg.warmup == 1  # preset beats defaults
    assert cfg.request_timeout == 5


def test_print_config_round_trips() -> None:
    cfg = resolve("martins", flags={"run": {"strategies": ["rr"]}})
    text = cfg.to_toml()
    again = runconfig.resolve(None, tomllib.loads(text), {})
    assert again.to_toml() == text
    assert again.loads == cfg.loads and again.servers == cfg.servers


@pytest.mark.parametrize(
    "layer,message",
    [
        ({"run": {"duration": "5x"}}, r"run.duration: '5x' is not a duration"),
        ({"run": {"replications": 0}}, r"run.replications: 0 must be 1 or more"),
        ({"run": {"scenarios": ["sp+sr", "nope"]}}, r"unknown scenario 'nope'"),
        ({"load": {"users": "many"}}, r"load.users: 'many' is not a whole number"),
        ({"load": {"model": "open"}}, r"load.rate: the open model needs a rate"),
        ({"load": {"think_time": [2, 1]}}, r"load.think_time"),
        ({"runn": {}}, r"unknown section \[runn\]"),
        ({"run": {"duraton": "1s"}}, r"unknown key run.duraton"),
        ({"testbed": {"kind": "cloud"}}, r"testbed.kind: 'cloud' is not one of local, external"),
        ({"testbed": {"kind": "external"}}, r"needs testbed.balancer"),
        (
            {"testbed": {"kind": "external", "balancer": "10.0.0.1:7878"}},
            r"without testbed.admin.*cannot switch",
        ),
        ({"weights": {"s1": -1}}, r"weights.s1: weight -1 must be a number > 0"),
        ({"servers": [{"id": "s1"}, {"id": "s1"}]}, r"repeat"),
        ({"timeline": [{"at": "1s", "action": "explode", "server": "s1"}]}, r"action"),
        ({"timeline": [{"at": "1s", "action": "kill", "server": "s9"}]}, r"'s9' is not one"),
        (
            {"scenario_defs": {"x": {"cells": ["sp+sr"], "ratee": 5}}, "run": {"scenarios": ["x"]}},
            r"unknown keys \['ratee'\]",
        ),
    ],
)
def test_bad_values_name_the_field(layer: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve("tiny", layer)


def test_custom_scenario_cells_and_timeline() -> None:
    cfg = resolve(
        "tiny",
        {
            "run": {"scenarios": ["big", "sp+sr"]},
            "scenario_defs": {
                "big": {"cells": [{"name": "66KB", "package": "100B", "work": "66KB"}], "users": 2}
            },
            "timeline": [
                {"at": "2s", "action": "kill", "server": "s2", "scenarios": ["big"]},
                {"at": "3s", "action": "add", "server": "s4", "cpu_quota": 0.5, "weight": 2},
            ],
        },
    )
    big = cfg.scenarios[0]
    assert big.cells[0].work_bytes == 66_000 and cfg.loads["big"].users == 2
    assert cfg.loads["sp+sr"].users == 4
    kill, add = cfg.timeline
    assert kill.applies_to("big") and not kill.applies_to("sp+sr")
    assert add.spec is not None and add.spec.cpu_quota == 0.5 and add.weight == 2


def test_plan_runs_blocks_with_a_seeded_random_order_per_scenario() -> None:
    cfg = resolve("tiny", {"run": {"strategies": ["rr", "lc", "r", "wrr"], "replications": 3}})
    phases = plan(cfg)
    assert len(phases) == 3 * 2 * 4
    assert [p.index for p in phases] == list(range(len(phases)))
    assert len({p.key for p in phases}) == len(phases)
    for block in (1, 2, 3):
        mine = [p for p in phases if p.replication == block]
        for scenario in ("sp+sr", "mp+mr"):  # each block: every strategy once per scenario
            assert sorted(p.strategy for p in mine if p.scenario == scenario) == sorted(
                cfg.strategies
            )
    orders = {
        tuple(p.strategy for p in phases if p.replication == b and p.scenario == "sp+sr")
        for b in (1, 2, 3)
    }
    assert len(orders) > 1  # the order is drawn, not fixed
    assert plan(cfg) == phases  # and reproducible from the seed
    other = resolve("tiny", {"run": {"strategies": ["rr", "lc", "r", "wrr"], "replications": 3,
                                     "seed": 2}})  # fmt: skip
    assert [p.strategy for p in plan(other)] != [p.strategy for p in phases]


def test_an_adaptive_block_of_some_scenarios_keeps_their_order_from_the_seed() -> None:
    cfg = resolve("tiny", {"run": {"strategies": ["rr", "lc", "r", "wrr"]}})
    whole = plan_block(cfg, 4, 40)
    part = plan_block(cfg, 4, 40, ["mp+mr"])
    assert {p.scenario for p in part} == {"mp+mr"} and [p.index for p in part] == [40, 41, 42, 43]
    assert [p.strategy for p in part] == [p.strategy for p in whole if p.scenario == "mp+mr"]


def test_load_spec_round_trips_through_json() -> None:
    spec = LoadSpec(
        run_id="x",
        scenario=builtin_scenario("variation"),
        strategy="lc",
        replication=2,
        model="open",
        rate=40,
        count=100,
        think_time=(0.5, 1.0),
        balancers=("127.0.0.1:7001", "127.0.0.1:7002"),
    )
    assert LoadSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ConfigError, match="not a valid load spec"):
        LoadSpec.from_json('{"run_id": 1}')


# ------------------------------------------------------------------ open-loop schedule


def test_constant_schedule_is_k_over_rate_regardless_of_anything_else() -> None:
    times = list(due_times(40, "constant", random.Random(1), count=5))
    assert times == pytest.approx([0, 0.025, 0.05, 0.075, 0.1])
    by_duration = list(due_times(10, "constant", random.Random(1), duration=1.0))
    assert len(by_duration) == 10 and by_duration[-1] == pytest.approx(0.9)


def test_constant_schedules_with_offsets_interleave() -> None:
    a = list(due_times(5, "constant", random.Random(1), count=3, offset=0.0))
    b = list(due_times(5, "constant", random.Random(1), count=3, offset=0.1))
    assert sorted(a + b) == pytest.approx([0, 0.1, 0.2, 0.3, 0.4, 0.5])


def test_poisson_schedule_has_the_right_mean_rate_and_exponential_gaps() -> None:
    times = list(due_times(100, "poisson", random.Random(3), duration=60))
    assert 5700 < len(times) < 6300
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.mean(gaps) == pytest.approx(0.01, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.01, rel=0.08)  # exponential: sd = mean
    assert times == list(due_times(100, "poisson", random.Random(3), duration=60))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"rate": 0, "arrival": "constant", "count": 1}, "above 0"),
        ({"rate": 1, "arrival": "bursty", "count": 1}, "not one of constant, poisson"),
        ({"rate": 1, "arrival": "constant"}, "needs a duration or a request count"),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict, message: str) -> None:
    rate, arrival = kwargs.pop("rate"), kwargs.pop("arrival")
    with pytest.raises(ConfigError, match=message):
        list(due_times(rate, arrival, random.Random(1), **kwargs))


def test_an_adaptive_run_lengthens_phases_too_short_for_their_checks() -> None:
    assert lengthened(3.0, [CHECKABLE_OK, 5000], most=12.0) == 3.0  # enough: unchanged
    assert lengthened(3.0, [200, 900], most=12.0) == 6.0  # the fewest decides
    assert lengthened(3.0, [10, 900], most=12.0) == 12.0  # at most 4x
    assert lengthened(3.0, [0], most=12.0) == 12.0
    assert lengthened(6.0, [CHECKABLE_OK - 1], most=12.0) >= 6.0  # never shorter


def test_balancers_are_a_local_testbed_key_from_1_to_16() -> None:
    assert resolve("tiny", {}).testbed.balancers == 1
    assert resolve("tiny", {"testbed": {"balancers": 4}}).testbed.balancers == 4
    for bad in (0, 17, "two", 1.5):
        with pytest.raises(ConfigError, match=r"testbed\.balancers"):
            resolve("tiny", {"testbed": {"balancers": bad}})
    external = {"kind": "external", "balancer": "127.0.0.1:7000", "balancers": 2}
    with pytest.raises(ConfigError, match=r"testbed\.balancers: an external testbed"):
        resolve("tiny", {"testbed": external})
