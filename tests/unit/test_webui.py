"""``lblab ui``'s form checks, its refusals before anything starts, and what its banner says."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from lblab.errors import ConfigError
from lblab.loadtests.webui.banner import (
    SCRIPT_URL,
    Refusal,
    describe_load,
    page_lines,
    report_path,
    strategy_label,
    with_script,
)
from lblab.loadtests.webui.choices import FIELDS, UI_SCENARIOS, Swarm, parse_swarm
from lblab.manifest import PhaseEntry
from tests.run_fixture import run_lblab

DEFAULTS = {f.dest: f.default for f in FIELDS}
FORM = {"user_count": "4", "spawn_rate": "2", "scenario": "mp+lr", "strategy": "lc"}


def test_a_form_gives_the_swarm_and_its_load() -> None:
    swarm = parse_swarm({**FORM, "strategy_options": "tie=random"}, DEFAULTS)
    assert swarm == Swarm("mp+lr", "lc", {"tie": "random"}, "closed", 0.0, "constant", 4, 2.0)
    load = swarm.load((0.0, 0.0))
    assert (load.model, load.users, load.spawn_rate, load.rate) == ("closed", 4, 2.0, 0.0)


def test_the_open_model_is_one_generator_at_the_rate() -> None:
    form = {**FORM, "load_model": "open", "open_rate": "250", "arrival": "poisson"}
    load = parse_swarm(form, DEFAULTS).load((0.0, 0.0))
    assert (load.model, load.users, load.rate, load.arrival) == ("open", 1, 250.0, "poisson")


def test_every_builtin_scenario_is_offered() -> None:
    assert len(UI_SCENARIOS) == 10 and "variation" in UI_SCENARIOS


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("strategy", "nope", "strategy: 'nope' is not one of r, rr"),
        ("scenario", "xp+sr", "scenario: 'xp+sr' is not one of sp+sr"),
        ("load_model", "half-open", "load model: 'half-open' is not one of closed, open"),
        ("strategy_options", "tie", "strategy options: 'tie' is not NAME=VALUE"),
        ("user_count", "ten", "number of users: 'ten' is not a whole number"),
        ("user_count", "0", "number of users: 0 must be 1 or more"),
        ("spawn_rate", "nan", "ramp up: nan is not a finite number"),
    ],
)
def test_bad_fields_are_named(field: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("+", r"\+")):
        parse_swarm({**FORM, field: value}, DEFAULTS)


def test_an_open_rate_must_be_a_positive_number() -> None:
    for rate, message in (("abc", "is not a number"), ("0", "must be above 0")):
        with pytest.raises(ConfigError, match=f"open rate: .*{message}"):
            parse_swarm({**FORM, "load_model": "open", "open_rate": rate}, DEFAULTS)


def test_an_edit_keeps_what_it_does_not_send() -> None:
    running = parse_swarm(FORM, DEFAULTS)
    current = {**DEFAULTS, "scenario": "mp+lr", "strategy": "lc"}
    edit = parse_swarm({"user_count": "8", "spawn_rate": "2", "strategy": "rr"}, current)
    assert edit.same_load(running) and edit.strategy == "rr" and edit.users == 8


def test_a_busy_web_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_lblab(["ui", "--web-port", str(port), "--out", str(tmp_path / "r")], 60)
    assert result.returncode == 2, result.stderr
    assert f"--web-port {port}: 127.0.0.1:{port} is not free" in result.stderr
    assert not (tmp_path / "r").exists()


def test_an_external_testbed_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "ext.toml"
    config.write_text(
        '[testbed]\nkind = "external"\nbalancer = "127.0.0.1:7878"\nadmin = "127.0.0.1:7879"\n'
    )
    result = run_lblab(["ui", "--config", str(config), "--out", str(tmp_path / "r")], 60)
    assert result.returncode == 2, result.stderr
    assert "lblab ui starts its own local testbed" in result.stderr


def test_a_ui_run_is_not_resumed_as_a_plan(tmp_path: Path) -> None:
    run = tmp_path / "ui-run"
    run.mkdir()
    manifest = {"config_given": {"command": "ui"}, "config": {}, "phases": []}
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = run_lblab(["run", "--resume", "--out", str(run)], 60)
    assert result.returncode == 2, result.stderr
    assert "was recorded by `lblab ui`" in result.stderr and "lblab report" in result.stderr


RUN = "/runs/ui-1"
LOAD = {"model": "closed", "users": 4, "rate": 0.0, "arrival": "constant"}


def note(index: int, strategy: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "key": f"r1-{index:03d}-sp+sr-{strategy}",
        "scenario": "sp+sr",
        "strategy": strategy,
        "strategy_options": options or {},
        "load": LOAD,
        "start": 0.0,
        "end": None,
    }


def lines(**given: Any) -> list[tuple[str, str, str]]:
    args: dict[str, Any] = {
        "running": None,
        "stopping": False,
        "refusal": None,
        "run_dir": RUN,
        "notes": [],
        "manifest_phases": [],
    }
    return [(x["kind"], x["head"], x["text"]) for x in page_lines(**{**args, **given})]


def test_the_banner_names_the_running_strategy_its_options_and_load() -> None:
    running = note(1, "lc", {"tie": "random"})
    (kind, head, text), *rest = lines(running=running, notes=[note(0, "rr"), running])
    assert (kind, head) == ("running", "Strategy lc tie=random") and not rest
    assert "scenario sp+sr · closed, 4 users · phase r1-001-sp+sr-lc" in text
    assert f"run folder {RUN}" in text and "Type = strategy" in text
    open_load = {"model": "open", "users": 1, "rate": 250.0, "arrival": "poisson"}
    assert describe_load(open_load) == "open, 250 req/s poisson"
    assert "stopping since" in lines(running=running, stopping=True)[0][2]


def test_a_refusal_shows_until_dismissed_by_its_own_key() -> None:
    refusal = Refusal(2, "the balancer refused strategy wrr tie=random: ...", 0.0)
    shown = page_lines(
        running=note(1, "lc"),
        stopping=False,
        refusal=refusal,
        run_dir=RUN,
        notes=[],
        manifest_phases=[],
    )
    assert [(x["kind"], x["key"]) for x in shown] == [("running", ""), ("refused", "refused-2")]
    assert shown[1]["text"].startswith("the balancer refused strategy wrr tie=random")


def test_between_swarms_the_banner_says_where_each_phase_went_and_the_report() -> None:
    notes = [note(0, "rr"), note(1, "lc"), note(2, "p2c")]
    cell = {"scenario": "sp+sr", "replication": 1}
    manifest = [
        PhaseEntry(
            key="r1-000-sp+sr-rr", strategy="rr", **cell, status="done", requests=812, failures=3
        ),
        PhaseEntry(
            key="r1-001-sp+sr-lc", strategy="lc", **cell, status="failed",
            error="no requests were recorded",
        ),
    ]  # fmt: skip
    shown = lines(notes=notes, manifest_phases=manifest)
    assert shown[0][:2] == ("idle", "No test running")
    assert shown[1:] == [
        ("results", "Results", f"run folder {RUN}"),
        ("results", "phase r1-000-sp+sr-rr", "rr: 812 requests (3 failed) recorded"),
        ("results", "phase r1-001-sp+sr-lc", "lc: failed: no requests were recorded"),
        ("results", "phase r1-002-sp+sr-p2c", "p2c: its rows are being written"),
        (
            "results",
            "Report",
            f"{report_path(RUN)}, written with the run's tables (requests, cpu, picks .parquet)"
            " when lblab ui ends: Ctrl-C (or SIGTERM) in its terminal",
        ),
    ]
    assert report_path(RUN) == "/runs/ui-1/report/index.html"
    assert lines() == [shown[0]]  # no phase yet: nothing to say about results


def test_the_script_goes_before_the_end_of_locusts_page() -> None:
    page = "<html><body><div id=root></div><script>x</script></body></html>"
    assert with_script(page) == page.replace(
        "</body>", f'<script src="{SCRIPT_URL}" defer></script>\n</body>'
    )
    assert with_script("<html>no body end</html>") is None
    assert strategy_label("rr", {}) == "rr"
