"""Pool: in-flight accounting, passive ejection with backoff, slow start, counters."""

from __future__ import annotations

import random

import pytest

from lblab.balancer.health import HealthConfig, ejection_duration, slow_start_factor
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError, LocalProtocolError
from lblab.loadreport import LoadReport

OK = Outcome(ok=True, latency_ms=10.0)
FAIL = Outcome(ok=False, latency_ms=1.0, error_kind="timeout")


def pool_of(*ids: str, strategy: str = "rr", health: HealthConfig | None = None) -> Pool:
    return Pool([BackendSpec(i) for i in ids], make_strategy(strategy), health=health)


def send(pool: Pool, rid: int, now: float, outcome: Outcome | None = OK) -> str | None:
    req = RequestView(request_id=rid)
    view = pool.pick(req, now)
    if view is None:
        return None
    pool.dispatch(view, req, now)
    if outcome is not None:
        pool.complete(view, req, outcome, now)
    return view.id


def test_inflight_returns_to_zero_after_mixed_outcomes() -> None:
    pool = pool_of("a", "b", "c", strategy="lc", health=HealthConfig(eject_after=0))
    rng = random.Random(3)
    open_requests = []
    for rid in range(500):
        req = RequestView(request_id=rid)
        view = pool.pick(req, float(rid))
        assert view is not None
        pool.dispatch(view, req, float(rid))
        open_requests.append((view, req))
        if rng.random() < 0.6:
            v, r = open_requests.pop(rng.randrange(len(open_requests)))
            kind = rng.choice([None, "timeout", "rejected", "connection"])
            outcome = OK if kind is None else Outcome(ok=False, latency_ms=5, error_kind=kind)
            pool.complete(v, r, outcome, float(rid))
    for v, r in open_requests:
        pool.complete(v, r, OK, 600.0)
    assert [v.inflight for v in pool.views] == [0, 0, 0]
    assert pool.outstanding == 0
    assert sum(c.picks for c in pool.counters.values()) == 500


def test_double_complete_raises_and_does_not_go_negative() -> None:
    pool = pool_of("a")
    req = RequestView(request_id=1)
    view = pool.pick(req, 0.0)
    assert view is not None
    pool.dispatch(view, req, 0.0)
    pool.complete(view, req, OK, 0.1)
    with pytest.raises(LocalProtocolError, match="without a matching dispatch"):
        pool.complete(view, req, OK, 0.2)
    assert view.inflight == 0
    with pytest.raises(LocalProtocolError, match="without a matching dispatch"):
        pool.complete(view, RequestView(request_id=99), OK, 0.2)


def test_same_request_dispatched_twice_to_one_backend_raises() -> None:
    pool = pool_of("a")
    req = RequestView(request_id=1)
    view = pool.get("a")
    pool.dispatch(view, req, 0.0)
    with pytest.raises(LocalProtocolError, match="already in flight"):
        pool.dispatch(view, req, 0.0)


def test_ejection_backoff_doubles_and_caps() -> None:
    health = HealthConfig(eject_after=3, eject_base_s=1.0, eject_max_s=3.0, slow_start_window_s=0)
    assert [ejection_duration(health, n) for n in range(4)] == [1.0, 2.0, 3.0, 3.0]
    pool = pool_of("a", "b", strategy="first", health=health)
    a = pool.get("a")
    ends = []
    now = 0.0
    for _ in range(3):
        for _ in range(3):
            req = RequestView(request_id=int(now * 1000))
            pool.dispatch(a, req, now)
            pool.complete(a, req, FAIL, now)
            now += 0.001
        assert a.state is Health.EJECTED
        assert send(pool, 10**6 + int(now * 1000), now) == "b"  # traffic moves away
        start = now
        while a.state is Health.EJECTED:
            now += 0.01
            pool.tick(now)
        ends.append(round(now - start, 2))
    assert ends == [1.0, 2.0, 3.0]
    assert pool.counters["a"].ejections == 3
    assert pool.counters["a"].errors == 9


def test_pick_ends_an_ejection_without_an_explicit_tick() -> None:
    health = HealthConfig(eject_after=1, slow_start_window_s=0, panic_threshold=0)
    pool = pool_of("a", strategy="first", health=health)
    assert send(pool, 1, 0.0, FAIL) == "a"
    assert send(pool, 2, 0.5) is None  # ejected for 1 s, nothing else eligible
    assert send(pool, 3, 1.0) == "a"


def test_success_resets_consecutive_failures() -> None:
    pool = pool_of("a", strategy="first", health=HealthConfig(eject_after=3))
    for rid, outcome in enumerate([FAIL, FAIL, OK, FAIL, FAIL]):
        send(pool, rid, 0.0, outcome)
    assert pool.get("a").state is Health.UP
    assert pool.get("a").consecutive_failures == 2


def test_slow_start_follows_the_envoy_formula_after_recovery() -> None:
    health = HealthConfig(  # Envoy's floor, and no early end: the formula alone
        slow_start_window_s=10.0,
        slow_start_aggression=2.0,
        slow_start_min_weight=0.1,
        slow_start_fast_after=0,
    )
    assert slow_start_factor(health, 0.0) == 0.1
    assert slow_start_factor(health, 2.5) == pytest.approx(0.5)  # (0.25) ** (1/2)
    assert slow_start_factor(health, 10.0) == 1.0
    pool = pool_of("a", "b", health=health)
    pool.set_state("a", Health.DOWN, 0.0)
    assert pool.get("a").state is Health.DOWN
    pool.set_state("a", Health.UP, 5.0)
    a = pool.get("a")
    assert a.state is Health.UP and a.slow_start == 0.1
    pool.tick(7.5)
    assert a.slow_start == pytest.approx(0.5)
    pool.tick(15.0)
    assert a.slow_start == 1.0


def test_driver_state_and_ejection_combine() -> None:
    pool = pool_of("a", "b", health=HealthConfig(eject_after=1, slow_start_window_s=0))
    seen: list[list[str]] = []
    strategy = pool.strategy
    original = strategy.on_pool_change

    def spy(backends, now):  # type: ignore[no-untyped-def]
        seen.append([str(b.state) for b in backends])
        original(backends, now)

    strategy.on_pool_change = spy  # type: ignore[method-assign]
    pool.set_state("a", Health.EJECTED, 0.0)
    pool.set_state("a", Health.DOWN, 0.1)
    pool.tick(5.0)  # the ejection is over but the connection is still down
    assert pool.get("a").state is Health.DOWN
    pool.set_state("a", Health.UP, 6.0)
    pool.set_state("a", Health.UP, 6.0)  # no change: no second notification
    assert seen == [["ejected", "up"], ["down", "up"], ["up", "up"]]


def test_draining_backend_gets_no_new_requests() -> None:
    pool = pool_of("a", "b")
    pool.set_state("a", Health.DRAINING, 0.0)
    assert {send(pool, i, 0.0) for i in range(10)} == {"b"}


def test_add_and_remove_keep_bookkeeping_balanced() -> None:
    pool = pool_of("a", "b", strategy="rr")
    req = RequestView(request_id=1)
    b = pool.get("b")
    pool.dispatch(b, req, 0.0)
    pool.remove("b", 0.0)
    assert "b" not in pool
    assert [v.index for v in pool.views] == [0]
    pool.complete(b, req, OK, 1.0)  # finishes where it was
    assert b.inflight == 0 and pool.outstanding == 0
    c = pool.add(BackendSpec("c", weight=2), 1.0)
    assert c.index == 1 and c.slow_start < 1.0
    assert {send(pool, i, 2.0) for i in range(10, 14)} == {"a", "c"}


def test_latency_ewma_uses_successes_only() -> None:
    pool = pool_of("a", strategy="first", health=HealthConfig(ewma_tau_s=1.0, eject_after=0))
    send(pool, 1, 0.0, Outcome(ok=True, latency_ms=100.0))
    send(pool, 2, 1.0, Outcome(ok=True, latency_ms=200.0))
    send(pool, 3, 1.5, Outcome(ok=False, latency_ms=0.1, error_kind="rejected"))
    a = pool.get("a")
    assert a.latency_ewma_ms == pytest.approx(100 * 0.36787944 + 200 * (1 - 0.36787944))
    assert a.last_latency_ms == 200.0


def test_reports_reach_the_strategy_and_unknown_ids_are_refused() -> None:
    pool = pool_of("a")
    report = LoadReport(server="a", source="agent", t=1.0, cpu_util=0.5)
    assert pool.report("a", report, 2.0)
    assert pool.get("a").last_report == report and pool.get("a").report_at == 2.0
    assert not pool.report("zz", report, 2.0)


def test_ties_are_counted_per_backend() -> None:
    pool = pool_of("a", "b", strategy="lc")
    picked = send(pool, 1, 0.0)  # both idle: a tie, to either
    assert picked is not None
    assert pool.counters[picked].ties == 1 and pool.strategy.ties == 1  # type: ignore[attr-defined]


def test_bad_specs_and_health_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        pool_of("a", "a")
    with pytest.raises(ConfigError, match="weight 0"):
        BackendSpec("a", weight=0)
    with pytest.raises(ConfigError, match="eject_max_s"):
        HealthConfig(eject_base_s=10, eject_max_s=5)
    with pytest.raises(ConfigError, match="no backend 'x'"):
        pool_of("a").get("x")


def test_a_strategy_returning_an_ineligible_backend_is_caught() -> None:
    pool = pool_of("a", "b", strategy="first")
    with pytest.raises(LocalProtocolError, match="not eligible"):
        pool.strategy.pick = lambda backends, request, now: backends[0]  # type: ignore[method-assign]
        pool.pick(RequestView(request_id=1, exclude=frozenset({"a"})), 0.0)


def failure(kind: str, *, server_fault: bool = False) -> Outcome:
    return Outcome(ok=False, latency_ms=1.0, error_kind=kind, server_fault=server_fault)


@pytest.mark.parametrize(
    ("outcome", "counts"),
    [
        (failure("timeout"), True),
        (failure("connection"), True),
        (failure("application", server_fault=True), True),
        (failure("rejected"), False),
        (failure("application"), False),
        (failure("other"), False),
    ],
)
def test_only_the_backends_own_failures_count_toward_ejection(
    outcome: Outcome, counts: bool
) -> None:
    pool = pool_of("a", "b", strategy="first", health=HealthConfig(eject_after=3))
    picked = []
    for rid in range(10):
        req = RequestView(request_id=rid)
        view = pool.pick(req, 0.0)
        assert view is not None
        pool.dispatch(view, req, 0.0)
        pool.complete(view, req, outcome if view.id == "a" else OK, 0.0)
        picked.append(view.id)
    assert picked == (["a"] * 3 + ["b"] * 7 if counts else ["a"] * 10)
    a = pool.counters["a"]
    assert (a.ejections, a.faults, a.errors) == ((1, 3, 3) if counts else (0, 0, 10))


def test_an_answer_that_is_not_a_fault_resets_the_run_of_failures() -> None:
    pool = pool_of("a", "b", strategy="first", health=HealthConfig(eject_after=3))
    for rid, outcome in enumerate(
        [FAIL, FAIL, failure("rejected"), FAIL, FAIL, failure("application")]
    ):
        send(pool, rid, 0.0, outcome)
    assert pool.get("a").state is Health.UP and pool.counters["a"].ejections == 0
    assert pool.get("a").consecutive_failures == 0


def test_panic_balances_over_all_when_most_of_the_pool_is_ejected() -> None:
    health = HealthConfig(eject_after=1, eject_base_s=1.0, slow_start_window_s=0)
    pool = pool_of("a", "b", "c", strategy="rr", health=health)
    pool.set_state("a", Health.EJECTED, 0.0)  # 2 of 3 un-ejected: no panic
    assert not pool.panic
    assert {send(pool, i, 0.1) for i in range(6)} == {"b", "c"}
    pool.set_state("b", Health.EJECTED, 0.2)  # 1 of 3 < 50 %: panic, all serve
    assert pool.panic
    assert [v.state for v in pool.views] == [Health.UP] * 3
    assert {send(pool, i, 0.3) for i in range(10, 16)} == {"a", "b", "c"}
    assert pool.counters["b"].ejections == 1  # the ejection was recorded all the same
    # The six picks in panic are counted as such, and none of the six before it.
    assert sum(c.panic_picks for c in pool.counters.values()) == 6
    pool.tick(1.05)  # a's ejection ends: 2 of 3 un-ejected, panic over, b stays out
    assert not pool.panic
    assert [str(v.state) for v in pool.views] == ["up", "ejected", "up"]
    pool.tick(1.25)
    assert [str(v.state) for v in pool.views] == ["up", "up", "up"]


def test_panic_counts_connected_backends_only() -> None:
    pool = pool_of("a", "b", "c", "d", strategy="rr", health=HealthConfig(slow_start_window_s=0))
    pool.set_state("a", Health.DOWN, 0.0)
    pool.set_state("b", Health.EJECTED, 0.0)  # 2 of 3 connected un-ejected
    assert not pool.panic
    pool.set_state("c", Health.EJECTED, 0.0)  # 1 of 3
    assert pool.panic
    assert {send(pool, i, 0.1) for i in range(6)} == {"b", "c", "d"}  # never the DOWN one
    off = pool_of("a", "b", health=HealthConfig(panic_threshold=0))
    off.set_state("a", Health.EJECTED, 0.0)
    off.set_state("b", Health.EJECTED, 0.0)
    assert not off.panic and send(off, 1, 0.1) is None
