"""``lblab strategy check``: every built-in keeps the contract; strategies that pick a
down backend, read the wall clock, draw from the module-level random or sleep are
refused, each with one line naming what it did."""

from __future__ import annotations

from pathlib import Path

import pytest

from lblab.balancer.strategies.registry import STRATEGIES
from lblab.strategy.conformance import check

SMALL_TABLES = {"maglev": {"table_size": "1009"}}

BAD = """
import random
import time

from lblab.strategy import Strategy, eligible


def _eligible(backends, request):
    return [b for b in backends if eligible(b, request)]


class PicksDown(Strategy):
    name = "picks-down"

    def pick(self, backends, request, now):
        return backends[0] if backends else None


class WallClock(Strategy):
    name = "wall-clock"

    def pick(self, backends, request, now):
        c = _eligible(backends, request)
        return c[int(time.time() * 1e6) % len(c)] if c else None


class GlobalRandom(Strategy):
    name = "global-random"

    def pick(self, backends, request, now):
        c = _eligible(backends, request)
        return random.choice(c) if c else None


class Sleeps(Strategy):
    name = "sleeps"

    def pick(self, backends, request, now):
        time.sleep(0)
        c = _eligible(backends, request)
        return self.rng.choice(c) if c else None


class Herds(Strategy):
    name = "herds"

    def pick(self, backends, request, now):
        c = _eligible(backends, request)
        return min(c, key=lambda b: b.inflight) if c else None
"""


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_built_in_passes(name: str) -> None:
    failed = [f"{f.check}: {f.line}" for f in check(name, SMALL_TABLES.get(name), 20) if not f.ok]
    assert not failed, failed


@pytest.mark.parametrize(
    ("cls", "fails"),
    [
        ("PicksDown", {"eligible": "picked an ineligible backend"}),
        ("WallClock", {"no clock": "time.time()", "deterministic": "not deterministic"}),
        ("GlobalRandom", {"no global random": "random.choice()", "deterministic": "differ"}),
        ("Sleeps", {"no sleep": "time.sleep()"}),
        ("Herds", {"ties": "of 4 equal idle backends"}),
    ],
)
def test_a_broken_contract_is_named(tmp_path: Path, cls: str, fails: dict[str, str]) -> None:
    path = tmp_path / "bad.py"
    path.write_text(BAD)
    findings = {f.check: f for f in check(f"{path}:{cls}", examples=20)}
    failed = {name for name, f in findings.items() if not f.ok}
    assert set(fails) <= failed, findings
    for name, words in fails.items():
        assert words in findings[name].line, findings[name]
    assert failed - set(fails) <= {"ties"}, findings  # a bad pick also herds
