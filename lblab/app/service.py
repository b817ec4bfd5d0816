"""An experiment: one run folder, from its file to its report, on any testbed.

``lblab run`` parses its flags and calls this; nothing else decides what a run does.

- ``new``: the config from its layers (built-in defaults <- preset <- file <- flags,
  ``experiment/runconfig.py``), checked before anything is written; the driver's
  preflight (``app/testbeds.py``: a local testbed's CPU layout, the simulator's checks);
  a new run folder and the manifest of its plan.
- ``reopen``: a run folder ``lblab run`` wrote, to resume (run what is not done) or to
  collect (rebuild the tables from ``raw/`` with other hosts' records), with its own
  config.
- ``run``: the plan through the runner (``experiment/runner.py``: blocks, adaptive
  replications, the budget, resume, the answer), each phase with a progress bar, on the
  config's testbed (``experiment/testbed.py``, made by ``app/testbeds.py``): ``local`` (processes here) and
  ``external`` (a balancer someone else runs, such as the ansible roles) with a Locust
  per phase (``loadtests/locust_testbed.py``), ``simulated`` with a simulation per phase
  (``simulator/simulated_testbed.py``).
- ``twin``: a measured run's simulated twin (``simulator/twin``), which never costs the
  run its report.
- ``finish``: the report (or the summary alone), as every run ends.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.console import Console

from lblab.errors import EXIT_INTERRUPTED, EXIT_PHASE_FAILED, ConfigError
from lblab.experiment import run_folders, runconfig
from lblab.experiment.runconfig import RunConfig, TestbedKind
from lblab.manifest import ManifestFile


@dataclass
class Experiment:
    config: RunConfig
    run_dir: Path
    given: dict[str, Any]
    """What the user gave (preset, file, flags), kept in the manifest."""
    console: Console
    manifest: ManifestFile | None = None
    """The run's manifest file: its plan, then what each phase did."""

    @classmethod
    def resolve(
        cls, preset: str | None, config_file: str | None, flags: dict[str, Any]
    ) -> RunConfig:
        """The checked config of ``preset`` <- ``config_file`` <- ``flags``."""
        from lblab.config import load_toml
        from lblab.experiment.presets import load_preset

        file_layer = load_toml(Path(config_file)) if config_file else None
        preset_name = preset or (file_layer or {}).get("preset") or "quick"
        return runconfig.resolve(load_preset(preset_name), file_layer, flags)

    @classmethod
    def new(cls, config: RunConfig, given: dict[str, Any], console: Console) -> Experiment:
        """A new run folder for ``config``; everything is checked before it is made."""
        from lblab.app.testbeds import preflight

        layout = preflight(config)  # the driver's own checks, before anything is written
        config = run_folders.with_new_run_dir(
            config,
            config.name,
            "continue it with --resume --out {run_dir} or choose another --out",
        )
        if layout is not None:
            console.print(layout)
        from lblab.experiment.runner import new_manifest
        from lblab.simulator.capacity import capacities

        found = capacities(config)
        for each in found:
            console.print(each.describe(), style="yellow" if each.overloaded else None)
        run_dir = Path(config.out or "")
        manifest = new_manifest(run_dir, config, given)
        extra = {**manifest.manifest.extra, "capacity": {c.scenario: c.to_json() for c in found}}
        manifest.set(extra=extra)
        manifest.save()
        return cls(config, run_dir, given, console, manifest)

    @classmethod
    def reopen(
        cls, out: str | None, purpose: Literal["resume", "collect"], console: Console
    ) -> Experiment:
        """The run folder ``out``, to resume or collect, with its own config."""
        from lblab.manifest import load as load_manifest

        flag = f"--{purpose}"
        if not out:
            raise ConfigError(f"{flag} needs --out DIR, the run directory to continue")
        run_dir = Path(out)
        manifest_path = run_dir / "manifest.json"
        if not manifest_path.is_file():
            raise ConfigError(
                f"{flag}: {manifest_path} does not exist; --out must name a run directory "
                "that `lblab run` wrote"
            )
        recorded = load_manifest(manifest_path)
        if recorded.simulated and not recorded.config:
            raise ConfigError(
                f"{flag}: {run_dir} was written by `lblab simulate`; it has nothing to "
                "continue or collect: simulate it again (the same seeds give the same tables)"
            )
        if recorded.simulated and purpose == "collect":
            raise ConfigError(
                f"{flag}: {run_dir} is a simulated run; its phases wrote their tables as "
                "they ran, and no other host holds records of it"
            )
        if recorded.config_given.get("command") == "ui":
            raise ConfigError(
                f"{flag}: {run_dir} was recorded by `lblab ui` (its phases are swarms, not "
                f"a plan); rebuild its report with `lblab report {run_dir}`"
            )
        if not recorded.config:
            raise ConfigError(
                f"{flag}: {manifest_path} has no config; it was not written by `lblab run`"
            )
        from lblab.strategy.sources import RECORD_KEY, install_copies

        install_copies(run_dir, recorded.extra.get(RECORD_KEY, {}))
        config = runconfig.resolve(None, dict(recorded.config), {})
        verb = "resuming" if purpose == "resume" else "collecting"
        console.print(f"{verb} {run_dir} (its own config; other flags are ignored)")
        manifest = ManifestFile(manifest_path, recorded)
        return cls(config, run_dir, dict(recorded.config_given), console, manifest)

    @property
    def simulated(self) -> bool:
        return self.config.testbed.kind == TestbedKind.SIMULATED

    def run(self, collect: bool = False) -> int:
        """Run what is not done (``collect``: rebuild the tables instead); the exit code."""
        from lblab.app.testbeds import make_testbed
        from lblab.experiment.runner import Runner
        from lblab.procs import ProcessFailed

        assert self.manifest is not None  # from new() or reopen()
        where = " (simulated testbed)" if self.simulated else ""
        self.console.print(f"run directory: {self.run_dir}{where}")
        try:
            testbed = make_testbed(self.config, self.run_dir, self.manifest)
            runner = Runner(self.config, self.run_dir, self.manifest, testbed)
            return runner.collect() if collect else runner.execute()
        except ProcessFailed as exc:
            self.console.print(f"error: the testbed did not start: {exc}", style="red")
            return EXIT_PHASE_FAILED

    def twin(self, scales: list[int]) -> None:
        """The measured run's simulated twin into ``twin/``; a failure is reported, and
        the run keeps its report."""
        from lblab.simulator.twin import make_twin

        console, run_dir = self.console, self.run_dir
        try:
            console.print(f"twin: {make_twin(run_dir, scales, echo=console.print)}")
        except ConfigError as exc:
            console.print(f"twin skipped: {exc}", style="yellow")
        except KeyboardInterrupt:
            console.print(
                f"twin interrupted; the run is complete (build the twin with: lblab twin "
                f"{run_dir})",
                style="yellow",
            )
        except Exception as exc:  # a bug in the twin must not cost the run its report
            console.print(
                f"twin failed ({type(exc).__name__}: {exc}); the run is complete "
                f"(retry with: lblab twin {run_dir})",
                style="red",
            )

    def finish(self, code: int, report: bool) -> None:
        """What every run ends with: the report and the summary (or how to continue)."""
        from lblab.experiment import summary

        if code == EXIT_INTERRUPTED:
            self.console.print(
                f"interrupted; continue with: lblab run --resume --out {self.run_dir}"
            )
        elif report:
            summary.finish(self.run_dir, self.console)
        else:
            summary.print_all(self.run_dir, self.console)


def run_experiment(
    preset: str | None,
    config: str | None,
    flags: dict[str, Any],
    *,
    out: str | None = None,
    resume: bool = False,
    collect: bool = False,
    print_config: bool = False,
    twin: bool = False,
    twin_scale: list[int] | None = None,
    no_report: bool = False,
) -> int:
    """What ``lblab run`` does with its flags (``app.flags.flags_layer``): a new run, or the
    run in ``out`` resumed or collected; returns the run's exit code."""
    console = Console(stderr=True)
    if resume or collect:
        experiment = Experiment.reopen(out, "resume" if resume else "collect", console)
    else:
        cfg = Experiment.resolve(preset, config, flags)
        if print_config:
            sys.stdout.write(cfg.to_toml())
            return 0
        if twin and cfg.testbed.kind == TestbedKind.SIMULATED:
            raise ConfigError(
                "--twin simulates a measured run's testbed; this run is simulated "
                "already: drop --twin"
            )
        given = {"preset": preset, "config_file": config, "flags": flags}
        experiment = Experiment.new(cfg, given, console)
    code = experiment.run(collect=collect)
    if twin and code != EXIT_INTERRUPTED:
        experiment.twin(twin_scale or [])
    experiment.finish(code, report=not no_report)
    return code
