"""``lblab ui``: the command line of the web UI session (``loadtests.webui.session``)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import typer

from lblab.errors import ConfigError


def ui_config(preset: str | None, config: str | None, warmup: str | None, out: str | None) -> Any:
    """The session's config: a preset (default quick) <- the file <- the flags; the UI
    offers every built-in scenario, so each gets a load."""
    from lblab.config import load_toml
    from lblab.experiment import config_layers, runconfig
    from lblab.experiment.presets import load_preset
    from lblab.loadtests.webui.choices import UI_SCENARIOS

    file_layer = load_toml(Path(config)) if config else None
    base = load_preset(preset or (file_layer or {}).get("preset") or "quick")
    base = config_layers.merge(base, {"run": {"name": "ui", "replications": 1}})
    run: dict[str, Any] = {"scenarios": list(UI_SCENARIOS)}
    if warmup is not None:
        run["warmup"] = warmup
    if out is not None:
        run["out"] = out
    cfg = runconfig.resolve(base, file_layer, {"run": run})
    if cfg.testbed.kind != runconfig.TestbedKind.LOCAL:
        raise ConfigError("lblab ui starts its own local testbed; remove [testbed] kind = external")
    if cfg.timeline:
        raise ConfigError("lblab ui runs no [[timeline]]; use lblab run for timed events")
    if cfg.testbed.balancers != 1:
        raise ConfigError(
            "lblab ui drives one balancer node; remove [testbed] balancers, or use lblab run"
        )
    if cfg.locust_workers or cfg.expect_workers:
        raise ConfigError(
            "lblab ui runs one Locust process; remove locust_workers / expect_workers"
        )
    return cfg


def check_port_free(port: int) -> None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ConfigError(
                f"--web-port {port}: 127.0.0.1:{port} is not free ({exc.strerror or exc}); "
                "choose another port"
            ) from None


def register(app: typer.Typer) -> None:
    """Add ``lblab ui`` to ``app``."""

    @app.command("ui")
    def ui(
        web_port: int = typer.Option(
            8089, "--web-port", min=1, max=65535, help="Port of the web UI on 127.0.0.1."
        ),
        preset: str = typer.Option(
            None, "--preset", help="Servers, weights, warm-up, deadlines (default: quick)."
        ),
        config: str = typer.Option(None, "--config", help="TOML file, as for lblab run."),
        warmup: str = typer.Option(
            None, help="Warm-up at the start of each swarm, e.g. 2s (rows kept, marked)."
        ),
        out: str = typer.Option(None, help="Run directory (default results/ui-<time>)."),
    ) -> None:
        """Start the local testbed and Locust's web UI on it; each swarm is a phase of a run.

        Open the printed address, choose the scenario, load model and strategy under
        "Custom parameters", Start; Edit + Update switches the strategy while it runs.
        Ctrl-C (or SIGTERM) ends the session and writes the run's report. Exit codes:
        0 ok, 1 a part of the testbed failed, 2 bad input.
        """
        from rich.console import Console

        from lblab.experiment import run_folders, summary
        from lblab.experiment.runner import new_manifest
        from lblab.loadtests.webui.session import serve

        console = Console(stderr=True)
        cfg = ui_config(preset, config, warmup, out)
        check_port_free(web_port)
        cfg = run_folders.with_new_run_dir(cfg, "ui", "choose another --out")
        run_dir = Path(cfg.out or "")
        given = {
            "command": "ui",
            "preset": preset,
            "config_file": config,
            "flags": {"web_port": web_port, "warmup": warmup, "out": out},
        }
        manifest = new_manifest(run_dir, cfg, given)
        manifest.set(
            phases=(),
            extra={
                **manifest.manifest.extra,
                "order": "as started in Locust's web UI (lblab ui): one phase per swarm and "
                "per switch of strategy or users while one runs",
                "strategy_switch": "PUT /strategy from the web UI's form (fresh strategy state)",
            },
        )
        manifest.save()
        console.print(f"run directory: {run_dir}")
        code = serve(cfg, run_dir, manifest, web_port, console)
        if not any(p.requests for p in manifest.manifest.phases):
            console.print("no swarm recorded a request: no report")
            raise typer.Exit(code)
        try:
            summary.finish(run_dir, console)
        except KeyboardInterrupt:  # a second Ctrl-C: the tables stand, the report waits
            console.print(f"report not written; write it with: lblab report {run_dir}")
            raise typer.Exit(130) from None
        raise typer.Exit(code)
