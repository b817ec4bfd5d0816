"""Starting Locust for one phase: standalone, or a master with N local workers.

The runner starts a fresh headless Locust per phase (about 1 s of start-up) rather than
steering a long-lived one: each phase then has its own process, records folder and exit
status, and a crash costs one phase. The master may also expect workers it did not
start: ``lblab locust-workers`` on other loader hosts (``loadtests.remote_workers``)
runs the same ``worker_command`` and relaunches it for every phase, because a Locust
2.47 worker quits with its master.

Closed model: the phase ends its duration after its first request (the locustfile's
clock; Locust's own ``-t`` timer starts before the users connect) and ``--stop-timeout``
(request deadline + 1 s) lets each user finish the request it has in flight, so every
request sent is answered or timed out and recorded. Open and trace models: each
process's generator ends itself when its schedule is sent and answered. In every model
``-t`` is only a safety net.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lblab.experiment.plan import load_seconds
from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests.loadspec import LoadSpec
from lblab.procs import Child, dies_with_this_process, stop

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
_BASE = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING"]
SAFETY_S = 10.0  # beyond the expected end before a phase is declared stuck
# A master gives up (exit 1, "Gave up waiting for workers") if its workers are not all
# connected by then; remote ones are relaunched a few seconds after the last phase.
WORKERS_WAIT_S = 60


def expected_seconds(spec: LoadSpec, load: LoadConfig) -> float:
    """How long the load of ``spec`` lasts (``plan.load_seconds``)."""
    return load_seconds(spec.duration, spec.scenario.trace, spec.rate, load.model, load.count)


def run_time(spec: LoadSpec, load: LoadConfig) -> float:
    """Locust's ``-t``: the safety net, should the phase not end itself."""
    return expected_seconds(spec, load) + spec.request_timeout + SAFETY_S


def command_line(
    spec: LoadSpec,
    load: LoadConfig,
    host: str,
    port: int,
    *,
    role: str = "standalone",
    workers: int = 0,
    master_host: str = "127.0.0.1",
    master_port: int = 5557,
) -> list[str]:
    """argv of one Locust process; ``role`` is standalone, master or worker."""
    if role == "worker":
        return worker_command(master_host, master_port)
    users, rate = (
        (load.users, load.spawn_rate) if load.model == "closed" else (spec.generators,) * 2
    )
    if load.model == "closed" and spec.spikes:  # the spikes' users start with the others
        users += max(s.extra_users(load.users) for s in spec.spikes)
    argv = [
        *_BASE,
        "--headless",
        "--host", f"rsocket://{host}:{port}",
        "-u", str(users),
        "-r", str(rate),
        "-t", f"{math.ceil(run_time(spec, load))}s",
        "--stop-timeout", str(math.ceil(spec.request_timeout + 1)),
        "--exit-code-on-error", "0",
        "--lblab-spec", spec.to_json(),
        "--json-file", str(Path(spec.records_dir) / "locust_stats"),
    ]  # fmt: skip
    if role == "master":
        argv += [
            "--master", "--expect-workers", str(workers),
            "--expect-workers-max-wait", str(WORKERS_WAIT_S),
            "--master-bind-host", master_host, "--master-bind-port", str(master_port),
        ]  # fmt: skip
    argv.append("ClosedLoopUser" if load.model == "closed" else "OpenLoopUser")
    return argv


def worker_command(master_host: str, master_port: int) -> list[str]:
    """argv of one Locust worker; it learns the phase (users, spec) from the master."""
    return [*_BASE, "--worker", "--master-host", master_host, "--master-port", str(master_port)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocustRun:
    """The Locust processes of one phase."""

    children: list[Child] = field(default_factory=list)

    @property
    def main(self) -> Child:
        return self.children[0]

    def finished(self) -> bool:
        return not self.main.alive()

    def stop(self, timeout: float = 5.0) -> None:
        for child in self.children:
            stop(child, timeout=timeout)


def start(
    spec: LoadSpec,
    load: LoadConfig,
    host: str,
    port: int,
    workers: int,
    log: Path,
    *,
    expect: int = 0,
    bind: tuple[str, int] | None = None,
) -> LocustRun:
    """Start the phase's Locust: one process, or a master with ``workers`` local workers
    plus ``expect`` workers started elsewhere, all connecting to ``bind`` (HOST, PORT;
    default a free loopback port)."""
    Path(spec.records_dir).mkdir(parents=True, exist_ok=True)
    run = LocustRun()
    if workers + expect <= 0:
        run.children.append(launch("locust", command_line(spec, load, host, port), log))
        return run
    bind_host, bind_port = bind or ("127.0.0.1", free_port())
    master = command_line(
        spec, load, host, port, role="master", workers=workers + expect,
        master_host=bind_host, master_port=bind_port,
    )  # fmt: skip
    run.children.append(launch("locust master", master, log))
    # A wildcard bind is reachable on loopback; local workers connect there.
    connect = "127.0.0.1" if bind_host in ("0.0.0.0", "", "::") else bind_host
    worker = worker_command(connect, bind_port)
    for i in range(workers):
        run.children.append(launch(f"locust worker {i}", worker, log))
    return run


def launch(name: str, argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> Child:
    """Start ``argv`` logging to ``log``, with ``env`` added to this process's environment."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv,
            env=None if env is None else {**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() kills all of it
            preexec_fn=dies_with_this_process(),  # and nothing outlives the runner
        )
    return Child(name, popen, log_path=log)


def locust_request_count(records_dir: Path) -> int | None:
    """Locust's own count of requests (its final stats), to check the records against;
    None when it wrote none or could not write them whole (a full disk leaves it empty)."""
    try:
        stats = json.loads((records_dir / "locust_stats.json").read_bytes())
        return sum(int(e.get("num_requests", 0)) for e in stats)
    except (OSError, ValueError, TypeError, AttributeError):
        return None
