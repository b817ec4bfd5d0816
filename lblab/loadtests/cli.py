"""Commands of `loadtests/` for the `lblab` command line: ``lblab locust-workers`` (``lblab
run`` is the experiment's, ``lblab/app/cli.py``)."""

from __future__ import annotations

from pathlib import Path

import typer

from lblab.errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""

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
