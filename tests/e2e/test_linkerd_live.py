"""Live ``slow``, ``pause`` and ``resume`` timeline events, and the scaled-down Linkerd
"Beyond Round Robin" preset: real servers, balancer and Locust on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from rsocket.payload import Payload as RPayload

from lblab.errors import ConfigError
from lblab.experiment.runconfig import RunConfig, resolve
from lblab.servers.slowdown import Slowdown, control_path, request_slowdown
from tests.e2e.test_run import assert_complete, manifest
from tests.integration.test_server import body, rsocket_client, running_server, work
from tests.run_fixture import run_lblab

# ---------------------------------------------------------------- the server's side


def test_sigusr1_slows_the_server_down_and_back(tmp_path: Path) -> None:
    async def service_ms(port: int) -> float:
        async with rsocket_client(port) as client:
            reply = await client.request_response(RPayload(work(100)))
            return float(body(reply)["service_ms"])

    with running_server(tmp_path, "--delay-ms", "20") as server:
        port = server.ready["port"]
        assert asyncio.run(service_ms(port)) < 150
        request_slowdown(server.pid, Slowdown(factor=2.0, add_ms=200.0))
        time.sleep(0.2)  # the handler runs on the server's event loop
        assert not control_path(server.pid).exists()  # consumed
        assert asyncio.run(service_ms(port)) >= 20 * 2 + 200
        request_slowdown(server.pid, Slowdown())
        time.sleep(0.2)
        assert asyncio.run(service_ms(port)) < 150
        # A bad control file is ignored: the server keeps its speed and keeps serving.
        control_path(server.pid).write_text("{not json")
        os.kill(server.pid, signal.SIGUSR1)
        time.sleep(0.2)
        assert asyncio.run(service_ms(port)) < 150
        control_path(server.pid).unlink(missing_ok=True)


# ---------------------------------------------------------------- config parsing

SERVERS = [{"id": "s1"}, {"id": "s2"}, {"id": "s3"}]


def _timeline(*events: dict) -> RunConfig:
    return resolve(None, {"servers": SERVERS, "timeline": list(events)}, {})


def test_slow_pause_resume_parse_with_their_options() -> None:
    config = _timeline(
        {"at": "1s", "action": "slow", "server": "s1", "factor": 3, "duration": "2s"},
        {"at": "2s", "action": "pause", "server": "s2", "duration": "500ms"},
        {"at": "4s", "action": "resume", "server": "s2"},
        {"at": "5s", "action": "slow", "server": "s2", "add_ms": 250},
    )
    slow, pause, resume, slow2 = config.timeline
    assert (slow.factor, slow.add_ms, slow.duration) == (3.0, 0.0, 2.0)
    assert (pause.action, pause.duration) == ("pause", 0.5)
    assert resume.duration is None
    assert (slow2.factor, slow2.add_ms, slow2.duration) == (1.0, 250.0, None)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"action": "slow"}, "slow needs factor > 1 or add_ms > 0"),
        ({"action": "slow", "factor": 0.5}, "slow.factor: 0.5 must be 1 or more"),
        ({"action": "slow", "add_ms": -1}, "slow.add_ms: -1.0 must be 0 or more"),
        ({"action": "slow", "factor": "fast"}, "timeline[0].factor"),
        ({"action": "pause", "factor": 2}, "factor do not apply to 'pause'"),
        ({"action": "resume", "duration": "1s"}, "duration do not apply to 'resume'"),
        ({"action": "kill", "add_ms": 5}, "add_ms do not apply to 'kill'"),
        ({"action": "slow", "factor": 2, "duration": "0s"}, "duration"),
        ({"action": "hang"}, "hang"),
    ],
)
def test_bad_timed_fault_is_one_clear_error(event: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _timeline({"at": "1s", "server": "s1", **event})
    assert message in str(err.value)


# ---------------------------------------------------------------- live events

EVENTS_CONFIG = """
preset = "tiny"
[run]
strategies = ["rr", "lc"]
scenarios = ["sp+sr"]
duration = "15s"
warmup = "0s"
request_timeout = "1s"
[load]
model = "open"
rate = 40
arrival = "constant"
# At 40 req/s of 20 ms each, lc mostly sees all backends idle: ties go at random, so
# every backend (s3 included) takes its share in the second phase.
[strategy_options.lc]
tie = "random"
[[servers]]
id = "s1"
workers = 16
max_inflight = 64
delay_ms = 20
[[servers]]
id = "s2"
workers = 16
max_inflight = 64
delay_ms = 20
[[servers]]
id = "s3"
workers = 16
max_inflight = 64
delay_ms = 20
[[timeline]]
at = "1s"
action = "slow"
server = "s1"
add_ms = 300
duration = "3s"
[[timeline]]
at = "5s"
action = "pause"
server = "s2"
[[timeline]]
at = "10s"
action = "resume"
server = "s2"
# Still paused when the phase ends: the testbed must resume s3 before the next phase.
[[timeline]]
at = "13s"
action = "pause"
server = "s3"
"""

HUNG_EJECTED_S = 4.5
"""A paused backend is silent; the balancer ejects it after five timeouts in a row
(1 s each here) or, at the latest, ``HUNG_AFTER_S`` (3 s) of silence, plus a tick."""


# Quiet: its windows are timed to the second around a slowdown and a pause, which a busy
# machine moves. Beside the parallel pass it failed twice on 2026-12-02, each time with
# its phase's own disturbance check failing (16-24 % of the CPUs taken by the other test
# workers): requests due before the pause, slowed to 320 ms, passed the client's 1 s
# deadline; and a stalled Locust sent two requests due before the resume after it.
@pytest.mark.slow
@pytest.mark.quiet
def test_slow_pause_resume_fire_and_take_effect(tmp_path: Path) -> None:
    config = tmp_path / "events.toml"
    config.write_text(EVENTS_CONFIG)
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 240)
    assert result.returncode == 0, result.stderr[-3000:]
    everything = assert_complete(run_dir)
    first, second = manifest(run_dir)["phases"]
    requests = everything[everything.strategy.eq(first["strategy"])]
    log = first["timeline"]
    assert [(e["action"], e["server"], e["ok"]) for e in log] == [
        ("slow", "s1", True), ("slow", "s1", True), ("pause", "s2", True),
        ("resume", "s2", True), ("pause", "s3", True),
    ]  # fmt: skip
    slow, normal, pause, resume, _ = log
    assert (slow["add_ms"], normal["add_ms"], normal["at"]) == (300.0, 0.0, 4.0)

    ok = requests[requests.ok]
    s1 = ok[ok.server.eq("s1")]
    during = s1[(s1.t_sent > slow["t_done"] + 0.1) & (s1.t_sent < normal["t"] - 0.5)]
    # A request still in its slot when the slowdown lands sleeps it too (the server reads
    # it at the end of the work): "outside" leaves half a second on both sides.
    outside = s1[(s1.t_sent < slow["t"] - 0.5) | (s1.t_sent > normal["t_done"] + 0.5)]
    assert len(during) > 5 and during.service_ms.min() >= 300, during.service_ms.describe()
    # A slowdown still in force would hold every request outside its window past 300 ms.
    # A busy machine stalls a few on its own (their server's CPU quota waits its turn):
    # beside a full parallel suite, 3 of 159 took 295-474 ms with the phase's
    # disturbance check failing. So: the median well under, and at most a tenth past it.
    assert len(outside) > 5 and outside.service_ms.median() < 100, outside.service_ms.describe()
    assert (outside.service_ms >= 300).mean() <= 0.1, outside.service_ms.describe()

    # The paused server's requests time out, and nothing sent to it while paused is
    # answered by it; other servers answer throughout.
    # When it was sent, not when it was due: the open model's ``t_sent`` is the intended
    # time, and a stalled Locust sent two requests due 0.1 s before the resume 0.3 s
    # after it (send lag 326 and 401 ms; s2 answered them, resumed).
    sent = requests.t_sent + requests.send_lag_ms.fillna(0.0) / 1000.0
    paused = requests[(sent > pause["t_done"]) & (sent < resume["t"])]
    assert paused.error_kind.eq("timeout").sum() >= 3
    assert not paused[paused.ok].server.eq("s2").any()
    before = requests[requests.t_sent < pause["t"] - 1.0]
    assert before.ok.all(), before[~before.ok].error_kind.value_counts().to_dict()

    # It is ejected: no picks for s2 from a few seconds into the pause to its resume.
    picks = pd.read_parquet(run_dir / "picks.parquet")
    s2 = picks[picks.strategy.eq(first["strategy"]) & picks.server.eq("s2")]
    assert s2[(s2.t > pause["t_done"] + HUNG_EJECTED_S) & (s2.t < resume["t"])].empty
    # Resumed, it serves again before the phase ends.
    assert ok[ok.server.eq("s2") & (ok.t_sent > resume["t_done"])].shape[0] > 0

    # s3, paused at the end of the first phase, was resumed for the second: it answers
    # there, and nothing fails before that phase's own pause.
    later = everything[everything.strategy.eq(second["strategy"])]
    early = later[later.t_sent < second["timeline"][2]["t"] - 1.0]
    assert early.ok.all(), early[~early.ok].error_kind.value_counts().to_dict()
    assert early.server.eq("s3").sum() > 5
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "done"


# ---------------------------------------------------------------- the linkerd preset


@pytest.mark.slow
def test_linkerd_preset_keeps_the_published_order_live(tmp_path: Path) -> None:
    run_dir = tmp_path / "linkerd"
    result = run_lblab(["run", "--preset", "linkerd", "--out", str(run_dir), "--no-report"], 240)
    assert result.returncode == 0, result.stderr[-3000:]
    requests = assert_complete(run_dir)
    figures = {}
    for phase in manifest(run_dir)["phases"]:
        slow, normal = phase["timeline"]
        rows = requests[
            requests.strategy.eq(phase["strategy"])
            & (requests.t_sent >= slow["t"])
            & (requests.t_sent < normal["t"])
        ]
        figures[phase["strategy"]] = (100.0 * rows.ok.mean(), rows.latency_ms.quantile(0.99))
    rr_ok, rr_p99 = figures["rr"]
    for name in ("lc", "peak-ewma"):
        ok_pct, p99 = figures[name]
        assert rr_ok < ok_pct or rr_p99 > p99, figures
