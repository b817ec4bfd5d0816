"""Commands of `loadtests/` for the `lblab` command line: ``lblab run``,
``lblab locust-workers``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lblab.config import parse_names
from lblab.errors import ConfigError
from lblab.loadtests.presets import preset_names


def flags_layer(**flags: Any) -> dict[str, Any]:
    """The config layer the command-line flags make (only the flags that were given)."""
    layer: dict[str, Any] = {}

    def put(section: str, key: str, value: Any) -> None:
        if value is not None:
            layer.setdefault(section, {})[key] = value

    for key in ("strategies", "scenarios"):
        names = parse_names(flags[key])
        if names:
            put("run", key, names)
    for key in (
        "duration", "warmup", "replications", "seed", "locust_workers", "locust_master_bind",
        "expect_workers", "out",
    ):  # fmt: skip
        put("run", key, flags[key])
    put("load", "users", flags["users"])
    put("testbed", "kind", flags["testbed"])
    put("testbed", "balancer", flags["balancer"])
    put("testbed", "admin", flags["admin"])
    return layer


def _simulated(cfg: Any, given: dict[str, Any], console: Any, no_report: bool) -> None:
    """The run on the simulated testbed (``simulator/experiment.py``): every phase
    of the plan simulated, a progress bar over them, then the report as a live run's."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from lblab.loadtests import run_folders, summary
    from lblab.simulator.experiment import check, run_simulated

    check(cfg)
    cfg = run_folders.with_new_run_dir(cfg, cfg.name, "choose another --out")
    run_dir = Path(cfg.out or "")
    console.print(f"run directory: {run_dir} (simulated testbed)")
    with Progress(
        TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        console=console,
    ) as bar:  # fmt: skip
        task = bar.add_task("", total=None)

        def step(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        counts = run_simulated(cfg, run_dir, given, step)
    console.print(f"wrote {run_dir} ({', '.join(f'{k} {v} rows' for k, v in counts.items())})")
    if no_report:
        summary.print_all(run_dir, console)
    else:
        summary.finish(run_dir, console)


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""

    @app.command("run")
    def run(
        preset: str = typer.Option(
            None, "--preset", help=f"{' | '.join(preset_names())} (default: quick)"
        ),
        config: str = typer.Option(None, "--config", help="TOML file; flags override it."),
        strategy: Annotated[
            list[str] | None,
            typer.Option(
                "-s",
                "--strategy",
                "--strategies",
                help="A strategy to run (repeatable, or a comma list): -s rr -s lc, "
                "-s r,rr,wrr,lc,dwrr. `lblab strategies` lists them.",
            ),
        ] = None,
        scenarios: str = typer.Option(
            None, help="Comma list, e.g. sp+sr,lp+lr,variation; traces: azure-code,azure-conv."
        ),
        duration: str = typer.Option(None, help="Measured time per phase, e.g. 20m."),
        warmup: str = typer.Option(None, help="Warm-up per phase, e.g. 10s (rows marked)."),
        users: int = typer.Option(None, help="Closed model: Locust users."),
        replications: int = typer.Option(None, help="Repetitions of the whole matrix."),
        out: str = typer.Option(None, help="Run directory (default results/<name>-<time>)."),
        resume: bool = typer.Option(False, "--resume", help="Continue the run in --out."),
        collect: bool = typer.Option(
            False,
            "--collect",
            help="Rebuild the tables of the run in --out from its raw/ folder (with the "
            "records fetched from other loader hosts) and report; runs no phase.",
        ),
        no_report: bool = typer.Option(
            False, "--no-report", help="Print the summary table only (no HTML report)."
        ),
        twin: bool = typer.Option(
            False,
            "--twin",
            help="At the end, simulate the run's testbed (`lblab twin`) and put 'measured vs "
            "simulated' into the report.",
        ),
        twin_scale: Annotated[
            list[int] | None,
            typer.Option(
                "--twin-scale",
                min=1,
                max=100_000,
                help="With --twin: also simulate this many servers (repeatable, e.g. 100).",
            ),
        ] = None,
        print_config: bool = typer.Option(
            False, "--print-config", help="Print the resolved config as TOML and exit."
        ),
        locust_workers: int = typer.Option(
            None, "--locust-workers", help="Distributed Locust: a master and N local workers."
        ),
        locust_master_bind: str = typer.Option(
            None,
            "--locust-master-bind",
            help="HOST[:PORT] (port 5557) on this host where the Locust master listens for "
            "workers on other hosts.",
        ),
        expect_workers: int = typer.Option(
            None,
            "--expect-workers",
            help="Workers on other hosts (`lblab locust-workers`) the master waits for in "
            "every phase; their records join the run with --collect.",
        ),
        seed: int = typer.Option(None, help="Base seed (phase k uses seed + k)."),
        testbed: str = typer.Option(
            None,
            help="local (start everything) | external (a balancer someone runs) | simulated "
            "(the same experiment in the simulator).",
        ),
        balancer: str = typer.Option(None, help="External testbed: the balancer's HOST:PORT."),
        admin: str = typer.Option(None, help="External testbed: the admin HTTP HOST:PORT."),
    ) -> None:
        """Run an experiment: every scenario x strategy x replication, then the report.

        Exit codes: 0 ok, 1 a phase failed, 2 bad config, 74 results could not be
        written (a full disk: make room, then --resume), 130 interrupted (Ctrl-C;
        continue with --resume --out DIR).
        """
        from rich.console import Console

        from lblab.config import load_toml
        from lblab.loadtests import run_folders, runconfig
        from lblab.loadtests.presets import load_preset
        from lblab.manifest import ManifestFile
        from lblab.manifest import load as load_manifest

        console = Console(stderr=True)
        flags = flags_layer(
            strategies=strategy, scenarios=scenarios, duration=duration, warmup=warmup,
            replications=replications, seed=seed, locust_workers=locust_workers, out=out,
            users=users, testbed=testbed, balancer=balancer, admin=admin,
            locust_master_bind=locust_master_bind, expect_workers=expect_workers,
        )  # fmt: skip
        given: dict[str, Any] = {
            "preset": preset,
            "config_file": config,
            "flags": flags,
        }
        if resume and collect:
            raise ConfigError("--resume and --collect exclude each other; give one")
        if resume or collect:
            flag = "--resume" if resume else "--collect"
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
            if recorded.simulated:
                raise ConfigError(
                    f"{flag}: {run_dir} is a simulated run; it has nothing to continue or "
                    "collect: run its file again (the same seeds give the same tables)"
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
            cfg = runconfig.resolve(None, dict(recorded.config), {})
            verb = "resuming" if resume else "collecting"
            console.print(f"{verb} {run_dir} (its own config; other flags are ignored)")
        else:
            recorded = None
            file_layer = load_toml(Path(config)) if config else None
            preset_name = preset or (file_layer or {}).get("preset") or "quick"
            cfg = runconfig.resolve(load_preset(preset_name), file_layer, flags)
            if print_config:
                sys.stdout.write(cfg.to_toml())
                return
            if cfg.testbed.kind == "simulated":
                if twin:
                    raise ConfigError(
                        "--twin simulates a measured run's testbed; this run is simulated "
                        "already: drop --twin"
                    )
                _simulated(cfg, given, console, no_report)
                return
            layout = None
            if cfg.testbed.kind == "local":  # the preflight, before anything is written
                from lblab.loadtests.local_testbed import cpu_layout

                layout = cpu_layout(cfg)
            cfg = run_folders.with_new_run_dir(
                cfg,
                cfg.name,
                "continue it with --resume --out {run_dir} or choose another --out",
            )
            run_dir = Path(cfg.out or "")
            if layout is not None:
                console.print(layout.describe())
        # The config is checked: only now the heavy parts load.
        from lblab.loadtests import summary
        from lblab.loadtests.runner import EXIT_PHASE_FAILED, Runner, new_manifest
        from lblab.procs import ProcessFailed

        if recorded is None:
            manifest = new_manifest(run_dir, cfg, given)
            manifest.save()
        else:
            manifest = ManifestFile(manifest_path, recorded)
        console.print(f"run directory: {run_dir}")
        try:
            runner = Runner(cfg, run_dir, manifest)
            code = runner.collect() if collect else runner.execute()
        except ProcessFailed as exc:
            console.print(f"error: the testbed did not start: {exc}", style="red")
            raise typer.Exit(EXIT_PHASE_FAILED) from None
        if twin and code != 130:
            from lblab.simulator.twin import make_twin

            try:  # the measured run stands whatever happens to its twin
                console.print(f"twin: {make_twin(run_dir, twin_scale or [], echo=console.print)}")
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
        if code == 130:
            console.print(f"interrupted; continue with: lblab run --resume --out {run_dir}")
        elif no_report:
            summary.print_all(run_dir, console)
        else:
            summary.finish(run_dir, console)
        raise typer.Exit(code)

    @app.command("locust-workers")
    def locust_workers_command(
        master: str = typer.Option(
            ..., "--master", help="HOST:PORT of the Locust master (lblab run --locust-master-bind)."
        ),
        processes: int = typer.Option(
            1, "--processes", min=1, max=256, help="Workers to keep running."
        ),
        loader: str = typer.Option(
            None, "--loader", help="This loader's name in the records (default: the hostname)."
        ),
        records_root: str = typer.Option(
            ...,
            "--records-root",
            help="This host's results folder: records go to <it>/<run-id>/raw/phases/<phase>/<attempt>/.",
        ),
    ) -> None:
        """Keep Locust workers connected to a master on another host, one per phase.

        A Locust worker quits with its master, and `lblab run` starts one per phase:
        each worker is relaunched when it exits. Stop with SIGTERM or Ctrl-C.
        """
        import socket

        from lblab.config import parse_hostport
        from lblab.loadtests.remote_workers import keep_workers

        address = parse_hostport(master, "--master")
        root = Path(records_root)
        if root.exists() and not root.is_dir():
            raise ConfigError(f"--records-root {root} is a file; give a folder for the records")
        name = loader or socket.gethostname()
        raise typer.Exit(keep_workers(address, processes, name, root.resolve()))
