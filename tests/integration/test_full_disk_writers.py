"""A full disk under the writers of a run: each says so once, counts what it dropped,
goes on, and writes again once there is room; no half line or half file is left."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

import pytest
from rsocket.payload import Payload

from lblab.files import AppendLog
from lblab.loadtests.record_table import read_records
from lblab.loadtests.records import RequestRecorder, read_progress
from lblab.procs import lblab_command, spawn
from lblab.scenarios import request_body
from lblab.wire.metadata import request_metadata
from tests.full_disk import fill, needs_root, small_filesystem
from tests.integration.balancer_testbed import (
    processes,
    rsocket_client,
    start_balancer,
    start_server,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.root, needs_root]


def send(port: int, n: int) -> list[bytes]:
    async def scenario() -> list[bytes]:
        async with rsocket_client(port) as client:
            body, meta = request_body(100, 1000), request_metadata()
            replies = [await client.request_response(Payload(body, meta)) for _ in range(n)]
            return [r.data for r in replies]

    return asyncio.run(asyncio.wait_for(scenario(), 30))


def picks_in(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_the_balancer_forwards_on_a_full_disk_drops_its_picks_once_and_writes_again(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", 1) as fs:
        picks = fs / "picks.jsonl"
        server = start_server("s1", tmp_path)
        with processes(server):
            balancer = start_balancer([server], tmp_path, "--picks", str(picks))
            with processes(balancer):
                port = balancer.ready["port"]
                assert len(send(port, 20)) == 20
                wait_for(lambda: len(picks_in(picks)) == 20, 5, "the first picks")
                filler = fill(fs)
                assert len(send(port, 50)) == 50  # forwarding goes on
                log = tmp_path / "balancer.log"
                wait_for(lambda: "No space left" in log.read_text(), 5, "the warning")
                filler.unlink()
                assert len(send(port, 30)) == 30
                wait_for(lambda: len(picks_in(picks)) >= 50, 5, "the picks written again")
        text = log.read_text()
        assert "Traceback" not in text and "tick failed" not in text, text[-3000:]
        assert text.count("No space left") == 1, text[-3000:]
        assert "is written again" in text
        lines = picks_in(picks)  # every line whole: each parses
        assert len(lines) == 50 and all(p["server"] == "s1" for p in lines)
        assert "50 lines were dropped for lack of room" in text


def test_the_request_recorder_keeps_what_a_full_disk_refused_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_filesystem(tmp_path / "fs", 1) as fs:
        folder = fs / "run" / "raw" / "phases" / "r1-000-x" / "a1-000000"
        recorder = RequestRecorder(folder)
        filler = fill(fs)

        def add(n: int) -> None:
            for i in range(n):
                recorder.add(float(i), 1.0, None, None, 100, 1000, "s1", "sp+sr")

        with caplog.at_level(logging.WARNING):
            add(300)
            recorder.flush()
            add(200)
            recorder.flush()
        assert [r.getMessage() for r in caplog.records if "No space left" in r.getMessage()]
        assert sum("No space left" in r.getMessage() for r in caplog.records) == 1
        assert read_records(folder).num_rows == 0  # nothing half-written
        assert not list(folder.glob(".*.tmp"))
        filler.unlink()
        recorder.flush()
        assert read_records(folder).num_rows == 500
        assert read_progress(folder) == (500, 0)
        assert recorder.dropped == 0
        (chunk,) = folder.glob("requests-*.json")
        assert len(json.loads(chunk.read_text())["t_sent"]) == 500


def test_an_agent_on_a_full_disk_keeps_sampling_says_so_once_and_writes_again(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", 1) as fs:
        out = fs / "cpu.jsonl"
        agent = spawn(
            "agent",
            lblab_command(
                "agent", "--server", "s1", "--pid", str(os.getpid()),
                "--report-to", "127.0.0.1:9", "--out", str(out), "--interval", "0.05",
            ),
            log_path=tmp_path / "agent.log",
        )  # fmt: skip
        with processes(agent):
            wait_for(lambda: len(out.read_bytes().splitlines()) >= 5, 5, "the first samples")
            filler = fill(fs)
            log = tmp_path / "agent.log"
            wait_for(lambda: "No space left" in log.read_text(), 5, "the warning")
            time.sleep(0.5)
            assert agent.alive()  # it samples on
            filler.unlink()
            before = len(out.read_bytes().splitlines())
            wait_for(lambda: len(out.read_bytes().splitlines()) > before + 3, 5, "samples again")
        assert agent.popen.returncode == 0
        text = log.read_text()
        assert text.count("No space left") == 1 and "Traceback" not in text, text[-2000:]
        assert "is written again" in text and "lines were dropped for lack of room" in text
        for line in out.read_bytes().splitlines():  # every line whole
            assert json.loads(line)["server"] == "s1"


def test_an_append_log_at_the_edge_of_a_full_disk_warns_once_per_spell(tmp_path, caplog):
    """A short batch that would fit into the unused end of the file's last page is not
    taken as room again: the spell of failures lasts until the disk has room, with one
    warning at its start and one at its end (it once flapped: two of each)."""
    log = logging.getLogger("test.appendlog")
    with small_filesystem(tmp_path / "fs", 1) as fs:
        out = AppendLog(fs / "lines.jsonl", log)
        assert out.append(b"1\n", 1)  # one page holds it, with room to spare
        filler = fill(fs)
        with caplog.at_level(logging.WARNING, logger="test.appendlog"):
            assert not out.append(b"x" * 8191 + b"\n", 1)  # needs pages the disk has not
            assert not out.append(b"2\n", 1)  # would fit the first page's end: not tried
            filler.unlink()
            assert out.append(b"3\n", 1)
        out.close()
        assert (fs / "lines.jsonl").read_bytes() == b"1\n3\n"
    messages = [r.getMessage() for r in caplog.records if r.name == "test.appendlog"]
    assert len(messages) == 3, messages  # the spell's start, its end, and close's count
    assert "No space left" in messages[0]
    assert "is written again (2 lines dropped so far)" in messages[1]
    assert out.dropped == 2
