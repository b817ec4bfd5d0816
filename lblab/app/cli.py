"""The ``lblab run`` and ``lblab simulate`` commands: an experiment's flags, then the
``Experiment`` service (``app/service.py``)."""

from __future__ import annotations

from typing import Annotated

import typer

from lblab.app.flags import flags_layer
from lblab.errors import ConfigError
from lblab.experiment.presets import preset_names


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
                "-s r,rr,wrr,lc,dwrr. `lblab strategies` lists them; your own is "
                "path/to/file.py:Class; options of its own in brackets: "
                "-s 'least-request[choice_count=3]'.",
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
        flags = flags_layer(
            strategies=strategy, scenarios=scenarios, duration=duration, warmup=warmup,
            replications=replications, seed=seed, locust_workers=locust_workers, out=out,
            users=users, testbed=testbed, balancer=balancer, admin=admin,
            locust_master_bind=locust_master_bind, expect_workers=expect_workers,
        )  # fmt: skip
        if resume and collect:
            raise ConfigError("--resume and --collect exclude each other; give one")
        from lblab.app.service import run_experiment

        code = run_experiment(
            preset, config, flags, out=out, resume=resume, collect=collect,
            print_config=print_config, twin=twin, twin_scale=twin_scale, no_report=no_report,
        )  # fmt: skip
        raise typer.Exit(code)

    from lblab.app.simulate import simulate

    app.command("simulate")(simulate)
