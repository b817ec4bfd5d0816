"""A server spawned by an lblab process stops when that process dies without stopping it
(SIGKILL, a test killed at its timeout): no unowned testbed loads later runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import psutil

OWNER = textwrap.dedent(
    """
    import sys, time
    from lblab.procs import lblab_command, spawn
    child = spawn("s1", lblab_command("server", "--id", "s1", "--port", "0"))
    print(child.popen.pid, flush=True)
    time.sleep(120)
    """
)


def test_a_spawned_server_stops_when_its_owner_is_killed():
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line.strip().isdigit(), line
        server = psutil.Process(int(line))
        assert server.is_running()
        owner.kill()
        owner.wait(10)
        deadline = time.monotonic() + 15
        while server.is_running() and server.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the server outlived its owner by 15 s"
            time.sleep(0.1)
    finally:
        owner.kill()


def test_a_server_started_by_hand_ignores_a_stale_owner_variable():
    """A stale LBLAB_PARENT_PID (not this process's parent) is not a reason to stop."""
    env = {"LBLAB_PARENT_PID": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lblab", "server", "--id", "s1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"lblab-ready "), "the server did not start"
        time.sleep(2.5)
        assert proc.poll() is None, "stopped although its parent is alive"
    finally:
        proc.terminate()
        proc.wait(10)
