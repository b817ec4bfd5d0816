"""The run config builds every strategy it names through the balancer's registry, with
the run's options and weights, so a typo fails at load (before any process starts), and
the one order of strategy and scenario names is shared by the registry and the analysis."""

from __future__ import annotations

import pytest

from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.balancer.strategies.registry import strategy_names
from lblab.errors import ConfigError
from lblab.experiment import config_layers, runconfig
from lblab.experiment.presets import load_preset
from lblab.scenarios import BUILTIN_SCENARIOS, CELLS
from lblab.strategy_names import STRATEGY_NAMES, THESIS_FIVE


def resolve(layer: dict) -> runconfig.RunConfig:
    return runconfig.resolve(load_preset("tiny"), layer, {})


@pytest.mark.parametrize(
    "layer,message",
    [
        # a misspelt option name: the strategy, the option and the valid ones
        (
            {"run": {"strategies": ["lc"]}, "strategy_options": {"lc": {"tei": "random"}}},
            r"strategy 'lc': unknown option 'tei'; valid options: tie, weighted",
        ),
        # a misspelt value of a choice
        (
            {"run": {"strategies": ["lc"]}, "strategy_options": {"lc": {"tie": "randm"}}},
            r"strategy 'lc' option 'tie': 'randm' is not one of first, random, rr",
        ),
        # a value the strategy's own config refuses (its __post_init__ range check)
        (
            {"run": {"strategies": ["dwrr"]}, "strategy_options": {"dwrr": {"interval": "0"}}},
            r"strategy 'dwrr': interval=0.0: must be > 0 seconds",
        ),
        # options of a strategy this run does not use are checked too (a later --strategies)
        (
            {"run": {"strategies": ["rr"]}, "strategy_options": {"p2c": {"tie": "random"}}},
            r"strategy 'p2c': unknown option 'tie'",
        ),
        # options for a name no strategy has
        (
            {"run": {"strategies": ["rr"]}, "strategy_options": {"lcc": {"tie": "random"}}},
            r"strategy_options.lcc: unknown strategy 'lcc'; valid names are r, rr, wrr",
        ),
        (
            {"run": {"strategies": ["rr", "nope"]}},
            r"run.strategies: unknown strategy 'nope'",
        ),
    ],
)
def test_a_strategy_typo_fails_at_load_naming_strategy_and_option(
    layer: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(layer)


def test_good_options_resolve_and_keep_their_text_for_the_balancer() -> None:
    cfg = resolve(
        {
            "run": {"strategies": ["lc", "dwrr"]},
            "strategy_options": {"lc": {"tie": "random", "weighted": True}},
        }
    )
    assert cfg.strategy_options == {"lc": {"tie": "random", "weighted": "True"}}


def test_each_table_checks_itself_when_built_alone() -> None:
    with pytest.raises(ConfigError, match=r"testbed\.kind = external needs testbed\.balancer"):
        runconfig.TestbedConfig.from_table({"kind": "external"})
    with pytest.raises(ConfigError, match=r"servers\[0\]: unknown server keys \['cpu'\]"):
        runconfig.ServerSpec.from_table({"id": "s1", "cpu": 1}, "servers[0]")
    with pytest.raises(ConfigError, match=r"timeline\[0\].server: 's9' is not one"):
        runconfig.TimelineEvent.from_table(
            {"at": "1s", "action": "kill", "server": "s9"}, "timeline[0]", ["s1"]
        )
    load = runconfig.LoadConfig.from_table({"think_time": 1.5, "users": "3"}, "load")
    assert (load.think_time, load.users) == ((1.5, 1.5), 3)


@pytest.mark.parametrize(
    "layer,message",
    [
        (
            {"run": {"expect_workers": 2}},
            r"run.expect_workers = 2 needs run.locust_master_bind",
        ),
        (
            {"run": {"locust_master_bind": "127.0.0.1"}},
            r"run.locust_master_bind is for a distributed Locust",
        ),
        (
            {"timeline": [{"at": "1s", "action": "kill", "server": "s1", "scenarios": ["lp+lr"]}]},
            r"timeline\[0\].scenarios: 'lp\+lr' is not a scenario of this run",
        ),
        (
            {
                "testbed": {"kind": "external", "balancer": "127.0.0.1:1", "admin": "127.0.0.1:2"},
                "timeline": [{"at": "1s", "action": "kill", "server": "s1"}],
            },
            r"timeline events need the local testbed",
        ),
        (
            {"timeline": [{"at": "1s", "action": "pause", "server": "s1", "factor": 2}]},
            r"factor do not apply to 'pause'",
        ),
    ],
)
def test_rules_across_tables_name_the_fields(layer: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(layer)


def test_the_registry_registers_exactly_the_shared_names_in_their_order() -> None:
    assert tuple(strategy_names()) == STRATEGY_NAMES
    assert set(THESIS_FIVE) <= set(STRATEGY_NAMES)
    assert config_layers.DEFAULTS["run"]["strategies"] == list(THESIS_FIVE)


def test_analysis_orders_strategies_and_scenarios_by_the_shared_lists() -> None:
    shuffled = [*reversed(STRATEGY_NAMES), "zz-custom", "lc [sim]"]
    ordered = order_strategies(shuffled)
    assert ordered[: len(STRATEGY_NAMES) + 1] == [
        *STRATEGY_NAMES[:4], "lc", "lc [sim]", *STRATEGY_NAMES[5:]
    ]  # fmt: skip
    assert ordered[-1] == "zz-custom"
    assert order_scenarios(["custom", *reversed(BUILTIN_SCENARIOS)]) == [
        *BUILTIN_SCENARIOS,
        "custom",
    ]
    assert (*CELLS, "variation") == BUILTIN_SCENARIOS
