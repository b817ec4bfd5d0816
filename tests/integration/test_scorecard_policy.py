"""``lblab scorecard --health NAME=VALUE``: the card of a pool policy. Every case's
balancers run with the ``[health]`` layer given, the card records it and says it, and
a card continued in its ``--out`` keeps the policy its done cases ran with.

The policy here is Envoy's statistical success-rate ejection tuned to act on the
library's four servers (at Envoy's 1.9 standard deviations it never can: one backend
of four is at most sqrt(3) = 1.73 deviations off the mean) over windows the 9 s phases
hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

EJECTION = (
    "success_rate_stdev_factor=1.0,success_rate_minimum_hosts=4,success_rate_window=2s,"
    "success_rate_min_requests=20"
)
CASE = ["--scenarios", "slow-failures", "-s", "rr"]


def _card(out: Path) -> dict[str, Any]:
    return json.loads((out / "scorecard.json").read_text())


def _success(card: dict[str, Any]) -> float:
    (cell,) = card["cells"]
    return cell["success_rate"]["mean"]


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("policy")
    outs = {"default": folder / "default", "ejection": folder / "ejection"}
    for name, extra in (("default", []), ("ejection", ["--health", EJECTION])):
        done = run_lblab(["scorecard", *CASE, *extra, "--out", str(outs[name]),
                          "--format", "markdown"], timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        (outs[name] / "page.md").write_text(done.stdout)
    return outs


def test_every_case_runs_with_the_policy_and_the_card_says_it(cards: dict[str, Path]) -> None:
    out = cards["ejection"]
    given = {"success_rate_stdev_factor": 1.0, "success_rate_minimum_hosts": 4,
             "success_rate_window": "2s", "success_rate_min_requests": 20}  # fmt: skip
    assert _card(out)["health"] == given and _card(cards["default"])["health"] == {}
    health = json.loads((out / "simulated" / "slow-failures" / "manifest.json").read_text())[
        "config"
    ]["health"]
    assert {k: health[k] for k in given} == given
    page = (out / "page.md").read_text()
    assert "ran with [health] success_rate_stdev_factor = 1.0" in page
    assert "ran with [health]" not in (cards["default"] / "page.md").read_text()
    assert "success_rate_stdev_factor = 1.0" in (out / "scorecard.html").read_text()


def test_the_ejection_takes_the_slowly_failing_server_out_sooner(cards: dict[str, Path]) -> None:
    # rr keeps dealing the failing server its quarter until five failures in a row eject
    # it, then again after each backoff; the statistical ejection also ejects it at the
    # end of each 2 s window (2026-12-03: 98.49 % against 96.49 % succeeded, seed 1).
    assert _success(_card(cards["ejection"])) > _success(_card(cards["default"])) + 0.01


def test_a_card_continued_with_another_policy_is_refused(cards: dict[str, Path]) -> None:
    done = run_lblab(["scorecard", *CASE, "--out", str(cards["ejection"])], timeout=60)
    assert done.returncode == 2, done.stderr
    assert "ran with [health] success_rate_stdev_factor=1.0" in done.stderr
    assert "give the same --health to continue it, or another --out" in done.stderr


@pytest.mark.parametrize(
    ("health", "said"),
    [
        ("ejct_after=3", "'ejct_after' is not a health option; they are eject_after"),
        ("success_rate_stdev_factor=-1", "--health success_rate_stdev_factor: -1.0 must be 0"),
        ("eject_after", "'eject_after' is not NAME=VALUE"),
    ],
)
def test_a_bad_policy_is_one_clear_line(tmp_path: Path, health: str, said: str) -> None:
    done = run_lblab(["scorecard", *CASE, "--health", health, "--out", str(tmp_path / "x")], 60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_strategy_given_with_options_is_a_row_that_says_them(tmp_path: Path) -> None:
    # Linkerd's failure-aware load: the penalty its proxy adds to Peak-EWMA (5 s).
    penalised = "peak-ewma[failure_penalty_ms=5000]"
    done = run_lblab(["scorecard", "--scenarios", "fast-failures", "-s", f"{penalised},rr",
                      "--out", str(tmp_path / "card"), "--format", "markdown"], 180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    card = _card(tmp_path / "card")
    assert card["options"] == {"peak-ewma": {"failure_penalty_ms": "5000"}}
    assert card["strategies"] == ["peak-ewma", "rr"]  # the runs' tables name the strategy
    rows = [line.split(" | ")[0] for line in done.stdout.splitlines() if line.startswith("| ")]
    assert f"| {penalised}" in rows and "| rr" in rows and "| peak-ewma" not in rows
    assert penalised in (tmp_path / "card" / "scorecard.html").read_text()
