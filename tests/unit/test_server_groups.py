"""``count = N`` in a [[servers]] entry: N servers ``<id>1`` .. ``<id>N`` with its keys."""

from __future__ import annotations

from typing import Any

import pytest

from lblab.errors import ConfigError
from lblab.experiment.plan import plan
from lblab.experiment.runconfig import build, resolve
from lblab.simulator.simulated_testbed import phase_config


def _file(servers: list[dict[str, Any]], weights: dict[str, Any] | None = None) -> dict:
    layer: dict[str, Any] = {
        "run": {"strategies": ["rr", "wrr"], "scenarios": ["sp+sr"], "duration": "2s"},
        "testbed": {"kind": "simulated"},
        "servers": servers,
    }
    if weights is not None:
        layer["weights"] = weights
    return layer


def test_a_group_is_its_members_with_its_keys() -> None:
    config = resolve(
        None, _file([{"id": "small", "count": 3, "cpu_quota": 0.25}, {"id": "big"}], {}), {}
    )
    assert [s.id for s in config.servers] == ["small1", "small2", "small3", "big"]
    assert [s.cpu_quota for s in config.servers] == [0.25, 0.25, 0.25, None]


def test_the_groups_weight_weighs_each_member_and_a_members_own_wins() -> None:
    config = resolve(
        None,
        _file([{"id": "s", "count": 3}, {"id": "b"}], {"s": 1, "s2": 5, "b": 4}),
        {},
    )
    assert dict(config.weights) == {"s1": 1, "s3": 1, "s2": 5, "b": 4}


def test_the_resolved_config_holds_the_members_so_it_builds_again_the_same() -> None:
    config = resolve(None, _file([{"id": "s", "count": 2, "workers": 4}], {"s": 2}), {})
    assert [s["id"] for s in config.raw["servers"]] == ["s1", "s2"]
    again = build(config.raw)
    assert again.servers == config.servers and again.weights == config.weights
    servers = config.to_toml().split("[[servers]]", 1)[1].split("\n[weights]")[0]
    assert 'id = "s2"' in servers and "count" not in servers


def test_the_simulated_testbed_runs_every_member() -> None:
    config = resolve(None, _file([{"id": "s", "count": 16}], {}), {})
    sim = phase_config(config, plan(config)[0], "t")
    assert sim.server_ids == tuple(f"s{n}" for n in range(1, 17))


def test_a_timeline_may_name_a_member() -> None:
    layer = _file([{"id": "s", "count": 3}], {})
    layer["timeline"] = [{"at": "1s", "action": "kill", "server": "s3"}]
    assert resolve(None, layer, {}).timeline[0].server == "s3"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"count": 3}, "servers[0]: a group of servers needs an id"),
        ({"id": "s", "count": 0}, "servers[0].count"),
        ({"id": "s", "count": "many"}, "servers[0].count"),
        ({"id": "s", "count": 10**9}, "servers[0].count"),
        ({"id": "s", "count": 2, "colour": 3}, "servers[0]: unknown server keys ['colour']"),
    ],
)
def test_a_bad_group_is_named(entry: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve(None, _file([entry], {}), {})
    assert said in str(raised.value)


def test_members_that_repeat_an_id_are_refused() -> None:
    with pytest.raises(ConfigError, match="repeat"):
        resolve(None, _file([{"id": "s", "count": 2}, {"id": "s1"}], {}), {})
