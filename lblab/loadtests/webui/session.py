"""The ``lblab ui`` process: the testbed, Locust's web UI on it, each swarm a phase.

It starts the local testbed (``LocalProcesses``) and one Locust process with its web UI on
``loadtests/webui/locustfile.py``, bound to 127.0.0.1. That process writes a note per
phase (``raw/ui/phase-NNN.json``: what was chosen, start, end); ``UiPhases`` reads them
on every tick, adds each phase to the manifest and, once its answers and samples are in
and no swarm runs (as the runner does between phases: the merge's CPU is not taken from
a measured phase), builds its requests, picks and cpu parts and checks with the
``PhaseRecorder`` the runner composes too. Ctrl-C
or SIGTERM stops Locust (which ends a running swarm), then the testbed; the tables are
consolidated and the caller writes the report.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from rich.console import Console

from lblab.errors import EXIT_OK, EXIT_PHASE_FAILED
from lblab.experiment.plan import Phase
from lblab.experiment.run_folders import phase_folder
from lblab.experiment.runconfig import LoadConfig, RunConfig
from lblab.interrupts import ignoring_interrupts, raise_interrupt
from lblab.loadtests import loadgen
from lblab.loadtests.local_testbed import LocalProcesses
from lblab.loadtests.locust_testbed import FLUSH_GRACE_S, TICK_S
from lblab.loadtests.phase_recorder import PhaseRecorder
from lblab.loadtests.probe import CpuProbe
from lblab.loadtests.record_table import read_records
from lblab.loadtests.records import FLUSH_S
from lblab.loadtests.webui.banner import describe_load
from lblab.loadtests.webui.protocol import USER_STRATEGIES_ENV, UiSession, phase_notes
from lblab.manifest import ManifestFile, PhaseEntry
from lblab.procs import Child, ProcessFailed
from lblab.results import consolidate

UI_LOCUSTFILE = Path(__file__).with_name("locustfile.py")
READY_TIMEOUT_S = 60.0  # Locust's start-up: 2-5 s, more on a busy machine
STOP_SLACK_S = 10.0  # beyond the request deadline for Locust to stop its users and exit


class UiFailed(RuntimeError):
    """A part of the session stopped on its own; the message says which and where to look."""


class UiPhases:
    """The phases the web UI starts and stops, as the manifest and the tables record them."""

    def __init__(self, config: RunConfig, run_dir: Path, manifest: ManifestFile) -> None:
        self.config, self.run_dir, self.manifest = config, run_dir, manifest
        self.testbed = LocalProcesses(config, run_dir)
        self.recorder = PhaseRecorder(
            run_dir, manifest, self.phase_config, self.testbed.harness_cores
        )
        self.probe = CpuProbe()
        self.locust: loadgen.LocustRun | None = None
        self.phases: list[Phase] = []
        self._configs: dict[int, RunConfig] = {}
        self._done: set[int] = set()

    def phase_config(self, phase: Phase) -> RunConfig:
        return self._configs.get(phase.index, self.config)

    def poll(self, final: bool = False) -> list[str]:
        """Take in the phase notes; finish the phases whose rows are all in, but only
        while no swarm runs (merging takes CPU the running phase would lose), or every
        one when ``final`` (Locust has exited). Returns lines for the console."""
        lines: list[str] = []
        now = time.time()
        notes: list[dict[str, Any]] = []
        for path in sorted(phase_notes(self.run_dir).glob("phase-*.json")):
            if int(path.stem.split("-")[1]) not in self._done:
                notes.append(json.loads(path.read_text()))
        for note in notes:
            if note["index"] == len(self.phases):
                lines.append(self._add(note))
        running = any(note["end"] is None for note in notes)
        finished = False
        for note in (n for n in notes if n["index"] < len(self.phases)):
            end = note["end"] if note["end"] is not None else now
            if final or (not running and now >= end + self._settle(note)):
                lines.append(self._finish(self.phases[note["index"]], note, end))
                finished = True
        if finished:  # their picks and samples are in by now (FLUSH_GRACE_S)
            self.recorder.collect(self.phases, now - FLUSH_GRACE_S)
        return lines

    def _settle(self, note: dict[str, Any]) -> float:
        """After a phase's end, how long until its rows are surely written: the open
        model's requests in flight end by their deadline after Stop."""
        extra = self.config.request_timeout + FLUSH_S if note["load"]["model"] == "open" else 0.0
        return FLUSH_GRACE_S + extra

    def _add(self, note: dict[str, Any]) -> str:
        phase = Phase(note["index"], note["scenario"], note["strategy"], note["replication"])
        self.phases.append(phase)
        self.manifest.add_phases(
            [
                PhaseEntry(
                    key=phase.key,
                    attempt=note["attempt"],
                    scenario=phase.scenario,
                    strategy=phase.strategy,
                    replication=phase.replication,
                    seed=note["seed"],
                    status="running",
                    start=note["start"],
                    extra={"strategy_options": note["strategy_options"], "load": note["load"]},
                )
            ]
        )
        self.manifest.save()
        how = describe_load(note["load"])
        return f"phase {phase.key}: {phase.scenario}, {phase.strategy}, {how}"

    def _finish(self, phase: Phase, note: dict[str, Any], end: float) -> str:
        load = LoadConfig(**{**note["load"], "think_time": tuple(note["load"]["think_time"])})
        # The window ends where the load did (Stop pressed, or the switch), not after the
        # users' last answers: duration = load end - first request - warm-up.
        sent = read_records(phase_folder(self.run_dir, phase.key, note["attempt"]))["t_sent"]
        first = pc.min(sent).as_py() if len(sent) else note["start"]
        measured = (note.get("load_end") or end) - first - self.config.warmup
        self._configs[phase.index] = replace(
            self.config,
            duration=max(measured, 1e-3),
            loads={**self.config.loads, phase.scenario: load},
        )
        facts = self.recorder.merge_records(phase, note["start"])
        if facts.get("window") is not None:
            facts["harness_cpu"] = self.probe.cores(facts["window"])
        ok = facts["requests"] > 0
        self.manifest.update_phase(
            phase.index,
            status="done" if ok else "failed",
            error=None if ok else "no requests were recorded (stopped before any answer)",
            end=end,
            **facts,
        )
        self._done.add(phase.index)
        rate = facts.get("ok_per_s_window")
        per_s = f", {rate:.0f} ok req/s in its window" if rate is not None else ""
        return f"phase {phase.key}: {facts['requests']} requests, {facts['failures']} failed{per_s}"


def locust_command(
    config: RunConfig, session: UiSession, address: tuple[str, int], port: int
) -> list[str]:
    """argv of the web UI's Locust; the form starts with the config's first strategy."""
    load = config.loads[config.scenarios[0].name]
    return [
        sys.executable, "-m", "locust", "-f", str(UI_LOCUSTFILE),
        "--web-host", "127.0.0.1", "--web-port", str(port),
        "--host", "rsocket://{}:{}".format(*address),
        "-u", str(load.users), "-r", f"{load.spawn_rate:g}",
        "--stop-timeout", str(int(config.request_timeout + 1)),
        "--strategy", config.strategies[0],
        "--lblab-ui", session.to_json(),
    ]  # fmt: skip


def wait_ready(child: Child, url: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the web UI answers, the Locust process exits, or ``timeout``."""
    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise UiFailed(
                f"Locust exited with code {child.popen.returncode} before its web UI was up; "
                f"see {child.log_path}"
            )
        try:
            with no_proxy.open(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(TICK_S)
    raise UiFailed(
        f"Locust's web UI did not answer at {url} within {timeout:.0f} s; see {child.log_path}"
    )


def serve(
    config: RunConfig, run_dir: Path, manifest: ManifestFile, port: int, console: Console
) -> int:
    """Run the session until Ctrl-C or SIGTERM (exit 0) or until a part fails (exit 1)."""
    import signal

    runner = UiPhases(config, run_dir, manifest)
    testbed = runner.testbed
    code = EXIT_OK
    url = f"http://127.0.0.1:{port}/"
    manifest.add_attempt(started=time.time(), phases_to_run=None)
    previous_sigterm = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        console.print("starting the testbed (servers, agents, balancer) ...")
        testbed.start(config.strategies[0])
        facts = testbed.facts()
        manifest.set(testbed=facts, cpu_limit_method=facts["cpu_limit_method"])
        manifest.save()
        assert testbed.balancer is not None
        session = UiSession(
            run_dir=str(run_dir.resolve()),
            admin=("127.0.0.1", int(testbed.balancer.ready["admin_port"])),
            warmup=config.warmup,
            request_timeout=config.request_timeout,
            seed=config.seed,
            think_time=config.loads[config.scenarios[0].name].think_time,
            strategy_options={k: dict(v) for k, v in config.strategy_options.items()},
        )
        argv = locust_command(config, session, testbed.address, port)
        own = {USER_STRATEGIES_ENV: ",".join(config.strategy_specs)}
        locust = loadgen.launch("locust", argv, run_dir / "logs" / "locust.log", env=own)
        runner.locust = loadgen.LocustRun([locust])
        runner.probe.watch(testbed.harness_pids(runner.locust.children))
        wait_ready(locust, url)
        print(f"Locust web UI: {url}", flush=True)
        console.print("choose the scenario, load model and strategy under Custom parameters; "
                      "Ctrl-C ends the session and writes the report")  # fmt: skip
        warned: list[str] = []
        while True:
            if not locust.alive():
                raise UiFailed(
                    f"Locust exited with code {locust.popen.returncode}; see {locust.log_path}"
                )
            dead = testbed.check_alive()
            if dead and dead != warned:
                console.print(
                    f"not running: {', '.join(dead)} (see {run_dir / 'logs'})", style="red"
                )
            warned = dead
            for line in runner.poll():
                console.print(line, highlight=False)
            time.sleep(TICK_S)
            runner.probe.sample()
    except KeyboardInterrupt:
        console.print("stopping ...")
    except (ProcessFailed, UiFailed) as exc:
        console.print(f"error: {exc}", style="red")
        code = EXIT_PHASE_FAILED
    finally:
        with ignoring_interrupts():
            if runner.locust is not None:
                runner.locust.stop(timeout=config.request_timeout + STOP_SLACK_S)
            for line in runner.poll(final=True):
                console.print(line, highlight=False)
            testbed.stop()
            runner.recorder.collect(runner.phases, float("inf"))
            consolidate(run_dir)
            ended = time.time()
            manifest.end_attempt(ended=ended)
            manifest.set(ended=ended, status="done" if code == EXIT_OK else "failed")
            manifest.save()
        signal.signal(signal.SIGTERM, previous_sigterm)
    return code
