"""``lblab notebooks RUN``: JupyterLab on the run's executed notebooks, seen in headless Chromium.

The command runs as a user would start it; the test reads the URL it prints, opens the
notebook in headless Chromium and asks the live page, over the DevTools protocol, for a
chart image that loaded (``naturalWidth > 0``) and takes up room on the page. Opening
the notebook starts a kernel; after SIGTERM to ``lblab`` neither JupyterLab nor the
kernel may be left.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import selectors
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
import websocket

from lblab.analysis.nbserver import descendants
from lblab.procs import lblab_command
from tests.integration.test_report import CHROMIUM_FLAGS, simulate
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

URL_PREFIX = "JupyterLab: "
SERVER_TIMEOUT_S = 150  # executing the notebook and starting JupyterLab, on 2 busy cores
CHART_TIMEOUT_S = 60
KERNEL_TIMEOUT_S = 60  # a kernel took over 30 s to start at a load average of 8 on 2 cores
STOP_TIMEOUT_S = 30
_CHART_PROBE = """(() => {
  const imgs = Array.from(document.querySelectorAll('.jp-OutputArea-output img'));
  const shown = imgs.filter(i => i.complete && i.naturalWidth > 0
                                 && i.getBoundingClientRect().height > 0);
  return JSON.stringify({images: imgs.length, shown: shown.length,
                         width: shown.length ? shown[0].naturalWidth : 0,
                         title: document.title});
})()"""


def read_line(popen: subprocess.Popen[bytes], prefix: str, timeout: float) -> tuple[str, str]:
    """The first stdout line starting with ``prefix``, and everything printed before it."""
    assert popen.stdout is not None
    seen, buf = "", b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(popen.stdout, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if not sel.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(popen.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in (raw.decode() for raw in lines):
                if line.startswith(prefix):
                    return line[len(prefix) :], seen
                seen += line + "\n"
    pytest.fail(f"no {prefix!r} line within {timeout} s (exit {popen.poll()}); stdout:\n{seen}")


class DevTools:
    """Headless Chromium on one page, driven over the DevTools protocol (loopback)."""

    def __init__(self, url: str, user_data: Path) -> None:
        exe = shutil.which("chromium")
        if exe is None:
            pytest.fail("chromium is not installed; run scripts/setup")
        self.popen = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={user_data}", "--window-size=1280,2000",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.ids = itertools.count(1)
        port_file = user_data / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "chromium wrote no DevToolsActivePort in 30 s"
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with no_proxy.open(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=20, suppress_origin=True
        )

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:  # events come in between; each recv has the socket's 20 s timeout
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                assert "error" not in message, message
                return dict(message["result"])

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression)["result"].get("value")

    def close(self) -> None:
        self.ws.close()
        os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)


def wait_for_chart(page: DevTools) -> dict[str, Any]:
    deadline = time.monotonic() + CHART_TIMEOUT_S
    while True:
        state = json.loads(page.evaluate(_CHART_PROBE))
        if state["shown"] > 0 or time.monotonic() > deadline:
            return dict(state)
        time.sleep(0.5)


def command_line(process: psutil.Process) -> str:
    """Its command line, or "" once it has exited (short-lived helpers come and go)."""
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:  # ZombieProcess too
        return ""


def jupyter_processes(lblab: psutil.Process) -> list[psutil.Process]:
    """The Jupyter servers under ``lblab``: not their own helpers, which a server forks
    with its command line until they exec (an npm seen that way was counted as a second
    server)."""
    found = [p for p in descendants(lblab.pid) if "jupyterlab" in command_line(p)]
    pids = {p.pid for p in found}
    return [p for p in found if _parent_pid(p) not in pids]


def _parent_pid(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.NoSuchProcess:
        return None


def kernels_of(servers: list[psutil.Process]) -> list[psutil.Process]:
    return [k for s in servers for k in descendants(s.pid)]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated run, shared by this module's tests."""
    return simulate(tmp_path_factory.mktemp("nbserver") / "sim")


@contextlib.contextmanager
def lblab_notebooks(*args: str, err: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``lblab notebooks ARGS`` in its own session; killed with its tree if still running."""
    popen = subprocess.Popen(
        lblab_command("notebooks", *args),
        stdout=subprocess.PIPE,
        stderr=open(err, "wb"),  # noqa: SIM115 - the child owns it
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield popen
    finally:
        if popen.poll() is None:
            tree = descendants(popen.pid)
            popen.kill()
            for process in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            popen.wait(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()


def wait_for_kernels(parents: list[psutil.Process]) -> list[psutil.Process]:
    deadline = time.monotonic() + KERNEL_TIMEOUT_S
    while not (kernels := kernels_of(parents)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert kernels, "no kernel started"
    return kernels


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_notebook_opens_executed_in_jupyterlab_and_nothing_is_left(
    sim_run: Path, tmp_path: Path
) -> None:
    with lblab_notebooks(str(sim_run), "--only", "overview", err=tmp_path / "lblab.err") as popen:
        check_served_and_stopped(popen, sim_run, tmp_path)


def check_served_and_stopped(popen: subprocess.Popen[bytes], run: Path, tmp_path: Path) -> None:
    url, before = read_line(popen, URL_PREFIX, SERVER_TIMEOUT_S)
    assert url.startswith("http://127.0.0.1:") and "/lab/tree/overview.ipynb?token=" in url
    assert f"executed: {run / 'notebooks' / 'overview.ipynb'}" in before
    servers = jupyter_processes(psutil.Process(popen.pid))
    assert len(servers) == 1, servers
    listening = [c.laddr for c in servers[0].net_connections("tcp") if c.status == "LISTEN"]
    assert listening and all(a.ip == "127.0.0.1" for a in listening), listening

    page = DevTools(url, tmp_path / "chromium")
    try:
        state = wait_for_chart(page)
        shot = tmp_path / "notebook.png"
        shot.write_bytes(base64.b64decode(page.call("Page.captureScreenshot")["data"]))
        # Opening the notebook starts a kernel, but the page asks for it after drawing
        # the saved outputs: closed before that (a busy machine), it never would.
        kernels = wait_for_kernels(servers)
    finally:
        page.close()
    assert state["shown"] > 0 and state["width"] > 100, state  # a chart, drawn, before any run
    assert "overview" in state["title"], state
    assert shot.stat().st_size > 20_000

    popen.send_signal(signal.SIGTERM)
    out, _ = popen.communicate(timeout=STOP_TIMEOUT_S)
    assert popen.returncode == 0, (tmp_path / "lblab.err").read_text()[-3000:]
    assert "JupyterLab stopped" in out.decode()
    _, alive = psutil.wait_procs(servers + kernels, timeout=5)
    assert not alive, f"left running: {alive}"
    leftovers = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(run / "notebooks") in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


@pytest.mark.slow
def test_sigterm_while_executing_shuts_the_kernels_down(sim_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "books"
    with lblab_notebooks(str(sim_run), "--only", "overview", "--only", "cpu", "--out", str(out),
                         err=tmp_path / "lblab.err") as popen:  # fmt: skip
        kernels = wait_for_kernels([psutil.Process(popen.pid)])
        popen.send_signal(signal.SIGTERM)
        popen.communicate(timeout=STOP_TIMEOUT_S)
    err = (tmp_path / "lblab.err").read_text()
    assert popen.returncode == 130, err[-3000:]
    assert "interrupted: the kernels are shut down" in err
    assert "lblab/cli.py" not in err and "analysis/nbrun.py" not in err  # no traceback of ours
    _, alive = psutil.wait_procs(kernels, timeout=5)
    assert not alive, f"left running: {alive}"


def test_an_unknown_notebook_name_or_a_folder_of_nothing_is_refused(
    sim_run: Path, tmp_path: Path
) -> None:
    result = run_lblab(["notebooks", str(sim_run), "--only", "nope"], timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--only nope: no such notebook for a run folder; choose from overview" in result.stderr
    result = run_lblab(["notebooks", str(tmp_path), "--only", "overview"], timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path} holds neither a run (manifest.json, requests.parquet) nor a sweep" in (
        result.stderr
    )


def test_no_server_only_writes_the_chosen_notebooks(tmp_path: Path) -> None:
    from lblab.analysis.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "syn", rows_per_unit=20, replications=1)
    result = run_lblab(["notebooks", str(run), "--no-server", "--only", "latency"], timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (run / "notebooks").iterdir()) == ["latency.ipynb"]
    notebook = nbformat.read(run / "notebooks" / "latency.ipynb", as_version=4)
    assert not [c for c in notebook.cells if c.get("execution_count")], "it was executed"
    assert "JupyterLab" in result.stdout  # the hint names the command that opens them
