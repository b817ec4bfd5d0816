"""The experiment file's ``[simulator]`` table: the knobs only the simulated testbed has
(``config_layers.SIMULATOR_KEYS``), reaching its simulation, checked by its driver with
the key named as the file has it, and refused by a live testbed unless given under
``[simulated]``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lblab.errors import ConfigError
from lblab.experiment.config_layers import SIMULATOR_KEYS
from lblab.experiment.plan import plan
from lblab.experiment.runconfig import build, resolve
from lblab.simulator.config import SimConfig, config_from_mapping
from lblab.simulator.simulated_testbed import check, phase_config


def _file(kind: str = "simulated", **tables: Any) -> dict[str, Any]:
    return {
        "run": {"strategies": ["ring-hash"], "scenarios": ["sp+sr"], "duration": "2s"},
        "testbed": {"kind": kind, "balancers": 4},
        "servers": [{"id": "s", "count": 6}],
        **tables,
    }


KNOBS = {
    "client_delay": "3ms",
    "server_delay": "1ms",
    "report_delay": "100ms",
    "max_tries": 5,
    "routing_keys": 64,
    "picks_every": 10,
    "aperture": "random",
    "aperture_size": 3,
}


def _simulation(layer: dict[str, Any]) -> SimConfig:
    config = resolve(None, layer, {})
    return phase_config(config, plan(config)[0], "t")


def test_every_knob_reaches_the_simulation_as_the_simulators_own_dialect_reads_it() -> None:
    sim = _simulation(_file(simulator=KNOBS))
    # The same keys in the simulator's own settings: one parser for both dialects.
    own = config_from_mapping({**KNOBS, "servers": 6, "balancers": 4})
    for field in ("client_delay", "server_delay", "report_delay", "max_tries", "routing_keys",
                  "picks_every", "aperture"):  # fmt: skip
        assert getattr(sim, field) == getattr(own, field), field
    assert (sim.client_delay, sim.max_tries, sim.aperture.size) == (0.003, 5, 3)


def test_without_the_table_every_knob_is_the_simulators_default() -> None:
    sim, default = _simulation(_file()), config_from_mapping({"servers": 6})
    for key in SIMULATOR_KEYS:
        field = "aperture" if key.startswith("aperture") else key
        assert getattr(sim, field) == getattr(default, field), key


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        ({"max_tries": 0}, "simulator.max_tries: 0 must be 1 or more"),
        ({"client_delay": "soon"}, "simulator.client_delay"),
        (
            {"aperture_size": 3},
            "simulator.aperture_size, simulator.aperture_load_band: give simulator.aperture",
        ),
        ({"picks_every": -1}, "simulator.picks_every"),
    ],
)
def test_a_bad_knob_is_named_as_the_file_has_it_before_the_run(
    knob: dict[str, Any], message: str
) -> None:
    config = resolve(None, _file(simulator=knob), {})
    with pytest.raises(ConfigError, match=re.escape(message)):
        check(config)


def test_an_unknown_key_of_the_table_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown key simulator\.client_latency; keys of"):
        resolve(None, _file(simulator={"client_latency": "1ms"}), {})


def test_a_live_testbed_refuses_the_table_and_says_where_it_goes() -> None:
    with pytest.raises(ConfigError, match=r"\[simulated\.simulator\]"):
        resolve(None, _file("local", simulator={"client_delay": "1ms"}), {})


def test_under_simulated_it_applies_only_when_simulated() -> None:
    layer = _file("local", simulated={"simulator": {"client_delay": "2ms"}})
    live = resolve(None, layer, {})
    assert dict(live.simulator) == {}
    simulated = resolve(None, layer, {"testbed": {"kind": "simulated"}})
    assert dict(simulated.simulator) == {"client_delay": "2ms"}
    assert phase_config(simulated, plan(simulated)[0], "t").client_delay == 0.002


def test_the_printed_config_holds_the_table_and_builds_the_same() -> None:
    config = resolve(None, _file(simulator=KNOBS), {})
    assert "[simulator]" in config.to_toml()
    assert dict(build(config.raw).simulator) == KNOBS
