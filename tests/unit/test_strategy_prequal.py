"""``prequal`` to its exact behaviour (fake clock, seeded rng), the server's per-RIF latency
record and probe answer, and the balancer's ``Prober`` on fake connections."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from test_router import FakeBackend

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.probes import PROBE_TIMEOUT_S, Prober
from lblab.balancer.strategies.base import BackendView, Health, RequestView
from lblab.balancer.strategies.prequal import Prequal, PrequalConfig
from lblab.balancer.streams import BackendPort
from lblab.errors import ConfigError, RemoteProtocolError
from lblab.loadreport import ProbeAnswer, RifLatency
from lblab.wire.codec import encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Cancel, Error, Payload, RequestResponse
from lblab.wire.metadata import PROBE_METADATA

REQ = RequestView(request_id=1)


def bed(n: int, **options: object) -> tuple[Prequal, list[BackendView]]:
    strategy = Prequal(PrequalConfig(**options), rng=random.Random(7))  # type: ignore[arg-type]
    views = [BackendView(id=f"s{i + 1}", index=i) for i in range(n)]
    strategy.on_pool_change(views, 0.0)
    return strategy, views


def ids(strategy: Prequal) -> list[str]:
    return [p.backend.id for p in strategy.pool]


# ---------------------------------------------------------------- the pool


def test_the_pool_holds_at_most_pool_size_probes_the_oldest_leaving():
    strategy, views = bed(20)
    for t, view in enumerate(views):
        strategy.on_probe(view, 0, 1.0, float(t) / 100)
    assert ids(strategy) == [f"s{i}" for i in range(5, 21)]


def test_a_newer_answer_replaces_the_backends_older_probe():
    strategy, views = bed(3)
    strategy.on_probe(views[0], 4, 9.0, 0.0)
    strategy.on_probe(views[1], 1, 2.0, 0.1)
    strategy.on_probe(views[0], 0, 1.0, 0.2)
    assert [(p.backend.id, p.rif, p.at) for p in strategy.pool] == [("s2", 1, 0.1), ("s1", 0, 0.2)]


def test_probes_older_than_max_age_leave_at_the_pick():
    strategy, views = bed(4, q_rif=1.0)
    strategy.on_probe(views[0], 0, 1.0, 0.0)
    for view, latency in zip(views[1:], (2.0, 3.0, 4.0), strict=True):
        strategy.on_probe(view, 0, latency, 0.5)
    assert strategy.pick(views, REQ, 1.0) is views[0]  # exactly 1 s old: still usable
    strategy.on_probe(views[0], 0, 1.0, 0.0)
    assert strategy.pick(views, REQ, 1.25) is views[1]  # s1's probe is 1.25 s old: gone
    assert "s1" not in ids(strategy)


def test_a_probe_is_used_at_most_its_budget_then_leaves():
    strategy, views = bed(6, q_rif=1.0, max_reuse=2)
    for i, view in enumerate(views):
        strategy.on_probe(view, 0, float(i + 1), 0.0)
    assert [p.budget for p in strategy.pool] == [2] * 6  # n <= pool_size: max_reuse
    assert strategy.pick(views, REQ, 0.0) is views[0]
    assert strategy.pick(views, REQ, 0.0) is views[0]  # the second and last use
    # removed: s6 (the worst) after the first pick, s1 (used up) and s2 (the oldest: all
    # answered at 0, so the first in the pool) at the second
    assert ids(strategy) == ["s3", "s4", "s5"]
    assert strategy.pick(views, REQ, 0.0) is views[2]


@pytest.mark.parametrize(("r_probe", "budget"), [(3.0, 3), (4.0, 2), (5.0, 2)])
def test_the_reuse_budget_follows_the_papers_formula(r_probe, budget):
    # n = 32, m = 16: b = 1 + 1 / (0.5 * r_probe - 1): 3 at 3 probes, 2 at 4, 1.667 at 5
    # (randomly rounded to 1 or 2).
    strategy, views = bed(32, r_probe=r_probe)
    budgets = set()
    for view in views[:16]:
        strategy.on_probe(view, 0, 1.0, 0.0)
        budgets |= {p.budget for p in strategy.pool}
    assert budgets == ({1, 2} if r_probe == 5.0 else {budget})


def test_the_budget_is_max_reuse_where_the_formula_is_undefined():
    strategy, views = bed(32, r_probe=2.0, max_reuse=5)  # (1 - 16/32) * 2 - 1 = 0
    strategy.on_probe(views[0], 0, 1.0, 0.0)
    assert strategy.pool[0].budget == 5


def test_each_query_removes_one_probe_alternately_the_worst_and_the_oldest():
    strategy, views = bed(8, q_rif=1.0, max_reuse=100)
    # s1..s8 answered in that order; the newest (s8) is the fastest, the worst are inside.
    latencies = [5.0, 4.0, 7.0, 2.0, 9.0, 3.0, 8.0, 1.0]
    for i, view in enumerate(views):
        strategy.on_probe(view, 0, latencies[i], i / 10)
    removed = []
    for _ in range(6):
        before = set(ids(strategy))
        assert strategy.pick(views, REQ, 1.0) is views[7]  # the lowest latency, never used up
        removed.append((before - set(ids(strategy))).pop())
    # worst (9 ms: s5), oldest (s1), worst (8: s7), oldest (s2), worst (7: s3), oldest (s4)
    assert removed == ["s5", "s1", "s7", "s2", "s3", "s4"]


def test_the_worst_is_the_hottest_probe_when_any_is_hot():
    strategy, views = bed(4, max_reuse=100)
    for view, rif in zip(views, (1, 2, 3, 4), strict=True):
        strategy.on_probe(view, rif, 1.0, 0.0)
    # window [1, 2, 3, 4], q 0.84: sorted[floor(0.84 * 3)] = 3; s4 (rif 4) is hot.
    assert strategy.threshold() == 3
    strategy.pick(views, REQ, 0.0)
    assert "s4" not in ids(strategy)


# ---------------------------------------------------------------- hot-cold lexicographic


def test_cold_probes_win_by_latency_a_hot_one_is_passed_over():
    strategy, views = bed(3)
    strategy.on_probe(views[0], 10, 1.0, 0.0)  # fastest, but hot
    strategy.on_probe(views[1], 1, 5.0, 0.0)
    strategy.on_probe(views[2], 2, 3.0, 0.0)
    assert strategy.threshold() == 2  # sorted [1, 2, 10][floor(0.84 * 2)]
    assert strategy.pick(views, REQ, 0.0) is views[2]


def test_the_quantile_is_over_the_last_rif_window_answers():
    strategy, views = bed(2, rif_window=3, q_rif=0.5)
    for rif in (9, 9, 9, 1, 2, 3):
        strategy.on_probe(views[0], rif, 1.0, 0.0)
    assert list(strategy.window) == [1, 2, 3]
    assert strategy.threshold() == 2


def test_when_all_are_hot_the_lowest_rif_wins():
    strategy, views = bed(3, q_rif=0.0)
    strategy.on_probe(views[0], 0, 1.0, 0.0)  # enters the window, then is replaced
    strategy.on_probe(views[0], 5, 1.0, 0.1)
    strategy.on_probe(views[1], 4, 9.0, 0.1)
    strategy.on_probe(views[2], 6, 2.0, 0.1)
    assert strategy.threshold() == 0
    assert strategy.pick(views, REQ, 0.2) is views[1]


def test_equal_latencies_go_to_the_lower_rif_then_count_as_a_tie():
    strategy, views = bed(3, q_rif=1.0)
    strategy.on_probe(views[0], 3, 4.0, 0.0)
    strategy.on_probe(views[1], 2, 4.0, 0.0)
    assert strategy.pick(views, REQ, 0.0) is views[1]
    assert strategy.ties == 0
    strategy, views = bed(3, q_rif=1.0)
    strategy.on_probe(views[0], 2, 4.0, 0.0)
    strategy.on_probe(views[1], 2, 4.0, 0.1)
    assert strategy.pick(views, REQ, 0.2) is views[1]  # the newer answer
    assert strategy.ties == 1


# ---------------------------------------------------------------- fallbacks and eligibility


def test_fewer_than_two_usable_probes_pick_uniformly_at_random():
    strategy, views = bed(3)
    counts: Counter[str] = Counter()
    for t in range(3000):
        strategy.on_probe(views[0], 0, 1.0, float(t))  # one probe: never enough
        view = strategy.pick(views, REQ, float(t))
        assert view is not None
        counts[view.id] += 1
    assert strategy.fallbacks == 3000
    assert all(900 <= counts[s] <= 1100 for s in ("s1", "s2", "s3")), counts


def test_probes_of_ineligible_backends_are_not_usable_and_never_picked():
    strategy, views = bed(3, q_rif=1.0)
    strategy.on_probe(views[0], 0, 1.0, 0.0)
    strategy.on_probe(views[1], 0, 2.0, 0.0)
    strategy.on_probe(views[2], 0, 3.0, 0.0)
    replay = RequestView(request_id=2, exclude=frozenset({"s1"}))
    assert strategy.pick(views, replay, 0.0) is views[1]
    only = RequestView(request_id=3, exclude=frozenset({"s1", "s2"}))
    for _ in range(20):
        assert strategy.pick(views, only, 0.0) is views[2]
    assert strategy.pick(views, RequestView(4, exclude=frozenset({"s1", "s2", "s3"})), 0.0) is None


def test_a_backend_going_down_loses_its_probe_and_its_late_answers():
    strategy, views = bed(3)
    strategy.on_probe(views[0], 0, 1.0, 0.0)
    strategy.on_probe(views[1], 0, 2.0, 0.0)
    views[0].state = Health.DOWN
    strategy.on_pool_change(views, 0.0)
    assert ids(strategy) == ["s2"]
    strategy.on_probe(views[0], 0, 1.0, 0.1)
    assert ids(strategy) == ["s2"]


# ---------------------------------------------------------------- probing


def test_r_probe_draws_distinct_targets_with_fractional_rates_carried():
    strategy, views = bed(5, r_probe=0.5)
    wanted = [len(strategy.probe_targets(views, 0.0)) for _ in range(6)]
    assert wanted == [0, 1, 0, 1, 0, 1]
    strategy, views = bed(5, r_probe=3.0)
    for _ in range(50):
        targets = strategy.probe_targets(views, 0.0)
        assert len(targets) == len({t.id for t in targets}) == 3
    strategy, views = bed(2, r_probe=3.0)
    assert {t.id for t in strategy.probe_targets(views, 0.0)} == {"s1", "s2"}
    strategy, views = bed(2, r_probe=0.0)
    assert all(strategy.probe_targets(views, 0.0) == [] for _ in range(10))


@pytest.mark.parametrize(
    "options",
    [{"r_probe": -0.1}, {"r_probe": float("nan")}, {"q_rif": 1.5}, {"pool_size": 0}],
)
def test_bad_options_are_refused_at_load(options):
    with pytest.raises(ConfigError):
        PrequalConfig(**options)


# ---------------------------------------------------------------- the server's side


def test_the_rif_latency_record_gives_the_median_at_the_nearest_rif():
    record = RifLatency()
    assert record.estimate(3) == 0.0
    for latency in (5.0, 1.0, 3.0):
        record.record(2, latency)
    record.record(6, 40.0)
    record.record(6, 50.0)
    assert record.estimate(2) == 3.0
    assert record.estimate(6) == 45.0
    assert record.estimate(3) == 3.0  # nearest: 2
    assert record.estimate(4) == 3.0  # 2 and 6 are as near: the lower
    assert record.estimate(10_000) == 45.0
    for latency in range(20):
        record.record(2, float(latency))
    assert record.estimate(2) == 11.5  # the last 16: 4..19


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b'{"rif": -1, "latency_ms": 1}', b'{"rif": true, "latency_ms": 1}',
     b'{"rif": 1}', b'{"rif": 1, "latency_ms": "3"}', b'{"rif": 1.5, "latency_ms": 1}'],
)  # fmt: skip
def test_a_malformed_probe_answer_is_a_clear_remote_error(raw):
    with pytest.raises(RemoteProtocolError, match="probe answer"):
        ProbeAnswer.from_json(raw)


def test_a_probe_answer_round_trips():
    answer = ProbeAnswer(rif=3, latency_ms=12.5)
    assert ProbeAnswer.from_json(answer.to_json()) == answer
    assert ProbeAnswer.from_json(b'{"rif": 0, "latency_ms": 2, "server": "s1"}').latency_ms == 2.0


# ---------------------------------------------------------------- the balancer's prober


class Backends:
    def __init__(self, *names: str) -> None:
        self.conns = {name: FakeBackend(name) for name in names}

    def connection(self, backend_id: str) -> BackendPort | None:
        return self.conns.get(backend_id)

    def connection_missing(self, backend_id: str) -> None:
        return None


def prober_bed() -> tuple[Pool, Prober, Backends]:
    strategy = Prequal(PrequalConfig(r_probe=2.0), rng=random.Random(3))
    pool = Pool([BackendSpec("s1"), BackendSpec("s2")], strategy)
    backends = Backends("s1", "s2")
    return pool, Prober(pool, backends), backends


def frame_body(frame: object) -> bytes:
    return encode_frame(frame)[3:]  # type: ignore[arg-type]


def test_probes_are_sent_answered_and_counted_per_backend():
    pool, prober, backends = prober_bed()
    prober.send(0.0)
    for name, conn in backends.conns.items():
        assert [type(f) for f in conn.written] == [RequestResponse]
        sent = conn.written[0]
        assert isinstance(sent, RequestResponse) and sent.metadata == PROBE_METADATA
        (sid,) = conn.probes
        assert sid == sent.stream_id and not conn.streams
        answer = ProbeAnswer(rif=1 if name == "s1" else 2, latency_ms=3.0).to_json()
        body = frame_body(Payload(stream_id=sid, data=answer, next=True, complete=True))
        prober.answer(conn, sid, body, 0.001)
        assert not conn.probes
    counters = pool.counters
    assert [(c.probes_sent, c.probes_answered) for c in counters.values()] == [(1, 1), (1, 1)]
    strategy = pool.strategy
    assert isinstance(strategy, Prequal)
    assert sorted((p.backend.id, p.rif) for p in strategy.pool) == [("s1", 1), ("s2", 2)]


def test_a_bad_answer_or_an_error_counts_failed_and_reaches_no_strategy():
    pool, prober, backends = prober_bed()
    prober.send(0.0)
    s1, s2 = backends.conns["s1"], backends.conns["s2"]
    (sid1,) = s1.probes
    (sid2,) = s2.probes
    prober.answer(s1, sid1, frame_body(Payload(stream_id=sid1, data=b"{", next=True)), 0.0)
    error = Error(stream_id=sid2, error_code=ErrorCode.APPLICATION_ERROR, message="no")
    prober.answer(s2, sid2, frame_body(error), 0.0)
    assert [(c.probes_answered, c.probes_failed) for c in pool.counters.values()] == [(0, 1)] * 2
    assert isinstance(pool.strategy, Prequal) and pool.strategy.pool == []


def test_unanswered_probes_time_out_with_a_cancel_and_lost_ones_end():
    pool, prober, backends = prober_bed()
    prober.send(0.0)
    prober.expire(PROBE_TIMEOUT_S - 0.001)
    assert all(conn.probes for conn in backends.conns.values())
    prober.send(0.5)
    prober.lost(backends.conns["s2"])
    prober.expire(PROBE_TIMEOUT_S)
    s1 = backends.conns["s1"]
    assert len(s1.probes) == 1  # the second probe, sent at 0.5
    assert isinstance(s1.written[-1], Cancel)
    prober.expire(0.5 + PROBE_TIMEOUT_S)
    assert not s1.probes and not prober.deadlines
    c1, c2 = pool.counters["s1"], pool.counters["s2"]
    assert (c1.probes_sent, c1.probes_timed_out, c1.probes_failed) == (2, 2, 0)
    assert (c2.probes_sent, c2.probes_timed_out, c2.probes_failed) == (2, 0, 2)


# ---------------------------------------------------------------- the simulator


def test_the_simulator_runs_prequal_with_its_probes_counted_and_charged():
    from lblab.simulator.config import config_from_mapping
    from lblab.simulator.run import simulate

    raw = {
        "strategy": "prequal",
        "requests": 3000,
        "rate": 250,  # 0.8 of 3 servers at 100/s and one at 12.5/s
        "servers": [{"count": 3, "service": "exp:10ms"}, {"count": 1, "service": "exp:80ms"}],
        "server_delay": "0.2ms",
    }
    result = simulate(config_from_mapping(raw))
    counters = result.counters
    picks = sum(c["picks"] for c in counters.values())
    assert sum(c["probes_sent"] for c in counters.values()) == 3 * picks
    assert all(c["probes_answered"] == c["probes_sent"] > 0 for c in counters.values())
    served = Counter(result.requests.column("server").to_pylist())
    assert served[3] < 0.08 * 3000, served  # s4, 8 times slower: rr would send it a quarter
    slow = simulate(config_from_mapping({**raw, "requests": 300, "server_delay": "0.6s"}))
    assert all(  # 1.2 s round trips: every probe is too late, every pick random
        c["probes_timed_out"] == c["probes_sent"] and c["probes_answered"] == 0
        for c in slow.counters.values()
    )
