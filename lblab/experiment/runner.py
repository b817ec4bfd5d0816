"""The experiment runner behind ``lblab run``: every scenario x strategy x replication.

Theory of operation. The plan is a list of phases in blocks (replications): a block runs
every scenario, and within it every strategy once, back to back (so the strategies
compared on one cell run seconds apart, not an hour), in an order drawn from the run's
seed (``plan_block``: no strategy always goes first, right after a warm cache or a heavy
cell, and a drift of the machine cannot line up with one strategy). The answer pairs the
strategies within blocks (``analysis/run/decide.py``); an adaptive run
(``run.max_replications``) adds blocks until it is in (``Runner.next_block``), within
its ``budget``, and lengthens a scenario whose phases held too few successes.

The phases run on a testbed (``experiment/testbed.py``), whatever it is: live processes
driven by a headless Locust per phase (``locust_testbed.LocustTestbed``: the testbed
starts once, the strategy is switched between phases, a timeline that altered the pool
is undone first) or the simulator (``simulator/simulated_testbed.SimulatedTestbed``).
The runner keeps what is the same for both: a phase's request records become
``parts/requests/<phase>.parquet`` as it ends (its picks and CPU samples, from a live
testbed, a little later, once flushed, or at the end of the run); ``manifest.json`` is
rewritten atomically at every step, with each phase's status (pending, running, done,
failed, interrupted). Ctrl-C stops the testbed by process group, keeps what was
measured, marks the running phase interrupted, and exits 130; ``--resume`` reruns from
the first phase that is not done, in a folder of its own (``run_folders.new_attempt``).

Measured window (``lblab/windows.py``): each phase's window, from its first request plus
``warmup`` to the end of its load, is in the manifest (``window``), and every row of the
three tables says where it falls (``window``: before, inside, after; ``warmup`` is kept
as ``window == "before"``). Analyses, the summary and the progress line count only
``inside`` rows and divide by the window's length.

Workers on other hosts (``expect_workers``, with ``locust_master_bind``): the master here
waits for them each phase, and they write their records on their own hosts. A phase
then ends with the records this host has; ``lblab run --collect`` (``collect``) rebuilds
every phase's tables once the other hosts' record folders are fetched into
``raw/phases/`` (as ``infra/experiment.yml`` does), and checks that each writer's rows
are all there (``unaccounted`` in the manifest: requests a writer counted but no row).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lblab.analysis.run import (
    Cell,
    build_answer,
    run_answer,
    scenarios_to_settle,
    settled,
    untrusted,
)
from lblab.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PHASE_FAILED, WriteFailed
from lblab.experiment.plan import (
    Phase,
    phase_config,
    phase_entry,
    phase_seconds,
    plan,
    plan_block,
    planned,
)
from lblab.experiment.progress import RunProgress
from lblab.experiment.run_folders import new_attempt, phase_folder
from lblab.experiment.runconfig import RunConfig, TestbedKind
from lblab.experiment.testbed import Testbed
from lblab.files import Reserve, folder_bytes, free_bytes, human_bytes
from lblab.interrupts import ignoring_interrupts, raise_interrupt
from lblab.manifest import Manifest, ManifestFile, PhaseEntry, ScenarioEntry
from lblab.results import MANIFEST, consolidate, drop_consolidated
from lblab.strategy.sources import RECORD_KEY, sources_of, write_copies

MIN_PHASE_BYTES = 1 << 20  # room asked for a phase before any phase has shown its size
CHECKABLE_OK = 400
LONGEST_GROWTH = 4.0  # an adaptive run lengthens a scenario's phases at most this much
SOFTWARE = (
    "lblab", "rsocket", "locust", "gevent", "pyarrow", "pandas", "psutil", "uvloop", "simpy",
)  # fmt: skip


def lengthened(duration: float, ok_in_window: Sequence[int], most: float) -> float:
    """The phase length at which the fewest successes of a scenario's last block reach
    ``CHECKABLE_OK`` (its steady-state check can then see a change of 30 %: 3 sigma of
    the halves' counting noise is 6 / sqrt(n)); never shorter, at most ``most``."""
    fewest = min(ok_in_window, default=0)
    if fewest >= CHECKABLE_OK:
        return duration
    wanted = duration * CHECKABLE_OK / max(fewest, 1)
    return round(min(max(wanted, duration), most), 1)


def new_manifest(run_dir: Path, config: RunConfig, given: dict[str, Any]) -> ManifestFile:
    manifest = Manifest(
        run_id=run_dir.name,
        simulated=config.testbed.kind == TestbedKind.SIMULATED,
        status="running",
        config_given=given,
        config=config.raw,
        scenarios=tuple(
            ScenarioEntry(name=s.name, cells=s.cells, load=_load_dict(config, s.name))
            for s in config.scenarios
        ),
        adaptive=_adaptive_facts(config),
        warmup_s=config.warmup,
        software=software_versions(),
        host=host_facts(),
        started=time.time(),
        phases=tuple(phase_entry(config, p) for p in plan(config)),
        extra={
            "order": (
                "blocks (replications) of every scenario x strategy; within a block, each "
                "scenario's strategies in a seeded random order "
                "(random.Random('<seed>-block-<n>'))"
            ),
            "strategy_switch": "PUT /strategy on a running balancer (fresh strategy state)",
            "window": {
                "definition": "first request + warmup to the end of the load (lblab/windows.py)",
                "rows": "every table has window = before | inside | after",
                "cpu_sample_interval_s": config.testbed.agent_interval,
            },
            "seeds": {"run": config.seed, "phase": "seed + phase index"},
            RECORD_KEY: write_copies(run_dir, sources_of(config.strategies)),
        },
    )
    return ManifestFile(run_dir / MANIFEST, manifest)


def _adaptive_facts(config: RunConfig) -> dict[str, Any] | None:
    if config.max_replications <= config.replications:
        return None
    return {
        "min_blocks": config.replications,
        "max_blocks": config.max_replications,
        "budget_s": config.budget or None,
        "equivalence": config.equivalence,
        "rule": "add a block until every pair of strategies is resolved or equivalent on "
        "every headline metric (analysis/run/decide.py), the budget or max_blocks is reached; "
        "a block runs the scenarios with a cell undecided, or when all are decided those "
        "with a pair open; "
        f"a scenario whose phases held fewer than {CHECKABLE_OK} successes gets longer "
        f"phases in the next block (at most {LONGEST_GROWTH:g}x run.duration)",
        "decisions": [],
    }


def _load_dict(config: RunConfig, scenario: str) -> dict[str, Any]:
    load = config.loads[scenario]
    return {
        **load.facts(),
        "count": load.count,
        "duration_s": config.duration,
        "warmup_s": config.warmup,
    }


def software_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    try:
        out["git_commit"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=Path(__file__).parent,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.TimeoutExpired):
        out["git_commit"] = None
    return out


def host_facts() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }


class Runner:
    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        manifest: ManifestFile,
        testbed: Testbed,
    ) -> None:
        """``testbed``: what runs the phases (``app/testbeds.make_testbed``)."""
        self.config, self.run_dir, self.manifest = config, run_dir, manifest
        # The manifest is the plan: an adaptive run appends blocks to it as it goes.
        self.phases = planned(manifest.manifest.phases)
        self.testbed = testbed

    # ------------------------------------------------------------ the run

    def execute(self) -> int:
        """Run every phase not yet done. Returns the exit code; raises ``WriteFailed``
        (after stopping everything and saving the manifest) when results could not be
        written, with what the run needs to continue."""
        m = self.manifest
        reserve = Reserve(self.run_dir)
        reserve.hold()  # room for the last manifest, should the disk fill up
        failure: WriteFailed | None = None
        todo = [p for p in self.phases if m.phase(p.index).status != "done"]
        if todo:
            drop_consolidated(self.run_dir)
        m.add_attempt(started=time.time(), phases_to_run=len(todo))
        m.set(status="running")
        m.save()
        code = EXIT_OK
        current: Phase | None = None
        previous_sigterm = signal.signal(signal.SIGTERM, raise_interrupt)
        progress = RunProgress(len(self.phases))
        try:
            with progress:
                progress.skip(len(self.phases) - len(todo))
                if todo:
                    self.testbed.start(todo[0].strategy)
                    facts = self.testbed.facts()
                    m.set(testbed=facts, cpu_limit_method=facts["cpu_limit_method"])
                    m.save()
                while todo:
                    for phase in todo:
                        current = phase
                        self.check_room()
                        ok = self.run_phase(phase, progress)
                        current = None
                        if not ok:
                            code = EXIT_PHASE_FAILED
                            self.testbed.recover()
                        self.collect_due()
                    todo = self.next_block(progress)
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
            if current is not None:
                m.set_phase(current.index, status="interrupted", end=time.time())
        except WriteFailed as exc:
            failure = exc
            if current is not None:
                m.set_phase(current.index, status="failed", error=str(exc), end=time.time())
        except BaseException:
            code = EXIT_PHASE_FAILED  # e.g. the testbed did not start; the caller reports it
            raise
        finally:
            with ignoring_interrupts():
                self.testbed.stop()
                try:
                    self.collect_all()
                    consolidate(self.run_dir)
                    if code != EXIT_INTERRUPTED and failure is None:
                        build_answer(self.run_dir)  # winners.json
                except WriteFailed as exc:
                    failure = failure or exc
                reserve.release()  # the last manifest has its room
                ended = time.time()
                m.end_attempt(ended=ended)
                if failure is not None:
                    code = WriteFailed.exit_code
                    m.end_attempt(error=str(failure))
                status = {
                    EXIT_OK: "done",
                    EXIT_PHASE_FAILED: "failed",
                    WriteFailed.exit_code: "failed",
                    EXIT_INTERRUPTED: "interrupted",
                }[code]
                m.set(ended=ended, status=status)
                m.save()
            signal.signal(signal.SIGTERM, previous_sigterm)
        if failure is not None:
            raise self._stopped_by(failure)
        return code

    def next_block(self, progress: RunProgress) -> list[Phase]:
        """Adaptive replications: the phases of one more block, or none when every pair
        of strategies is settled, the blocks reach ``max_replications`` or the next
        block would not fit in the budget. The block runs only the scenarios still open
        (``scenarios_to_settle``). The decision is in the manifest."""
        cfg, m = self.config, self.manifest
        adaptive = m.manifest.adaptive
        blocks = max(p.replication for p in self.phases)
        if not adaptive or blocks < cfg.replications:
            return []
        self._settle_flushes()
        self.testbed.collect(self.phases, float("inf"))
        cells = self.current_answer()
        open_pairs = sum(c.open_pairs for c in cells)
        without_value = sum(untrusted(c) for c in cells)
        spent = self._phase_seconds()
        scenarios = scenarios_to_settle(cells)
        lengths = self._lengths()
        per_block = self._block_seconds(scenarios, lengths, spent)
        if settled(cells):
            decision = "stop: every pair is resolved or equivalent"
        elif blocks >= cfg.max_replications:
            decision = f"stop: {blocks} blocks, the most run.max_replications allows"
        elif cfg.budget and spent + per_block > cfg.budget:
            decision = (
                f"stop: another block of {', '.join(scenarios)} (~{per_block:.0f} s) would "
                f"pass the budget ({spent:.0f} of {cfg.budget:.0f} s spent)"
            )
        else:
            decision = f"add a block of {', '.join(scenarios)}"
        made: dict[str, Any] = {
            "after_block": blocks,
            "open_pairs": open_pairs,
            "untrusted_cells": without_value,
            "decision": decision,
            "phase_seconds": round(spent, 1),
        }
        # A run of one strategy has no pairs; its blocks are added for values the checks
        # trust, and the line says so.
        why = f"{open_pairs} pairs open"
        if without_value:
            why += f", {without_value} cells with a strategy whose every phase failed a check"
        progress.note(f"after block {blocks}: {why}; {decision}")
        adding = decision.startswith("add a block")
        block = [
            replace(p, duration_s=lengths[p.scenario])
            for p in (plan_block(cfg, blocks + 1, len(self.phases), scenarios) if adding else [])
        ]
        if adding:
            made["phase_lengths_s"] = {s: lengths[s] for s in scenarios}
            m.add_phases([phase_entry(cfg, p) for p in block])
        m.set(adaptive={**adaptive, "decisions": [*adaptive["decisions"], made]})
        m.save()
        if not adding:
            return []
        self.phases += block
        progress.add_phases(len(block))
        return block

    def _lengths(self) -> dict[str, float]:
        """Each scenario's phase length for its next block: as in its last one, longer
        where a phase of it held too few successes for its own checks (``lengthened``)."""
        out = {}
        for scenario in self.config.scenarios:
            block = max(p.replication for p in self.phases if p.scenario == scenario.name)
            last = [
                p for p in self.phases if p.replication == block and p.scenario == scenario.name
            ]
            duration = last[0].duration_s or self.config.duration
            entries = [self.manifest.phase(p.index) for p in last]  # what they measured
            counts = [e.ok_in_window or 0 for e in entries if e.status == "done"]
            most = self.config.duration * LONGEST_GROWTH
            out[scenario.name] = lengthened(duration, counts, most) if counts else duration
        return out

    def _block_seconds(
        self, scenarios: Sequence[str], lengths: dict[str, float], spent: float
    ) -> float:
        """What a block of ``scenarios`` should take: per phase, what a phase of its
        scenario took beyond its measured length so far (warm-up, start-up, answers),
        its next length, and a share of the time between phases (``spent``: the
        seconds of phases so far, ``_phase_seconds``)."""
        ran = [(p, e, end - start) for p, e, start, end in self._ran()]
        if not ran:
            return 0.0
        between = (spent - sum(took for _, _, took in ran)) / len(ran)
        total = 0.0
        for scenario in scenarios:
            beyond = [
                took - (p.duration_s or self.config.duration)
                for p, _, took in ran
                if p.scenario == scenario
            ]
            per_phase = sum(beyond) / len(beyond) if beyond else 0.0
            total += len(self.config.strategies) * (per_phase + lengths[scenario] + between)
        return total

    def current_answer(self) -> list[Cell]:
        """The answer from the phases done so far (``analysis/run/decide.py``)."""
        return run_answer(self.run_dir).cells

    def _phase_seconds(self) -> float:
        """Seconds from the first phase's start to the last one's end, over the phases
        that ran (the part of the run the budget counts)."""
        ran = [(start, end) for _, _, start, end in self._ran()]
        return max(end for _, end in ran) - min(start for start, _ in ran) if ran else 0.0

    def _ran(self) -> list[tuple[Phase, PhaseEntry, float, float]]:
        """The phases that started and ended: each with its entry, start and end."""
        entries = [(p, self.manifest.phase(p.index)) for p in self.phases]
        return [(p, e, e.start, e.end) for p, e in entries if e.start and e.end]

    def _settle_flushes(self) -> None:
        """Wait until the last phase's picks and CPU samples are surely written (no wait
        on a testbed that writes them as a phase ends: its grace is 0)."""
        ends = [self.manifest.phase(p.index).end or 0.0 for p in self.phases]
        grace = self.testbed.flush_grace
        time.sleep(max(0.0, max(ends, default=0.0) + grace - time.time()))

    def check_room(self) -> None:
        """Refuse to start a phase the results filesystem has no room for (about as much
        as an average phase of this run has written so far, at least 1 MB)."""
        free = free_bytes(self.run_dir)
        need = self._bytes_per_phase()
        if free is not None and free < need:
            raise WriteFailed(
                f"{self.run_dir} has {human_bytes(free)} free; a phase of this run writes "
                f"about {human_bytes(need)}",
                path=self.run_dir,
                no_room=True,
            )

    def _bytes_per_phase(self) -> int:
        done = sum(self.manifest.phase(p.index).status == "done" for p in self.phases)
        return max(MIN_PHASE_BYTES, folder_bytes(self.run_dir) // max(done, 1))

    def _stopped_by(self, failure: WriteFailed) -> WriteFailed:
        """The run's last word on a failed write: what failed, what is kept, what to do."""
        left = sum(self.manifest.phase(p.index).status != "done" for p in self.phases)
        done = len(self.phases) - left
        what = (
            f"free about {human_bytes(self._bytes_per_phase() * left)} there, then"
            if failure.no_room
            else "fix that, then"
        )
        return WriteFailed(
            f"{failure}. The run stopped; its {done} finished phases are kept. To run the "
            f"other {left}, {what} continue with: lblab run --resume --out {self.run_dir}",
            path=failure.path,
            no_room=failure.no_room,
        )

    def run_phase(self, phase: Phase, progress: RunProgress) -> bool:
        """Run one phase on the testbed; True when it produced its records."""
        m = self.manifest
        # A rerun after an interruption starts clean: no records or parts of the last
        # try, and a folder of its own that nothing of the last try can write into.
        attempt = new_attempt(len(m.manifest.attempts))
        shutil.rmtree(phase_folder(self.run_dir, phase.key, attempt).parent, ignore_errors=True)
        for table in ("requests", "picks", "cpu"):
            (self.run_dir / "parts" / table / f"{phase.key}.parquet").unlink(missing_ok=True)
        m.update_phase(
            phase.index, status="running", attempt=attempt, start=time.time(), end=None, error=None
        )
        config = self.phase_config(phase)
        progress.start_phase(phase.label, phase_seconds(config, phase))
        ran = self.testbed.run_phase(phase, config, attempt, progress)
        m.update_phase(phase.index, status=ran.status, error=ran.error, end=ran.ended, **ran.facts)
        if ran.simulated_config is not None:
            self._keep_simulated_config(phase, ran.simulated_config)
        progress.end_phase(
            ran.status,
            ran.facts.get("requests") or 0,
            ran.facts.get("failures") or 0,
            ran.facts.get("ok_per_s_window"),
        )
        return ran.status == "done"

    def _keep_simulated_config(self, phase: Phase, config: Mapping[str, Any]) -> None:
        """``Manifest.phase_configs``: one per phase that ran, in the plan's order (a
        rerun replaces its phase's)."""
        same = (phase.scenario, phase.strategy, phase.replication)
        kept = [
            c
            for c in self.manifest.manifest.phase_configs
            if (c.get("scenario"), c.get("strategy"), c.get("replication")) != same
        ]
        order = {(p.scenario, p.strategy, p.replication): p.index for p in self.phases}
        configs = sorted(
            [*kept, config],
            key=lambda c: order.get((c["scenario"], c["strategy"], c["replication"]), 0),
        )
        self.manifest.set(phase_configs=tuple(configs))

    def phase_config(self, phase: Phase) -> RunConfig:
        """The config a phase runs with (``plan.phase_config``)."""
        return phase_config(self.config, phase)

    def collect(self) -> int:
        """``lblab run --collect``: rebuild every finished phase's requests, picks and cpu
        parts from ``raw/`` (now holding what other hosts wrote) and the tables."""
        m = self.manifest
        self.testbed.recollect(self.phases)
        consolidate(self.run_dir)
        failed = any(m.phase(p.index).status == "failed" for p in self.phases)
        if failed and m.manifest.status == "done":
            m.set(status="failed")
        m.set(collected=time.time())
        m.save()
        return EXIT_PHASE_FAILED if failed else EXIT_OK

    # ------------------------------------------------------------ picks and cpu

    def collect_due(self) -> None:
        """Collect phases whose picks and samples are surely flushed by now."""
        self.testbed.collect(self.phases, time.time() - self.testbed.flush_grace)

    def collect_all(self) -> None:
        self.testbed.collect(self.phases, float("inf"))
