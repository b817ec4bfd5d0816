"""Commands of `servers/` for the `lblab` command line: `server` and `agent`."""

from __future__ import annotations

from typing import Annotated

import typer

from lblab.admission import MAX_CONNECTIONS, MAX_PENDING_SETUP, SETUP_TIMEOUT_S
from lblab.loadreport import REPORT_TOKEN_ENV
from lblab.servers.defaults import DEFAULT_MAX_INFLIGHT, DRAIN_TIMEOUT_S


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
    app.command("server")(server)
    app.command("agent")(agent)


def server(
    id: str = typer.Option(..., "--id", help="Server id used in results and reports, e.g. s1."),
    port: int = typer.Option(7001, help="TCP port; 0 picks a free one (see the ready line)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    cpu_quota: float | None = typer.Option(
        None, help="CPU share this server may use, e.g. 0.25 (default: unlimited)."
    ),
    cpu_limit: str = typer.Option(
        "auto",
        help="How to enforce --cpu-quota: auto (cgroup v1 when root, else duty-cycle), "
        "cgroup, duty-cycle.",
    ),
    max_inflight: int = typer.Option(
        DEFAULT_MAX_INFLIGHT,
        help="Requests admitted at once (queued + in service); more are REJECTED.",
    ),
    workers: int = typer.Option(
        1, help="Concurrent service slots (threads, FIFO queue); 1 serves strictly in order."
    ),
    delay_ms: float = typer.Option(
        0.0, help="Service time added per request, slept in the slot (not CPU)."
    ),
    delay_dist: str = typer.Option(
        "fixed",
        help="How --delay-ms is slept: fixed (every request) or exp (exponential with that "
        "mean, the simulator's exp: service; seeded by --id).",
    ),
    drain_timeout: float = typer.Option(
        DRAIN_TIMEOUT_S,
        help="On SIGTERM, seconds to let in-flight requests finish before exiting.",
    ),
    setup_timeout: float = typer.Option(
        SETUP_TIMEOUT_S, help="Seconds a connection may take to send its SETUP before it is closed."
    ),
    max_connections: int = typer.Option(
        MAX_CONNECTIONS, help="Connections at once; more are refused."
    ),
    max_pending_setup: int = typer.Option(
        MAX_PENDING_SETUP,
        help="Connections at once still without SETUP; beyond it the oldest is closed.",
    ),
) -> None:
    """Run a JSON-work RSocket server (prints `lblab-ready {...}` once it listens)."""
    from lblab.errors import ConfigError
    from lblab.servers.cpulimit import LimitMethod
    from lblab.servers.server import ServerConfig, run_server

    try:
        method = LimitMethod(cpu_limit)
    except ValueError:
        raise ConfigError(
            f"--cpu-limit {cpu_limit!r}: use one of auto, cgroup, duty-cycle"
        ) from None
    config = ServerConfig(
        id=id,
        port=port,
        host=host,
        cpu_quota=cpu_quota,
        cpu_limit=method,
        max_inflight=max_inflight,
        workers=workers,
        delay_ms=delay_ms,
        delay_dist=delay_dist,
        drain_timeout_s=drain_timeout,
        setup_timeout_s=setup_timeout,
        max_connections=max_connections,
        max_pending_setup=max_pending_setup,
    )
    raise typer.Exit(run_server(config))


def agent(
    report_to: Annotated[
        list[str],
        typer.Option(
            metavar="HOST:PORT",
            help="The balancer's agent port, HOST:PORT (reports go there as REQUEST_FNF); "
            "repeat it, or give a comma list, for several balancers (each gets every report).",
        ),
    ],
    server: str = typer.Option(..., "--server", help="Id of the server this agent reports for."),
    pid: int | None = typer.Option(None, help="Measure this process (and its children)."),
    cgroup: str | None = typer.Option(
        None, help="Measure this cgroup v1 group (cpuacct.usage), e.g. lblab-s1-1234."
    ),
    interval: float = typer.Option(0.25, help="Seconds between samples (0.01..60)."),
    out: str | None = typer.Option(None, help="Append samples here as JSON lines."),
    allowance: float | None = typer.Option(
        None,
        help="CPUs the server may use (100 %% = all of it; 0.01..4096); default: the cgroup "
        "quota, else 1.",
    ),
    report_token: str | None = typer.Option(
        None,
        "--report-token",
        envvar=REPORT_TOKEN_ENV,
        show_envvar=True,
        help="The run's report token, as the balancer's --report-token (sent in each "
        "connection's SETUP); prefer the environment variable (a flag shows in `ps`).",
    ),
) -> None:
    """Stream a server's CPU use to the balancer (prints `lblab-ready {...}` once sampling)."""
    from pathlib import Path

    from lblab.config import parse_hostport, parse_names
    from lblab.servers.agent import AgentConfig, run_agent

    config = AgentConfig(
        server=server,
        pid=pid,
        cgroup=cgroup,
        report_to=tuple(parse_hostport(a) for a in parse_names(report_to)),
        interval_s=interval,
        out=Path(out) if out else None,
        allowance=allowance,
        report_token=report_token or None,
    )
    raise typer.Exit(run_agent(config))
