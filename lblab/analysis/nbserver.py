"""JupyterLab on a run's notebooks: loopback only, a fresh token, nothing left behind.

JupyterLab runs in its own session (so the terminal's Ctrl-C reaches only lblab, which
then stops it) with a private runtime folder: the server writes its port there in
``jpserver-<pid>.json`` once it listens, which is how ``start`` learns the port it got
from the OS (``--ServerApp.port=0``). Kernels are started by the server in sessions of
their own; on SIGTERM the server shuts them down, and ``stop`` kills any it left.
Nothing reaches past loopback: the news feed, update check and PyPI extension manager are
off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from lblab.interrupts import raise_interrupt
from lblab.procs import Child, _log_tail
from lblab.procs import stop as stop_child

START_TIMEOUT_S = 120.0
"""JupyterLab imports its extensions first: 16 s on 2 busy cores, so leave room."""
STOP_TIMEOUT_S = 20.0
"""The server shuts its kernels down (about 5 s) before it exits."""
HOST = "127.0.0.1"
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Never through an HTTP proxy from the environment: the server is on this machine."""


class NotebookServerError(RuntimeError):
    """JupyterLab did not start; the message says why and ends with its log's last lines."""


@dataclass
class NotebookServer:
    """A running JupyterLab: its process, its base URL and token, and its log."""

    popen: subprocess.Popen[bytes]
    base_url: str
    token: str
    runtime_dir: Path
    log_path: Path

    def url(self, notebook: str) -> str:
        """The address that opens ``notebook`` (a file in the served folder), token included."""
        return f"{self.base_url}lab/tree/{notebook}?token={self.token}"


def start(notebook_dir: Path, log_path: Path, timeout: float = START_TIMEOUT_S) -> NotebookServer:
    """Start JupyterLab on ``notebook_dir`` bound to 127.0.0.1 and wait until it answers."""
    if importlib.util.find_spec("jupyterlab") is None:
        raise NotebookServerError(
            "JupyterLab is not installed in this environment; run scripts/setup "
            "(or `uv sync --frozen`) to install the locked dependencies"
        )
    token = secrets.token_hex(24)
    runtime_dir = Path(tempfile.mkdtemp(prefix="lblab-jupyter-"))
    argv = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        f"--ServerApp.ip={HOST}", "--ServerApp.port=0", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={notebook_dir.resolve()}",
        "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # No search for language servers (none is installed): it ran `npm prefix -g`, a
        # node process at every start where npm is on the PATH.
        "--LanguageServerManager.autodetect=False",
    ]  # fmt: skip
    if os.geteuid() == 0:
        argv.append("--allow-root")  # containers and CI run as root
    env = {**os.environ, "JUPYTER_TOKEN": token, "JUPYTER_RUNTIME_DIR": str(runtime_dir)}
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    server = NotebookServer(popen, "", token, runtime_dir, log_path)
    try:
        server.base_url = _wait_until_serving(server, timeout)
    except BaseException:
        stop(server)
        raise
    return server


def _wait_until_serving(server: NotebookServer, timeout: float) -> str:
    """The server's base URL, once its info file exists and ``/api/status`` answers."""
    deadline = time.monotonic() + timeout
    info_file = server.runtime_dir / f"jpserver-{server.popen.pid}.json"
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise NotebookServerError(
                f"JupyterLab exited with code {server.popen.returncode} while starting"
                + _log_tail(server.log_path)
            )
        if info_file.exists():
            with contextlib.suppress(ValueError, OSError):  # being written
                base_url = str(json.loads(info_file.read_text())["url"])
                if _answers(base_url, server.token):
                    return base_url
        time.sleep(0.25)
    raise NotebookServerError(
        f"JupyterLab did not answer within {timeout:.0f} s" + _log_tail(server.log_path)
    )


def _answers(base_url: str, token: str) -> bool:
    request = urllib.request.Request(
        f"{base_url}api/status", headers={"Authorization": f"token {token}"}
    )
    try:
        with _LOOPBACK.open(request, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def serve(notebook_dir: Path, log_path: Path, on_ready: Callable[[NotebookServer], None]) -> None:
    """Start JupyterLab, call ``on_ready``, serve until Ctrl-C, SIGTERM or its own shutdown
    (File > Shut Down), then stop it. An interrupt while it starts stops it too."""
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    server = None
    try:
        server = start(notebook_dir, log_path)
        on_ready(server)
        while server.popen.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.popen.wait(timeout=1)
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None:
            stop(server)
        signal.signal(signal.SIGTERM, previous)


def stop(server: NotebookServer) -> None:
    """Stop the server and every kernel it started; remove its runtime folder.

    Signals are ignored meanwhile: a second Ctrl-C must not leave the cleanup half done.
    """
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        kernels = descendants(server.popen.pid)
        stop_child(Child("jupyterlab", server.popen), timeout=STOP_TIMEOUT_S)
        _, alive = psutil.wait_procs(kernels, timeout=5)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(alive, timeout=5)
        shutil.rmtree(server.runtime_dir, ignore_errors=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below ``pid``, or none once it has exited."""
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []
