"""`lblab validate --quick`: the simulator agrees with closed-form queueing results."""

from __future__ import annotations

import json
import subprocess

import pytest

from lblab.procs import lblab_command
from lblab.simulator import theory
from lblab.simulator.validate import LOADS, POLICIES, TAILS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # two minutes on a busy machine


@pytest.fixture(scope="module")
def report() -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        lblab_command("validate", "--quick", "--format", "json"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode in (0, 1), out.stderr
    data = json.loads(out.stdout)
    data["returncode"] = out.returncode
    data["stderr"] = out.stderr
    return data


def test_progress_reaches_a_pipe(report: dict) -> None:  # type: ignore[type-arg]
    """Its stderr is a pipe here, not a terminal: a line at every tenth of the runs."""
    lines = [line for line in report["stderr"].splitlines() if "simulations done" in line]
    assert 5 <= len(lines) <= 11, report["stderr"]
    done, runs = lines[-1].split()[0].split("/")
    assert done == runs


def test_every_case_passes_and_the_exit_code_says_so(report: dict) -> None:  # type: ignore[type-arg]
    failed = [
        (c["case"], c["rho"], c["simulated"], c["theory"], c["low"], c["high"])
        for c in report["cases"]
        if not c["passed"]
    ]
    assert not failed
    assert report["passed"] is True
    assert report["returncode"] == 0


def test_every_policy_load_and_tail_fraction_is_a_case(report: dict) -> None:  # type: ignore[type-arg]
    cases = report["cases"]
    assert len(cases) == len(POLICIES) * len(LOADS) + TAILS
    seen = {(c["policy"], c["rho"], c["metric"]) for c in cases}
    assert {(p.key, rho, "T") for p in POLICIES for rho in LOADS} <= seen
    assert {("p2c", 0.9, f"s_{i}") for i in range(1, TAILS + 1)} <= seen
    keys = {
        "case", "policy", "rho", "metric", "theory", "low", "high", "simulated", "ci_low",
        "ci_high", "seeds", "error", "tolerance", "half_width", "verdict", "passed",
    }  # fmt: skip
    for c in cases:
        assert set(c) == keys
        assert c["seeds"] >= 3
        assert c["ci_low"] <= c["simulated"] <= c["ci_high"]
        assert c["verdict"] in ("pass", "within CI", "FAIL")
    assert report["size"] == "quick"
    assert report["requests"] > 0


def test_theory_in_the_report_is_computed_not_copied(report: dict) -> None:  # type: ignore[type-arg]
    by_key = {(c["policy"], c["rho"], c["metric"]): c for c in report["cases"]}
    assert by_key[("rr", 0.9, "T")]["theory"] == pytest.approx(theory.erlang_m1_sojourn(10, 0.9))
    assert by_key[("lc", 0.5, "T")]["low"] == pytest.approx(theory.mmc_sojourn(10, 0.5))
    assert by_key[("lc", 0.5, "T")]["high"] == pytest.approx(theory.supermarket_sojourn(2, 0.5))
    assert by_key[("p2c", 0.9, "s_3")]["theory"] == pytest.approx(0.9**7)


def test_no_policy_beats_one_shared_queue(report: dict) -> None:  # type: ignore[type-arg]
    """M/M/10 is a lower bound for every policy over 10 single-worker servers."""
    for c in report["cases"]:
        if c["metric"] == "T" and c["policy"] in ("r", "rr", "jsq", "lc"):
            bound = theory.mmc_sojourn(10, c["rho"])
            assert c["ci_high"] >= bound, c


def test_a_bad_format_is_refused_before_any_simulation() -> None:
    out = subprocess.run(
        lblab_command("validate", "--format", "xml"), capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "--format 'xml': give table, json or markdown" in out.stderr
    assert "Traceback" not in out.stderr
