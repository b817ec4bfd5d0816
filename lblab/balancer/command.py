"""``lblab balancer``: parse the command line into a ``NodeConfig`` and run the node."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lblab.admission import MAX_CONNECTIONS, MAX_PENDING_SETUP, SETUP_TIMEOUT_S, check_limits
from lblab.balancer.aperture import MIN_DETERMINISTIC_APERTURE
from lblab.balancer.budgets import BACKEND_HELD_BYTES, CLIENT_HELD_BYTES, CLIENT_STREAMS
from lblab.balancer.health_options import HEALTH_OPTIONS, flag, health_config
from lblab.errors import ConfigError
from lblab.loadreport import REPORT_TOKEN_ENV

if TYPE_CHECKING:
    from lblab.balancer.aperture import Subset
    from lblab.balancer.backend import BackendAddress


def _health_option(name: str) -> Any:
    """The typer option of health option ``name``, from its one definition."""
    default, _, text = HEALTH_OPTIONS[name]
    return typer.Option(default, flag(name), help=text)


def balancer_command(
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            help="A backend as ID=HOST:PORT, e.g. s1=127.0.0.1:7001; repeat per backend "
            "(none: start empty and add backends with POST /backends).",
        ),
    ] = None,
    strategy: str = typer.Option(
        "rr",
        "-s",
        "--strategy",
        help="The strategy: a name (`lblab strategies`), or a file of your own as "
        "path/to/file.py:Class (or package.module:Class); options may follow in brackets, "
        "e.g. 'least-request[choice_count=3]'.",
    ),
    load_strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--load-strategy",
            help="A strategy of your own (path/to/file.py:Class) to load at start, so that "
            "PUT /strategy can switch to it by its name; repeatable.",
        ),
    ] = None,
    strategy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy-option",
            help="A strategy option as NAME=VALUE, e.g. tie=random; repeatable.",
        ),
    ] = None,
    weights: str = typer.Option(
        "", "--weights", help="Static weights, e.g. s1=1,s2=1,s3=7 (default 1)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(
        7878, "--port", min=0, max=65535, help="RSocket port for clients (0: any free port)."
    ),
    agent_port: int | None = typer.Option(
        None, "--agent-port", min=0, max=65535, help="Port for agents' load reports."
    ),
    admin_port: int | None = typer.Option(
        None,
        "--admin-port",
        min=0,
        max=65535,
        help="HTTP port for /metrics, /status, /strategy, /backends.",
    ),
    admin_host: str = typer.Option(
        "127.0.0.1",
        "--admin-host",
        help="Address the admin API listens on (apart from --host); beyond loopback it needs "
        "--admin-token.",
    ),
    admin_token: str | None = typer.Option(
        None,
        "--admin-token",
        envvar="LBLAB_ADMIN_TOKEN",
        show_envvar=True,
        help="Bearer token every admin change (PUT/POST/DELETE) must send; prefer the "
        "environment variable (a flag shows in `ps`).",
    ),
    report_token: str | None = typer.Option(
        None,
        "--report-token",
        envvar=REPORT_TOKEN_ENV,
        show_envvar=True,
        help="Token an agent's connection must present (`lblab agent --report-token`); "
        "without it the agent port takes reports from any peer. Prefer the environment "
        "variable (a flag shows in `ps`).",
    ),
    picks: Annotated[
        Path | None,
        typer.Option("--picks", dir_okay=False, help="Append one JSON line per pick to this file."),
    ] = None,
    request_timeout: str = typer.Option(
        "30s", "--request-timeout", help="Deadline of a request at the balancer, e.g. 30s or 500ms."
    ),
    drain_timeout: str = typer.Option(
        "2s",
        "--drain-timeout",
        help="On SIGTERM/SIGINT: new requests are REJECTED at once, requests in flight get "
        "this long to finish; what is left is cut with a CANCELED error (0: cut at once).",
    ),
    max_frame_bytes: int = typer.Option(
        0xFFFFFF,
        "--max-frame-bytes",
        help="Largest frame body accepted (default: the 24-bit maximum).",
    ),
    client_max_streams: int = typer.Option(
        CLIENT_STREAMS,
        "--client-max-streams",
        help="Streams one client connection may have open at once; a request beyond it is "
        "REJECTED, naming this limit.",
    ),
    client_max_held_bytes: int = typer.Option(
        CLIENT_HELD_BYTES,
        "--client-max-held-bytes",
        help="Bytes of unfinished fragmented requests one client connection may hold at the "
        "servers; the request whose fragment passes it is cancelled there and REJECTED.",
    ),
    backend_max_held_bytes: int = typer.Option(
        BACKEND_HELD_BYTES,
        "--backend-max-held-bytes",
        help="Bytes of unfinished fragmented requests all clients together may hold on one "
        "backend connection (below the server's own allowance); when full, it is shared "
        "fairly: a client over its share is refused, one within it gets room.",
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed of the strategy's random numbers (0..4294967295)."
    ),
    setup_timeout: str = typer.Option(
        f"{SETUP_TIMEOUT_S:g}s",
        "--setup-timeout",
        help="A client connection without SETUP this long is closed.",
    ),
    max_connections: int = typer.Option(
        MAX_CONNECTIONS, "--max-connections", help="Client connections at once; more are refused."
    ),
    max_pending_setup: int = typer.Option(
        MAX_PENDING_SETUP,
        "--max-pending-setup",
        help="Client connections at once still without SETUP; beyond it the oldest is closed.",
    ),
    aperture: str = typer.Option(
        "none",
        "--aperture",
        help="Connect to and pick within a subset of the --backend list: deterministic "
        "(Finagle's ring, from --instance of --instances) or random; none: every backend.",
    ),
    aperture_size: int | None = typer.Option(
        None,
        "--aperture-size",
        help="Backends' worth of the ring in the aperture, at most the backends "
        f"[{MIN_DETERMINISTIC_APERTURE}, Finagle's minimum deterministic aperture].",
    ),
    instance: int | None = typer.Option(
        None, "--instance", help="This balancer's place among its peers, 0 .. --instances - 1."
    ),
    instances: int | None = typer.Option(
        None, "--instances", help="How many balancers share the backends (K)."
    ),
    eject_after: int = _health_option("eject_after"),
    eject_base: str = _health_option("eject_base"),
    eject_max: str = _health_option("eject_max"),
    panic_threshold: float = _health_option("panic_threshold"),
    success_rate_threshold: float = _health_option("success_rate_threshold"),
    success_rate_window: str = _health_option("success_rate_window"),
    success_rate_min_requests: int = _health_option("success_rate_min_requests"),
    success_rate_stdev_factor: float = _health_option("success_rate_stdev_factor"),
    success_rate_minimum_hosts: int = _health_option("success_rate_minimum_hosts"),
    slow_start_window: str = _health_option("slow_start_window"),
    slow_start_aggression: float = _health_option("slow_start_aggression"),
    slow_start_min_weight: float = _health_option("slow_start_min_weight"),
    slow_start_fast_after: int = _health_option("slow_start_fast_after"),
    slow_start_fast_ratio: float = _health_option("slow_start_fast_ratio"),
) -> None:
    """Run the RSocket balancer node: forward each request to a backend the strategy picks."""
    from dataclasses import replace

    from lblab.balancer.backend import BackendAddress
    from lblab.balancer.node import NodeConfig
    from lblab.balancer.serve import run
    from lblab.config import (
        MAX_SEED,
        check_range,
        parse_assignments,
        parse_duration,
        parse_hostport,
    )

    if seed is not None:
        check_range("--seed", seed, minimum=0, maximum=MAX_SEED)
    health = health_config(
        {
            "eject_after": eject_after,
            "eject_base": eject_base,
            "eject_max": eject_max,
            "panic_threshold": panic_threshold,
            "success_rate_threshold": success_rate_threshold,
            "success_rate_window": success_rate_window,
            "success_rate_min_requests": success_rate_min_requests,
            "success_rate_stdev_factor": success_rate_stdev_factor,
            "success_rate_minimum_hosts": success_rate_minimum_hosts,
            "slow_start_window": slow_start_window,
            "slow_start_aggression": slow_start_aggression,
            "slow_start_min_weight": slow_start_min_weight,
            "slow_start_fast_after": slow_start_fast_after,
            "slow_start_fast_ratio": slow_start_fast_ratio,
        },
        flags=True,
    )
    weight_of = _weights(parse_assignments(weights, "--weights"))
    backends = []
    for item in backend or []:
        backend_id, sep, address = item.partition("=")
        if not sep or not backend_id:
            raise ConfigError(
                f"--backend: {item!r} is not ID=HOST:PORT; write e.g. s1=127.0.0.1:7001"
            )
        h, p = parse_hostport(address, f"--backend {backend_id}")
        backends.append(BackendAddress(backend_id, h, p, weight_of.pop(backend_id, 1.0)))
    if weight_of:
        raise ConfigError(f"--weights names {', '.join(weight_of)}, which no --backend defines")
    subset = _aperture(aperture, aperture_size, instance, instances, backends, seed)
    if subset is not None:
        share = {m.id: m.weight for m in subset.members}
        backends = [replace(b, weight=share[b.id]) for b in backends if b.id in share]
    from lblab.balancer.strategies.options import split_options
    from lblab.balancer.strategies.registry import resolve

    for spec in load_strategy or []:
        resolve(spec)
    strategy, options = split_options(strategy, "--strategy")
    for item in strategy_option or []:
        options |= parse_assignments(item, "--strategy-option", "tie=random")
    config = NodeConfig(
        backends=tuple(backends),
        strategy=strategy,
        strategy_options=options,
        host=host,
        port=port,
        agent_port=agent_port,
        admin_port=admin_port,
        admin_host=admin_host,
        admin_token=admin_token or None,
        report_token=report_token or None,
        picks=picks,
        request_timeout_s=parse_duration(request_timeout, "--request-timeout"),
        drain_timeout_s=parse_duration(drain_timeout, "--drain-timeout"),
        max_frame_bytes=max_frame_bytes,
        client_max_streams=client_max_streams,
        client_max_held_bytes=client_max_held_bytes,
        backend_max_held_bytes=backend_max_held_bytes,
        seed=seed,
        setup_timeout_s=_limits(setup_timeout, max_connections, max_pending_setup),
        max_connections=max_connections,
        max_pending_setup=max_pending_setup,
        health=health,
        aperture=subset,
    )
    run(config)


def _aperture(
    mode: str,
    size: int | None,
    instance: int | None,
    instances: int | None,
    backends: Sequence[BackendAddress],
    seed: int | None,
) -> Subset | None:
    """This balancer's subset of ``backends`` (``balancer/aperture.py``), or None for
    ``--aperture none``; a random aperture's tokens come from ``--seed`` (none: fresh)."""
    import random

    from lblab.balancer.aperture import MAX_APERTURE, check_mode, subset
    from lblab.config import check_range

    if mode == "none":
        if instance is not None or instances is not None or size is not None:
            raise ConfigError(
                "--instance, --instances and --aperture-size shape an aperture; give "
                "--aperture deterministic or random too"
            )
        return None
    size = MIN_DETERMINISTIC_APERTURE if size is None else size
    check_mode(mode, size, "--aperture", "--aperture-size")
    if instance is None or instances is None:
        raise ConfigError(
            f"--aperture {mode} needs --instance and --instances (this balancer's place "
            "among the K that share the backends), e.g. --instance 0 --instances 4"
        )
    if not backends:
        raise ConfigError(f"--aperture {mode}: give the whole --backend list to take it from")
    check_range("--instances", instances, minimum=1, maximum=MAX_APERTURE)
    rng = random.Random(seed) if mode == "random" else None
    return subset(
        mode,  # type: ignore[arg-type]  # checked by subset
        [b.id for b in backends],
        [b.weight for b in backends],
        instance,
        instances,
        size,
        rng,
    )


def _weights(raw: dict[str, str]) -> dict[str, float]:
    from lblab.config import check_weight

    return {name: check_weight(value, f"--weights {name}") for name, value in raw.items()}


def _limits(setup_timeout: str, max_connections: int, max_pending_setup: int) -> float:
    """The SETUP deadline in seconds, once the connection caps are checked."""
    from lblab.config import parse_duration

    timeout_s = parse_duration(setup_timeout, "--setup-timeout")
    check_limits(max_connections, max_pending_setup, timeout_s)
    return timeout_s
