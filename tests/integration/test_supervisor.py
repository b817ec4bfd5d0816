"""The supervisor that stands in for systemd on the namespace testbed (no root needed)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lblab.infra import supervisor

# A service that reports ready with a fact, then waits to be stopped.
READY = (
    "import json, os, signal, sys\n"
    "print('lblab-ready ' + json.dumps({'role': 'x', 'port': 1, 'arg': sys.argv[-1]}), flush=True)\n"
    "signal.sigwait([signal.SIGTERM])\n"
)


def _define(folder: Path, name: str, argv: list[str], ready: str = "line") -> None:
    (folder / "services" / f"{name}.json").write_text(json.dumps({"argv": argv, "ready": ready}))


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "services").mkdir()
    assert supervisor.ensure(tmp_path)
    assert not supervisor.ensure(tmp_path)  # a second ensure finds it running
    yield tmp_path
    daemon = psutil.Process(int((tmp_path / "supervisor.pid").read_text()))
    daemon.terminate()
    daemon.wait(timeout=20)
    # serve() stopped its services and removed its socket on the way out.
    assert not supervisor.socket_path(tmp_path).exists()


def _ctl(folder: Path, *args: str) -> tuple[int, dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "lblab.infra.supervisor", "ctl", "--dir", str(folder), *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return out.returncode, json.loads(out.stdout) if out.stdout else {"stderr": out.stderr}


def test_start_is_idempotent_and_placeholders_take_ready_facts(folder: Path) -> None:
    _define(folder, "server", [sys.executable, "-c", READY, "plain"])
    _define(folder, "agent", [sys.executable, "-c", READY, "{server.pid}"])

    code, reply = _ctl(folder, "start", "agent")
    assert code == 1 and "start it first" in str(reply)  # the server is not running yet

    code, reply = _ctl(folder, "start", "server")
    assert code == 0 and reply["changed"] is True
    server_pid = reply["service"]["pid"]  # type: ignore[index]
    assert _ctl(folder, "start", "server")[1]["changed"] is False

    code, reply = _ctl(folder, "start", "agent")
    assert code == 0
    assert reply["service"]["ready"]["arg"] == str(server_pid)  # type: ignore[index]

    status = _ctl(folder, "status")[1]["services"]
    assert status["server"]["running"] and status["agent"]["running"]  # type: ignore[index]

    assert _ctl(folder, "stop", "agent")[1]["changed"] is True
    assert _ctl(folder, "stop", "agent")[1]["changed"] is False
    assert _ctl(folder, "try-restart", "agent")[1]["changed"] is False  # not running: stays so
    code, reply = _ctl(folder, "restart", "server")
    assert code == 0 and reply["service"]["pid"] != server_pid  # type: ignore[index]


def test_bad_definitions_are_named(folder: Path) -> None:
    code, reply = _ctl(folder, "start", "nope")
    assert code == 1 and "no service 'nope'" in str(reply)
    (folder / "services" / "broken.json").write_text("{")
    assert "not valid JSON" in str(_ctl(folder, "start", "broken")[1])
    _define(folder, "dies", [sys.executable, "-c", "raise SystemExit(3)"])
    code, reply = _ctl(folder, "start", "dies")
    assert code == 1 and "exited with code 3" in str(reply)


def test_a_stop_signal_during_a_request_stops_the_supervisor(tmp_path: Path) -> None:
    """SIGTERM while ``start`` waits for a service's ready line ends the supervisor.

    socketserver catches ``Exception`` around each request; the signal's exception was
    one, so the supervisor logged it and served on."""
    (tmp_path / "services").mkdir()
    marker = f"mute-{tmp_path.name}"
    (tmp_path / "services" / "mute.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-c", "import time; time.sleep(120)", marker],
                "ready": "line",
                "ready_timeout": 120,
            }
        )
    )
    assert supervisor.ensure(tmp_path)
    daemon = psutil.Process(int((tmp_path / "supervisor.pid").read_text()))
    ctl = subprocess.Popen(
        [sys.executable, "-m", "lblab.infra.supervisor", "ctl", "--dir", str(tmp_path),
         "start", "mute"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not any(marker in p.cmdline() for p in daemon.children()):
            assert time.monotonic() < deadline, "the supervisor did not start the service"
            time.sleep(0.05)
        daemon.terminate()
        daemon.wait(timeout=10)
        _, err = ctl.communicate(timeout=10)  # its request ended with the supervisor
        assert ctl.returncode == 1 and "without an answer" in err and "Traceback" not in err
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            daemon.kill()
        ctl.kill()
        ctl.wait()
        for proc in psutil.process_iter(["cmdline"]):  # the service being started
            if marker in (proc.info["cmdline"] or []):
                proc.kill()
