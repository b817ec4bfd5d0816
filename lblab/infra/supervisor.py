"""A small service manager for hosts without systemd (the namespace testbed).

It plays systemd's part for the ansible roles: one long-running ``serve`` process per
host owns the host's lblab services and answers a unix socket ``<dir>/supervisor.sock``;
``ctl`` is the client the roles call. A service is a JSON file
``<dir>/services/<name>.json`` written by a role template::

    {"argv": [...], "env": {...}, "log": "/path/x.log",
     "ready": "line" | "none", "ready_timeout": 30}

``ready: line`` waits for the ``lblab-ready`` line (``lblab.procs.spawn``), so ``start``
returns only once the service serves, with its readiness facts. An argument written
``{server.pid}`` is replaced at start by that fact of the running service ``server``:
this is how an agent learns the pid of the server it measures, while the definitions
stay static files (so provisioning twice changes nothing). A service that exits stays
exited (an experiment must see a crash, not hide it); ``status`` reports its exit code.

CPU limits are the services' own business (``lblab server --cpu-quota`` joins a cgroup
v1 group itself): on the namespace testbed this supervisor is started by ``lblab
testbed up`` in the host's mount namespace, so its children see ``/sys/fs/cgroup``.

Every reply is one JSON line ``{"ok": bool, "changed": bool, ...}`` so ansible can set
``changed_when`` from it, and ``ctl`` exits 1 on ``ok: false`` with the error on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lblab.procs import Child, ProcessFailed, spawn, stop

STOP_TIMEOUT_S = 15.0
CLIENT_TIMEOUT_S = 120.0
_PLACEHOLDER = re.compile(r"\{([A-Za-z][\w-]*)\.(\w+)\}")


def socket_path(folder: Path) -> Path:
    return folder / "supervisor.sock"


class ServiceError(Exception):
    """A request the supervisor cannot carry out; the message goes back to the caller."""


class Supervisor:
    """The services of one host: definitions on disk, children in memory."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.children: dict[str, Child] = {}

    # -- definitions --

    def definition(self, name: str) -> dict[str, Any]:
        path = self.folder / "services" / f"{name}.json"
        try:
            spec = json.loads(path.read_text())
        except FileNotFoundError:
            known = sorted(p.stem for p in (self.folder / "services").glob("*.json"))
            raise ServiceError(f"no service {name!r} (no {path}); known: {known}") from None
        except json.JSONDecodeError as exc:
            raise ServiceError(f"{path} is not valid JSON: {exc}") from None
        if not isinstance(spec.get("argv"), list) or not spec["argv"]:
            raise ServiceError(f"{path}: 'argv' must be a non-empty list of strings")
        if spec.get("ready", "none") not in ("line", "none"):
            raise ServiceError(f"{path}: 'ready' must be 'line' or 'none', not {spec['ready']!r}")
        return spec

    # -- operations --

    def start(self, name: str) -> bool:
        if self.running(name):
            return False
        spec = self.definition(name)
        argv = [self._expand(str(a)) for a in spec["argv"]]
        env = {**os.environ, **{k: str(v) for k, v in spec.get("env", {}).items()}}
        log = Path(spec.get("log") or self.folder / "logs" / f"{name}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        if spec.get("ready") == "line":
            try:
                child = spawn(
                    name,
                    argv,
                    ready_timeout=float(spec.get("ready_timeout", 30)),
                    log_path=log,
                    env=env,
                )
            except ProcessFailed as exc:
                raise ServiceError(str(exc)) from None
        else:
            with log.open("ab") as out:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                    env=env,
                )
            child = Child(name, popen, log_path=log)
        self.children[name] = child
        return True

    def stop(self, name: str) -> bool:
        child = self.children.get(name)
        if child is None:
            return False
        was_running = child.alive()
        stop(child, timeout=STOP_TIMEOUT_S)
        del self.children[name]  # only once stopped: a stop cut short leaves it for stop_all
        return was_running

    def running(self, name: str) -> bool:
        child = self.children.get(name)
        return child is not None and child.alive()

    def status(self) -> dict[str, Any]:
        out = {}
        for name in sorted(
            {*self.children, *(p.stem for p in (self.folder / "services").glob("*.json"))}
        ):
            child = self.children.get(name)
            out[name] = {
                "running": self.running(name),
                "pid": child.pid if child else None,
                "returncode": child.popen.poll() if child else None,
                "ready": child.ready if child else {},
            }
        return out

    def stop_all(self) -> None:
        for name in list(self.children):
            self.stop(name)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op, name = request.get("op"), request.get("name")
        if op == "status":
            return {"ok": True, "changed": False, "services": self.status()}
        if op == "ping":
            return {"ok": True, "changed": False, "pid": os.getpid()}
        if not isinstance(name, str) or not name:
            raise ServiceError(f"op {op!r} needs a service name")
        if op == "start":
            changed = self.start(name)
        elif op == "stop":
            changed = self.stop(name)
        elif op == "restart":
            self.stop(name)
            changed = self.start(name)
        elif op == "try-restart":
            changed = self.running(name) and (self.stop(name) or True) and self.start(name)
        else:
            raise ServiceError(
                f"unknown op {op!r}; ops are start, stop, restart, try-restart, status, ping"
            )
        return {"ok": True, "changed": changed, "service": self.status().get(name, {})}

    def _expand(self, arg: str) -> str:
        """``{server.pid}`` -> the ``pid`` readiness fact of the running service ``server``."""
        m = _PLACEHOLDER.fullmatch(arg)
        if not m:
            return arg
        service, fact = m.groups()
        if not self.running(service):
            raise ServiceError(f"{arg} needs the service {service!r} running; start it first")
        child = self.children[service]
        value = {"pid": child.pid, **child.ready}.get(fact)
        if value is None:
            raise ServiceError(f"{arg}: service {service!r} did not report {fact!r} when ready")
        return str(value)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline(65536)
        try:
            reply = self.server.supervisor.handle(json.loads(line))
        except ServiceError as exc:
            reply = {"ok": False, "changed": False, "error": str(exc)}
        except (json.JSONDecodeError, AttributeError):
            reply = {"ok": False, "changed": False, "error": f"bad request {line[:200]!r}"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class _Server(socketserver.UnixStreamServer):
    """One request at a time: operations on services never interleave."""

    def __init__(self, path: Path, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        super().__init__(str(path), _Handler)


class _Stop(BaseException):
    """SIGTERM/SIGINT, raised wherever the main thread is. Not an ``Exception``:
    socketserver catches ``Exception`` around each request and serves on, so a signal
    that arrived during a ``start`` or ``stop`` was lost and the supervisor never exited."""


def serve(folder: Path) -> None:
    """Run the supervisor in the foreground until SIGTERM/SIGINT, then stop every service."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "services").mkdir(exist_ok=True)
    path = socket_path(folder)
    if ping(folder):
        raise SystemExit(f"a supervisor already serves {path}")
    path.unlink(missing_ok=True)
    supervisor = Supervisor(folder)

    def on_signal(signum: int, frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):  # once: a second must not cut stop_all short
            signal.signal(sig, signal.SIG_IGN)
        raise _Stop

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # Bind to a temporary name and rename: the socket appears only when it accepts.
    tmp = folder / f".supervisor.{os.getpid()}.sock"
    server = _Server(tmp, supervisor)
    os.replace(tmp, path)
    (folder / "supervisor.pid").write_text(f"{os.getpid()}\n")
    try:
        server.serve_forever(poll_interval=0.5)
    except _Stop:
        pass
    finally:
        server.server_close()
        supervisor.stop_all()
        path.unlink(missing_ok=True)
        (folder / "supervisor.pid").unlink(missing_ok=True)


def request(
    folder: Path, payload: dict[str, Any], timeout: float = CLIENT_TIMEOUT_S
) -> dict[str, Any]:
    """Send one request to the supervisor of ``folder`` and return its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(socket_path(folder)))
        sock.sendall(json.dumps(payload).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the supervisor closed the connection without an answer")
            data += chunk
    return json.loads(data)


def ping(folder: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):
        return bool(request(folder, {"op": "ping"}, timeout=5.0).get("ok"))
    return False


def ensure(folder: Path, timeout: float = 15.0) -> bool:
    """Start a background supervisor unless one answers; True if one was started."""
    if ping(folder):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "supervisor.log").open("ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "lblab.infra.supervisor", "serve", "--dir", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while not ping(folder):
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the supervisor did not start within {timeout:.0f}s; see {folder}/supervisor.log"
            )
        time.sleep(0.05)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lblab.infra.supervisor", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("serve", "ensure", "ctl"):
        p = sub.add_parser(command)
        p.add_argument("--dir", type=Path, required=True, help="the supervisor's folder")
        if command == "ctl":
            p.add_argument("op", choices=["start", "stop", "restart", "try-restart", "status"])
            p.add_argument("name", nargs="?")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.dir)
        return 0
    if args.command == "ensure":
        print(json.dumps({"ok": True, "changed": ensure(args.dir)}))
        return 0
    try:
        reply = request(args.dir, {"op": args.op, "name": args.name})
    except OSError as exc:
        print(f"error: no supervisor answers at {socket_path(args.dir)} ({exc})", file=sys.stderr)
        return 1
    print(json.dumps(reply))
    if not reply.get("ok"):
        print(f"error: {reply.get('error')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
