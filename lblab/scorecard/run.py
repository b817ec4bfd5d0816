"""``lblab scorecard``: cases x strategies on each testbed, one run folder a case.

Each case runs as ``lblab run --config CASE`` does (``app/service.py``: blocks,
adaptive replications, paired intervals, validity checks, resume), with the strategies,
seed, testbed and out folder given here and ``run.metrics`` its headline metric, so its
adaptive blocks settle what it is judged on. The folders are ``OUT/<testbed>/<case>/``;
after every case ``scorecard.json`` and ``scorecard.html`` are written again, so a killed
scorecard keeps what it finished, and the same command with the same ``--out`` runs only
what is not done (a case's unfinished run is resumed, a finished one read).

``budget`` is the whole scorecard's seconds of phases, shared evenly by its runs (each
case's ``run.budget``): past it no run adds a block, so every case still gets the
frame's three.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from lblab.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PHASE_FAILED, ConfigError
from lblab.scorecard.library import LibraryCase

TESTBED_KINDS = ("simulated", "local")


@dataclass(frozen=True, slots=True)
class Plan:
    cases: Sequence[LibraryCase]
    strategies: Sequence[str]
    """As given: names, specs (``file.py:Class``), options in brackets."""
    names: Sequence[str]
    """The strategies' names, in the same order: the scorecard's rows."""
    testbeds: Sequence[str]
    out: Path
    seed: int = 1
    budget_s: float = 0.0
    reports: bool = False
    health: Mapping[str, Any] = field(default_factory=dict)
    """A ``[health]`` layer over every case's own (``lblab scorecard --health``): the
    card of that pool policy."""

    def options(self) -> dict[str, dict[str, str]]:
        """The strategies given with options of their own in brackets: name -> those
        options (the card's rows say them; the runs' tables name the strategy only)."""
        from lblab.balancer.strategies.options import split_options

        given = {
            name: split_options(s, "--strategies")[1]
            for name, s in zip(self.names, self.strategies, strict=True)
        }
        return {name: dict(own) for name, own in given.items() if own}

    def run_dir(self, case: LibraryCase, testbed: str) -> Path:
        return self.out / testbed / case.name

    def flags(self, case: LibraryCase, testbed: str) -> dict[str, Any]:
        """The ``lblab run`` layer over the case's file."""
        runs = len(self.cases) * len(self.testbeds)
        run: dict[str, Any] = {
            "name": case.name,
            "strategies": list(self.strategies),
            "seed": self.seed,
            "metrics": [case.headline],
            "out": str(self.run_dir(case, testbed)),
        }
        if self.budget_s:
            run["budget"] = f"{self.budget_s / runs:.3f}s"
        layer: dict[str, Any] = {"run": run, "testbed": {"kind": testbed}}
        if self.health:
            layer["health"] = dict(self.health)
        return layer


def run_scorecard(plan: Plan, console: Console) -> int:
    """Every case on every testbed of ``plan``; the scorecard written after each. The
    exit code: 0, 1 when a phase failed (its case still counts what passed), 130
    interrupted."""
    from lblab.analysis.scorecard import Case, build_scorecard, write_page, write_scorecard

    _check_same_policy(plan)
    plan.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    done: list[Case] = []
    code = EXIT_OK
    total = len(plan.cases) * len(plan.testbeds)
    for testbed in plan.testbeds:
        for case in plan.cases:
            console.rule(f"case {len(done) + 1}/{total}: {case.name} ({testbed}): {case.title}")
            result = _run_case(plan, case, testbed, console)
            if result == EXIT_INTERRUPTED:
                console.print(f"interrupted; continue with the same command (--out {plan.out})")
                return EXIT_INTERRUPTED
            if result != EXIT_OK:
                code = EXIT_PHASE_FAILED
            done.append(
                Case(
                    case.name, case.title, case.source, case.tests, case.headline, testbed,
                    plan.run_dir(case, testbed),
                )
            )  # fmt: skip
            card = build_scorecard(
                done,
                {
                    "strategies": list(plan.names),
                    "testbeds": list(plan.testbeds),
                    "seed": plan.seed,
                    "health": dict(plan.health),
                    "options": plan.options(),
                    "started": started,
                    "seconds": round(time.time() - started, 1),
                    "complete": len(done) == total,
                },
            )
            write_scorecard(plan.out, card)
            write_page(plan.out, card)
    console.print(f"scorecard: {plan.out / 'scorecard.json'} and {plan.out / 'scorecard.html'}")
    return code


def _check_same_policy(plan: Plan) -> None:
    """A scorecard continued in its --out keeps its pool policy: its done cases ran with it."""
    from lblab.analysis.scorecard import SCORECARD_FILE, read_scorecard

    if not (plan.out / SCORECARD_FILE).is_file():
        return
    before = dict(read_scorecard(plan.out).get("health") or {})
    if before != dict(plan.health):
        said = ", ".join(f"{k}={v}" for k, v in before.items()) or "the defaults"
        raise ConfigError(
            f"--out {plan.out} holds a scorecard whose balancers ran with [health] {said}; "
            "give the same --health to continue it, or another --out"
        )


def _run_case(plan: Plan, case: LibraryCase, testbed: str, console: Console) -> int:
    """One case's run: new, resumed, or read when it is done."""
    from lblab.app.service import Experiment
    from lblab.manifest import load as load_manifest

    run_dir = plan.run_dir(case, testbed)
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        status = load_manifest(manifest).status
        if status == "done":
            console.print(f"{run_dir}: done already; read as it is")
            return EXIT_OK
        experiment = Experiment.reopen(str(run_dir), "resume", console)
    else:
        config = Experiment.resolve(None, str(case.path), plan.flags(case, testbed))
        given = {"command": "scorecard", "config_file": str(case.path),
                 "flags": plan.flags(case, testbed)}  # fmt: skip
        experiment = Experiment.new(config, given, console)
    code = experiment.run()
    if plan.reports and code != EXIT_INTERRUPTED:
        experiment.finish(code, report=True)
    return code
