"""The scorecard's library of hard cases (``lblab/scorecard/``): every case is an
experiment file that resolves live and simulated, says what it is, and is judged on a
metric the analysis has; and the config layers it uses (``[simulated]``, ``[scorecard]``,
``run.metrics``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lblab.analysis.metrics import METRICS
from lblab.config import load_toml
from lblab.errors import ConfigError
from lblab.experiment import runconfig
from lblab.experiment.presets import load_preset
from lblab.scorecard.library import LIBRARY, ORDER, library, read_case, select
from lblab.simulator.simulated_testbed import check, unsimulated


def _resolve(case: Path, kind: str) -> runconfig.RunConfig:
    layer = load_toml(case)
    return runconfig.resolve(load_preset(layer["preset"]), layer, {"testbed": {"kind": kind}})


def test_the_order_names_every_file_of_the_library_once() -> None:
    assert sorted(ORDER) == sorted(p.stem for p in LIBRARY.glob("*.toml"))
    assert len(ORDER) >= 14


@pytest.mark.parametrize("name", ORDER)
def test_each_case_resolves_live_and_simulated_and_fits_this_machine(name: str) -> None:
    case = read_case(LIBRARY / f"{name}.toml")
    assert case.headline in METRICS and case.title and case.source and case.tests
    live = _resolve(case.path, "local")
    assert len(live.every_server()) <= 6  # scaled to a 2-core machine
    simulated = _resolve(case.path, "simulated")
    check(simulated)
    assert simulated.raw["scorecard"]["headline"] == case.headline  # recorded as given


def test_the_simulated_layer_applies_only_on_the_simulated_testbed() -> None:
    path = LIBRARY / "many-balancers.toml"
    live, simulated = _resolve(path, "local"), _resolve(path, "simulated")
    assert (live.testbed.balancers, len(live.servers)) == (3, 4)
    assert (simulated.testbed.balancers, len(simulated.servers)) == (16, 16)
    assert simulated.loads["sp+sr"].rate == 960
    # flags stay over a file's [simulated] layer
    layer = load_toml(path)
    flags = {"testbed": {"kind": "simulated", "balancers": 2}}
    assert runconfig.resolve(load_preset("scorecard"), layer, flags).testbed.balancers == 2


def test_a_simulated_layer_may_not_name_a_preset_or_nest(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[simulated\] must be a table"):
        runconfig.resolve(None, {"simulated": {"preset": "quick"}}, {})
    with pytest.raises(ConfigError, match=r"unknown key run\.speed"):
        runconfig.resolve(None, {"simulated": {"run": {"speed": 2}}}, {})


def test_run_metrics_name_what_the_answer_judges() -> None:
    config = runconfig.resolve(None, {"run": {"metrics": ["recovery_s"]}}, {})
    assert config.metrics == ("recovery_s",)
    assert runconfig.resolve(None, None, {}).metrics == ()
    with pytest.raises(ConfigError, match="'p99' is not a metric; metrics are"):
        runconfig.resolve(None, {"run": {"metrics": ["p99"]}}, {})


def test_a_case_file_needs_its_scorecard_table(tmp_path: Path) -> None:
    bare = tmp_path / "mine.toml"
    bare.write_text('preset = "scorecard"\n')
    with pytest.raises(ConfigError, match=r"needs a \[scorecard\] table"):
        read_case(bare)
    partial = tmp_path / "part.toml"
    partial.write_text('[scorecard]\ntitle = "x"\nheadline = "latency_p99_ms"\n')
    with pytest.raises(ConfigError, match="needs source, tests"):
        read_case(partial)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[scorecard]\ntitle = "x"\nsource = "y"\ntests = "z"\nheadline = "p99"\n')
    with pytest.raises(ConfigError, match="headline 'p99' is not a metric"):
        read_case(wrong)
    with pytest.raises(ConfigError, match=r"unknown key scorecard\.owner"):
        runconfig.resolve(None, {"scorecard": {"owner": "me"}}, {})


def test_select_takes_library_names_and_case_files(tmp_path: Path) -> None:
    assert [c.name for c in select(None)] == list(ORDER)
    mine = tmp_path / "mine.toml"
    mine.write_text(
        'preset = "scorecard"\n[scorecard]\ntitle = "t"\nsource = "s"\ntests = "x"\n'
        'headline = "success_rate"\n'
    )
    assert [c.name for c in select(["one-slow", str(mine)])] == ["one-slow", "mine"]
    with pytest.raises(ConfigError, match="'one-slo' is not a case of the library"):
        select(["one-slo"])
    with pytest.raises(ConfigError, match="names a case twice"):
        select(["one-slow", "one-slow"])
    assert len(library()) == len(ORDER)


def test_a_strategy_the_simulator_cannot_serve_is_refused_before_the_run() -> None:
    assert unsimulated("lease") is not None and unsimulated("rr") is None
    config = runconfig.resolve(
        load_preset("tiny"), {"run": {"strategies": ["lease"]}}, {"testbed": {"kind": "simulated"}}
    )
    with pytest.raises(ConfigError, match=r"run\.strategies: lease sends only within"):
        check(config)
