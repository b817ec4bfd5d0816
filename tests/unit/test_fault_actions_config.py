"""The ``fail``, ``reject``, ``cold``, ``capacity`` and ``spike`` timeline actions:
their keys checked at load (one line naming the key), and the sans-I/O pieces the live
server and the simulator share (token bucket, cold-start curve, spike time warp, the
control request)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from lblab.errors import ConfigError
from lblab.experiment.runconfig import RunConfig, resolve
from lblab.experiment.spikes import Spike, TimeWarp
from lblab.experiment.timeline import undo
from lblab.servers.behaviour import ColdStart, Failing, RateLimit, TokenBucket
from lblab.servers.slowdown import Control, Slowdown

SERVERS = [{"id": "s1", "cpu_quota": 0.5}, {"id": "s2"}]


def config(*events: dict[str, Any], kind: str = "local") -> RunConfig:
    raw = {"servers": SERVERS, "weights": {}, "timeline": list(events), "testbed": {"kind": kind}}
    return resolve(None, raw, {})


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"action": "fail", "server": "s1", "rat": 0.3},
            "timeline[0]: unknown key 'rat' for 'fail'",
        ),
        ({"action": "fail", "server": "s1"}, "timeline[0]: fail needs rate, e.g. rate = 0.3"),
        (
            {"action": "fail", "server": "s1", "rate": 1.5},
            "timeline[0].rate: 1.5 must be at most 1",
        ),
        ({"action": "fail", "server": "s1", "rate": 0}, "timeline[0].rate: 0.0 must be above 0"),
        ({"action": "fail", "server": "s1", "rate": 0.1, "delay_ms": -1}, "timeline[0].delay_ms"),
        (
            {"action": "fail", "server": "s1", "rate": 0.1, "factor": 2},
            "factor do not apply to 'fail'",
        ),
        ({"action": "reject", "server": "s1"}, "reject needs limit"),
        ({"action": "reject", "server": "s1", "limit": -5}, "timeline[0].limit"),
        ({"action": "cold", "server": "s1", "factor": 5}, "cold needs duration"),
        ({"action": "cold", "server": "s1", "factor": 0.5, "duration": "2s"}, "timeline[0].factor"),
        ({"action": "capacity", "server": "s1"}, "capacity needs cpu_quota"),
        ({"action": "capacity", "server": "s2", "cpu_quota": 0.5}, "s2 has none"),
        ({"action": "capacity", "server": "s1", "cpu_quota": 99}, "timeline[0].cpu_quota"),
        ({"action": "spike", "factor": 3}, "spike needs duration"),
        ({"action": "spike", "server": "s1", "factor": 3, "duration": "1s"}, "timeline[0].server"),
        ({"action": "spike", "factor": 1000, "duration": "1s"}, "timeline[0].factor"),
        ({"action": "kill", "server": "s1", "weight": 2}, "weight do not apply to 'kill'"),
    ],
)
def test_a_bad_key_is_one_line_naming_it(event: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config({"at": "1s", **event})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_actions_parse_with_their_defaults() -> None:
    fail, reject, cold, capacity, spike = config(
        {"at": "1s", "action": "fail", "server": "s1", "rate": 0.3},
        {"at": "1s", "action": "reject", "server": "s2", "limit": 100, "duration": "2s"},
        {"at": "0s", "action": "cold", "server": "s1", "factor": 5, "duration": "10s"},
        {"at": "3s", "action": "capacity", "server": "s1", "cpu_quota": 1.5},
        {"at": "2s", "action": "spike", "factor": 3, "duration": "5s"},
    ).timeline
    assert fail.control() == Control(fail=Failing(0.3, 1.0))
    assert reject.control() == Control(reject=RateLimit(100.0, 0.0))
    assert cold.control() == Control(cold=ColdStart(5.0, 10.0))
    assert capacity.control() == Control(cpu_quota=1.5)
    assert spike.server == "" and spike.spike() == Spike(2.0, 5.0, 3.0)
    # fail and reject with a duration undo themselves; cold and spike end by themselves.
    off = undo(reject)
    assert off is not None and (off.at, off.control()) == (3.0, Control(reject=RateLimit()))
    assert undo(fail) is None and undo(cold) is None


def test_an_event_may_name_a_server_an_earlier_add_brought_in() -> None:
    add, kill = config(
        {"at": "2s", "action": "add", "server": "s4", "cpu_quota": 0.5},
        {"at": "5s", "action": "capacity", "server": "s4", "cpu_quota": 0.25},
    ).timeline
    assert (add.action, kill.server) == ("add", "s4")
    with pytest.raises(ConfigError, match=r"timeline\[1\].server: 's4' is not one of"):
        config(
            {"at": "6s", "action": "add", "server": "s4"},
            {"at": "5s", "action": "kill", "server": "s4"},
        )


def test_overlapping_spikes_are_refused() -> None:
    with pytest.raises(ConfigError, match="spikes of a scenario may not overlap"):
        config(
            {"at": "1s", "action": "spike", "factor": 2, "duration": "3s"},
            {"at": "2s", "action": "spike", "factor": 2, "duration": "1s"},
        )


def test_token_bucket_admits_its_burst_then_its_rate() -> None:
    bucket = TokenBucket(100.0, 10.0, now=0.0)
    assert sum(bucket.take(0.0) for _ in range(50)) == 10
    # 200 offered a second for 10 s: 100 a second admitted.
    admitted = sum(bucket.take(k / 200) for k in range(1, 2001))
    assert admitted == pytest.approx(1000, abs=2)
    assert RateLimit(100).tokens == 10 and RateLimit(5).tokens == 1
    assert RateLimit().bucket(0.0) is None


def test_cold_start_is_linear_in_time() -> None:
    cold = ColdStart(5.0, 10.0).starting(100.0)
    assert [cold.factor_at(100.0 + t) for t in (0, 2.5, 5, 10, 20)] == [5.0, 4.0, 3.0, 1.0, 1.0]
    assert ColdStart().factor_at(3.0) == 1.0


def test_fail_draws_at_its_rate() -> None:
    rng = random.Random(1)
    assert sum(Failing(0.3).fails(rng) for _ in range(10_000)) == pytest.approx(3000, abs=150)
    assert not Failing(0.0).fails(rng)


def test_time_warp_sends_factor_times_as_many_during_a_spike() -> None:
    warp = TimeWarp([Spike(2.0, 2.0, 3.0)])
    sends = [warp.real(k / 100) for k in range(int(warp.base(6.0) * 100))]
    per_second = [sum(1 for t in sends if s <= t < s + 1) for s in range(6)]
    assert per_second == [100, 100, 300, 300, 100, 100]
    for t in (0.5, 2.5, 3.99, 5.0):
        assert warp.real(warp.base(t)) == pytest.approx(t)


def test_control_requests_round_trip_and_merge() -> None:
    control = Control(slow=Slowdown(2.0, 5.0), fail=Failing(0.3, 2.0), cpu_quota=0.5)
    assert Control.from_json(control.to_json()) == control
    later = control.merged(Control(fail=Failing(0.0), reject=RateLimit(10.0)))
    assert later == Control(
        slow=Slowdown(2.0, 5.0), fail=Failing(0.0), reject=RateLimit(10.0), cpu_quota=0.5
    )
    with pytest.raises(ValueError):
        Control.from_json('{"explode": 1}')
