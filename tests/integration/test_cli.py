"""The `lblab` command line as a user meets it: help, listing, and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lblab.balancer.strategies.registry import strategy_names
from lblab.procs import lblab_command


def lblab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lblab_command(*args), capture_output=True, text=True, timeout=60)


def test_help_names_every_command() -> None:
    out = lblab("--help")
    assert out.returncode == 0
    for command in ("server", "agent", "balancer", "strategies", "run", "simulate", "reproduce",
                    "report", "notebooks", "testbed"):  # fmt: skip
        assert command in out.stdout, command


def test_strategies_lists_every_registered_strategy_with_a_definition() -> None:
    out = lblab("strategies", "--json")
    assert out.returncode == 0
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == list(strategy_names())
    assert len(rows) == 26
    assert all(r["summary"] for r in rows)


@pytest.mark.parametrize(
    "args",
    [
        ("balancer", "--strategy", "nope", "--backend", "s1=127.0.0.1:7001", "--port", "0"),
        ("simulate", "--strategy", "nope", "--requests", "10"),
        ("run", "--strategies", "rr,nope", "--print-config"),
    ],
    ids=["balancer", "simulate", "run"],
)
def test_unknown_strategy_is_a_clear_error_listing_the_valid_ones(args: tuple[str, ...]) -> None:
    out = lblab(*args)
    assert out.returncode == 2, out.stderr
    assert "nope" in out.stderr
    assert "p2c" in out.stderr and "dwrr" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("run", "--duration", "soon", "--print-config"), "duration"),
        (("balancer", "--backend", "s1=nowhere", "--port", "0"), "HOST:PORT"),
        (("server", "--id", "s1", "--port", "0", "--cpu-quota", "-1"), "cpu"),
    ],
    ids=["duration", "backend-address", "cpu-quota"],
)
def test_bad_values_name_what_was_wrong(args: tuple[str, ...], words: str) -> None:
    out = lblab(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert words.lower() in out.stderr.lower()
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "spelling",
    [
        ("-s", "rr", "-s", "lc,wrr"),
        ("--strategy", "rr,lc", "--strategy", "wrr"),
        ("--strategies", "rr,lc,wrr"),
    ],
    ids=["short-repeated", "long-mixed", "old-comma-list"],
)
def test_run_takes_strategies_in_every_spelling(spelling: tuple[str, ...]) -> None:
    out = lblab("run", *spelling, "--preset", "tiny", "--print-config")
    assert out.returncode == 0, out.stderr
    assert 'strategies = ["rr", "lc", "wrr"]' in out.stdout


def test_run_help_names_every_preset() -> None:
    from lblab.experiment.presets import preset_names

    out = lblab("run", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for name in preset_names():
        assert name in text, name


@pytest.mark.slow
def test_simulate_and_balancer_take_the_same_strategy_spelling(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    sim = lblab("simulate", "-s", "rr,lc", "--servers", "2", "--requests", "200", "--seed", "1",
                "--out", str(out), "--no-report")  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    table = (out / "summary.csv").read_text()
    assert "sp+sr,rr,1," in table and "sp+sr,lc,1," in table, table
    refused = lblab("balancer", "-s", "nope", "--backend", "s1=127.0.0.1:7001", "--port", "0")
    assert refused.returncode == 2 and "unknown strategy 'nope'" in refused.stderr
