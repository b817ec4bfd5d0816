"""A live testbed: a headless Locust per phase against live processes.

The processes (``testbed.Processes``) start once; each phase switches the balancer's
strategy (``PUT /strategy``: fresh strategy state, warm backend connections and agent
streams), undoes what the last phase's timeline changed, and runs a fresh headless
Locust (``loadgen``) whose users write request records into the phase's folder, while
the phase's timeline fires and the harness's CPU is sampled. When Locust ends, the
records become the phase's requests part at once (``PhaseRecorder.merge_records``); its
picks and CPU samples become parts a little later (the balancer flushes its picks once a
second, agents every sample), with the phase's validity checks (``collect``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab.experiment.plan import Phase, phase_config
from lblab.experiment.progress import RunProgress
from lblab.experiment.run_folders import phase_folder
from lblab.experiment.runconfig import RunConfig, TestbedKind
from lblab.experiment.testbed import PHASE_SLACK_S, PhaseRun
from lblab.experiment.timeline import Timeline
from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.local_testbed import cpu_layout, make_processes
from lblab.loadtests.phase_recorder import PhaseRecorder
from lblab.loadtests.probe import CpuProbe
from lblab.loadtests.processes import Processes
from lblab.loadtests.records import read_progress, started_at
from lblab.manifest import ManifestFile

TICK_S = 0.25
FLUSH_GRACE_S = 2.5  # the balancer flushes picks at least once a second, agents per sample


class PhaseFailed(RuntimeError):
    pass


class LocustTestbed:
    """``testbed.Testbed`` over live processes (the module docstring)."""

    flush_grace = FLUSH_GRACE_S

    @classmethod
    def preflight(cls, config: RunConfig) -> str | None:
        """A local testbed's CPU layout (``local_testbed.cpu_layout``: refuses one that
        cannot isolate as asked); an external one's processes are someone else's."""
        if config.testbed.kind != TestbedKind.LOCAL:
            return None
        return cpu_layout(config).describe()

    def __init__(self, config: RunConfig, run_dir: Path, manifest: ManifestFile) -> None:
        self.config, self.run_dir = config, run_dir
        self.processes: Processes = make_processes(config, run_dir)
        self.kind = self.processes.kind
        self.recorder = PhaseRecorder(
            run_dir,
            manifest,
            lambda phase: phase_config(config, phase),
            self.processes.harness_cores,
        )
        self.locust: loadgen.LocustRun | None = None
        self.probe = CpuProbe()

    def start(self, strategy: str) -> None:
        self.processes.start(strategy)

    def facts(self) -> dict[str, Any]:
        return self.processes.facts()

    def run_phase(
        self, phase: Phase, config: RunConfig, attempt: str, progress: RunProgress
    ) -> PhaseRun:
        processes, run_dir = self.processes, self.run_dir
        load = config.loads[phase.scenario]
        records = phase_folder(run_dir, phase.key, attempt)
        workers = config.locust_workers
        spec = LoadSpec(
            run_id=run_dir.name,
            scenario=next(s for s in config.scenarios if s.name == phase.scenario),
            strategy=phase.strategy,
            replication=phase.replication,
            model=load.model,
            think_time=load.think_time,
            rate=load.rate,
            arrival=load.arrival,
            count=load.count or None,
            duration=config.warmup + config.duration,
            generators=max(1, workers + config.expect_workers),
            request_timeout=config.request_timeout,
            seed=config.seed + phase.index,
            records_dir=str(records),
            balancers=processes.balancer_addresses(),
            spikes=config.spikes(phase.scenario),
            users=load.users,
        )
        expected = loadgen.expected_seconds(spec, load)
        start = time.time()
        status, error = "done", None
        timeline = Timeline(
            [e for e in config.timeline if e.applies_to(phase.scenario)],
            processes,  # type: ignore[arg-type]
        )
        try:
            if processes.changed:
                processes.restore()
            dead = processes.check_alive()
            if dead:
                raise PhaseFailed(f"not running before the phase: {', '.join(dead)}")
            processes.set_strategy(phase.strategy)
            host, port = processes.address
            self.locust = loadgen.start(
                spec, load, host, port, workers, run_dir / "logs" / "locust.log",
                expect=config.expect_workers, bind=config.locust_master_bind,
            )  # fmt: skip
            self.probe.watch(processes.harness_pids(self.locust.children))
            slack = PHASE_SLACK_S + (loadgen.WORKERS_WAIT_S if config.expect_workers else 0)
            deadline = time.monotonic() + expected + config.request_timeout + slack
            t0 = time.monotonic()
            load_t0: float | None = None  # epoch when the users started
            while not self.locust.finished():
                load_t0 = load_t0 or started_at(records)
                if load_t0 is not None:
                    elapsed = time.time() - load_t0
                    timeline.fire_due(elapsed)
                    progress.update_phase(elapsed, *read_progress(records))
                if time.monotonic() > deadline:
                    raise PhaseFailed(f"Locust did not finish within {time.monotonic() - t0:.0f}s")
                time.sleep(TICK_S)
                self.probe.sample()
            code = self.locust.main.popen.returncode
            if code != 0:
                raise PhaseFailed(
                    f"Locust exited with code {code}; see {run_dir / 'logs' / 'locust.log'}"
                )
        except (PhaseFailed, OSError, RuntimeError) as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._stop_locust()
        end = time.time()
        self.probe.sample()
        facts = self.recorder.merge_records(phase, start)
        if facts.get("window") is not None:
            facts["harness_cpu"] = self.probe.cores(facts["window"])
        # With workers elsewhere, this host may hold none of the records until --collect.
        if not facts["requests"] and status == "done" and not config.expect_workers:
            status, error = "failed", "no requests were recorded"
        return PhaseRun(status, error, end, {**facts, "timeline": timeline.log})

    def collect(self, phases: Sequence[Phase], before: float, force: bool = False) -> None:
        self.recorder.collect(phases, before, force)

    def recollect(self, phases: Sequence[Phase]) -> None:
        """``lblab run --collect``: every finished phase's requests, picks and cpu parts
        again from ``raw/`` (now holding what other hosts wrote)."""
        m = self.recorder.manifest
        for p in phases:
            entry = m.phase(p.index)
            if entry.status not in ("done", "failed") or entry.start is None:
                continue
            facts = self.recorder.merge_records(p, entry.start)
            if not facts["requests"] and entry.status == "done":
                facts.update(status="failed", error="no requests were recorded on any loader")
            m.update_phase(p.index, **facts)
        self.recorder.collect(phases, float("inf"), force=True)

    def recover(self) -> None:
        if self.processes.check_alive():
            self.processes.restore()

    def stop(self) -> None:
        self._stop_locust()
        self.processes.stop()

    def _stop_locust(self) -> None:
        if self.locust is not None:
            self.locust.stop()
            self.locust = None
