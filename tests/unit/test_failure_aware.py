"""Failure-aware load: peak-ewma's failure penalty (Linkerd's load biaser) and the pool's
success-rate ejection (Linkerd's unified breaker), to their exact sequences."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from lblab.balancer.health import SUCCESS_RATE_BUCKETS, HealthConfig, SuccessWindow
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.penalty import penalised_rtt_ms
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.failures import retry_after_ms, retry_after_note
from lblab.servers.behaviour import RateLimit, TokenBucket
from lblab.servers.slowdown import Control
from lblab.simulator.config import ServerEvent, config_from_mapping
from lblab.simulator.run import Simulation
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, RequestResponse
from tests.benchmark_scripts import bench
from tests.unit.test_router import Bed

OK = Outcome(ok=True, latency_ms=10.0)
FAULT = Outcome(ok=False, latency_ms=1.0, error_kind="application", server_fault=True)
CLIENT_ERROR = Outcome(ok=False, latency_ms=1.0, error_kind="application")
TIMEOUT = Outcome(ok=False, latency_ms=30_000.0, error_kind="timeout")
LOST = Outcome(ok=False, latency_ms=2.0, error_kind="connection")


def rejected(hint_ms: float | None = None) -> Outcome:
    return Outcome(ok=False, latency_ms=0.5, error_kind="rejected", retry_after_ms=hint_ms)


# -- the penalty rule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (OK, None),
        (FAULT, 5000.0),  # a 5xx: the base penalty, a hint or not
        (rejected(), 5000.0),  # a 429/503 without a hint
        (rejected(200.0), 5000.0),  # a hint below the penalty is not honoured
        (rejected(0.0), 5000.0),
        (rejected(20_000.0), 20_000.0),  # a longer hint is
        (rejected(900_000.0), 300_000.0),  # capped at max_retry_after
        (CLIENT_ERROR, None),  # about the request: no failure of the server's
        (TIMEOUT, None),  # transport: the measured time
        (LOST, None),
    ],
)
def test_penalised_rtt_follows_linkerds_effective_rtt(outcome, expected) -> None:
    assert penalised_rtt_ms(outcome, 5000.0, 300_000.0) == expected


def test_no_penalty_means_no_effective_rtt_even_with_a_hint() -> None:
    assert penalised_rtt_ms(rejected(20_000.0), 0.0, 300_000.0) is None
    assert penalised_rtt_ms(FAULT, 0.0, 300_000.0) is None


# -- peak-ewma with the penalty ------------------------------------------------------


def peak_pool(**options: str) -> Pool:
    strategy = make_strategy("peak-ewma", options, rng=random.Random(1))
    return Pool([BackendSpec("a"), BackendSpec("b")], strategy, health=HealthConfig(eject_after=0))


def run(pool: Pool, rid: int, now: float, outcome_of: dict[str, Outcome]) -> str:
    req = RequestView(request_id=rid)
    view = pool.pick(req, now)
    assert view is not None
    pool.dispatch(view, req, now)
    pool.complete(view, req, outcome_of[view.id], now)
    return view.id


def test_a_fast_failing_backend_draws_plain_peak_ewma_and_is_penalised_away() -> None:
    outcomes = {"a": OK, "b": FAULT}  # b fails in 1 ms, a answers in 10 ms
    plain, aware = peak_pool(), peak_pool(failure_penalty_ms="5000")
    plain_seq = [run(plain, k, 0.01 * k, outcomes) for k in range(1, 9)]
    aware_seq = [run(aware, k, 0.01 * k, outcomes) for k in range(1, 9)]
    # Both draw the pair (a, b) every time. a is drawn first and, unsampled at load 0,
    # wins the tie; then b is unsampled (0) against a's 10 ms. Plain: b's 1 ms failures
    # keep it the cheaper one, and it takes every pick after. Aware: b's failure at
    # 0.02 s observes 5000 ms; a (10 ms) wins every pick from then on.
    assert plain_seq == ["a"] + ["b"] * 7
    assert aware_seq == ["a", "b"] + ["a"] * 6
    costs = aware.strategy.costs  # type: ignore[attr-defined]
    assert costs["b"].stamp == 0.08  # read (and decayed) at the last pick
    assert costs["b"].cost == pytest.approx(5000.0 * math.exp(-0.06 / 10.0))
    assert costs["b"].load(0, 10.02) == pytest.approx(5000.0 * math.exp(-1.0))
    assert plain.strategy.costs["b"].load(0, 1.0) < 1.0  # type: ignore[attr-defined]


def test_the_penalty_decays_with_tau_and_the_backend_wins_again() -> None:
    pool = peak_pool(failure_penalty_ms="100", tau="1")
    for rid, (backend, outcome) in enumerate([("a", FAULT), ("b", OK)]):
        req = RequestView(request_id=rid)
        view = pool.get(backend)
        pool.dispatch(view, req, 0.0)
        pool.complete(view, req, outcome, 0.0)  # a: 100 ms (penalised), b: 10 ms
    seq = [run(pool, 10 + k, 0.1 * k, {"a": OK, "b": OK}) for k in range(1, 27)]
    # b answers in 10 ms every 0.1 s: its load when read is 10 e^-0.1. a's penalty is
    # read down to 100 e^-t and wins once 100 e^-t < 10 e^-0.1: t > ln 10 + 0.1 = 2.403 s.
    assert seq == ["b"] * 24 + ["a", "b"]
    assert 100 * math.exp(-2.4) > 10 * math.exp(-0.1) > 100 * math.exp(-2.5)


def test_a_rejected_with_retry_after_observes_the_longer_hint() -> None:
    for rid, (outcome, cost) in enumerate(
        [(rejected(30_000.0), 30_000.0), (rejected(500.0), 1000.0), (rejected(1e9), 60_000.0)]
    ):
        pool = peak_pool(failure_penalty_ms="1000", max_retry_after_s="60")
        seen = run(pool, rid, 0.0, {"a": outcome, "b": outcome})
        assert pool.strategy.costs[seen].cost == cost  # type: ignore[attr-defined]


def test_unpenalised_failures_observe_their_latency_as_before() -> None:
    for outcome in (TIMEOUT, LOST, CLIENT_ERROR):
        pool = peak_pool(failure_penalty_ms="5000")
        seen = run(pool, 1, 0.0, {"a": outcome, "b": outcome})
        assert pool.strategy.costs[seen].cost == outcome.latency_ms  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("failure_penalty_ms", "-1", "must be 0 \\(off\\)"),
        ("failure_penalty_ms", "nan", "must be 0 \\(off\\)"),
        ("failure_penalty_ms", "2e12", "must be 0 \\(off\\)"),
        ("max_retry_after_s", "-5", "must be 0"),
        ("max_retry_after_s", "inf", "must be 0"),
    ],
)
def test_bad_penalty_options_name_the_option(option: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=f"peak-ewma.*{option}.*{says}"):
        make_strategy("peak-ewma", {option: value})


# -- the success window --------------------------------------------------------------


def test_success_window_rolls_buckets_out_exactly() -> None:
    w = SuccessWindow(10.0, now=0.0)  # ten 1 s buckets
    for t in (0.0, 0.5):
        w.record(False, t)
    w.record(True, 3.2)
    assert (sum(w.successes), sum(w.totals)) == (1, 3)
    assert w.trips(3, 0.8) and not w.trips(4, 0.8)
    w.record(True, 10.1)  # the bucket of t = 0 s left the window; 3.2's stays
    assert (sum(w.successes), sum(w.totals)) == (2, 2)
    assert not w.trips(1, 0.8)
    w.record(False, 30.0)  # a whole window later: only this one
    assert (sum(w.successes), sum(w.totals)) == (0, 1)
    assert w.trips(1, 0.8)
    assert len(w.totals) == SUCCESS_RATE_BUCKETS


# -- success-rate ejection in the pool -----------------------------------------------


def sr_pool(*ids: str, **health: float) -> Pool:
    config = HealthConfig(
        eject_after=0,
        slow_start_window_s=0.0,
        success_rate_threshold=0.8,
        success_rate_window_s=10.0,
        success_rate_min_requests=10,
        **health,  # type: ignore[arg-type]
    )
    return Pool([BackendSpec(i) for i in ids], make_strategy("rr"), health=config)


def complete_on(pool: Pool, backend: str, rid: int, outcome: Outcome, now: float) -> None:
    req = RequestView(request_id=rid)
    view = pool.get(backend)
    pool.dispatch(view, req, now)
    pool.complete(view, req, outcome, now)


def test_success_rate_below_threshold_ejects_once_the_window_holds_enough() -> None:
    pool = sr_pool("a", "b", "c", "d")
    # s fails one in three: 7 successes of 10 is 0.7 < 0.8, but not before 10 outcomes.
    seq = [OK, OK, FAULT] * 3 + [OK]
    for k, outcome in enumerate(seq[:-1]):
        complete_on(pool, "a", k, outcome, 0.1 * k)
        assert pool.get("a").state is Health.UP  # 9 outcomes: too few to judge
    complete_on(pool, "a", 9, seq[-1], 0.9)
    assert pool.get("a").state is Health.EJECTED
    counters = pool.counters["a"]
    assert (counters.ejections, counters.success_rate_ejections) == (1, 1)
    assert pool.get("a").consecutive_failures == 0  # never two faults in a row


def test_rejected_and_client_errors_are_not_failures_of_the_rate() -> None:
    pool = sr_pool("a", "b", "c", "d")
    for k in range(20):
        complete_on(pool, "a", k, rejected() if k % 2 else CLIENT_ERROR, 0.1 * k)
    assert pool.get("a").state is Health.UP
    assert pool.counters["a"].success_rate_ejections == 0


def test_probation_a_fault_re_ejects_at_once_a_success_readmits_with_an_empty_window() -> None:
    pool = sr_pool("a", "b", "c", "d", eject_base_s=1.0, eject_max_s=30.0)
    for k in range(10):
        complete_on(pool, "a", k, FAULT, 0.01 * k)  # ejected at 0.09 for 1 s
    assert pool.get("a").state is Health.EJECTED
    pool.tick(1.2)
    assert pool.get("a").state is Health.UP  # on probation
    complete_on(pool, "a", 100, FAULT, 1.3)  # the probe fails: out again, for 2 s
    assert pool.get("a").state is Health.EJECTED
    assert pool.counters["a"].success_rate_ejections == 2
    pool.tick(3.2)
    assert pool.get("a").state is Health.EJECTED  # 1.3 + 2 s
    pool.tick(3.4)
    assert pool.get("a").state is Health.UP
    complete_on(pool, "a", 101, OK, 3.5)  # the probe succeeds
    for k in range(9):  # an empty window: nine faults are too few to judge
        complete_on(pool, "a", 200 + k, FAULT, 3.6 + 0.01 * k)
    assert pool.get("a").state is Health.UP
    complete_on(pool, "a", 300, FAULT, 3.7)
    assert pool.get("a").state is Health.EJECTED
    assert pool.counters["a"].success_rate_ejections == 3


def test_the_panic_threshold_holds_for_success_rate_ejection() -> None:
    pool = sr_pool("a", "b")  # panic below 50 % un-ejected
    for k in range(10):
        complete_on(pool, "a", k, FAULT, 0.01 * k)
    assert pool.get("a").state is Health.EJECTED  # 1 of 2 un-ejected: not below half
    for k in range(10):
        complete_on(pool, "b", 100 + k, FAULT, 0.01 * k)
    assert pool.panic
    assert [v.state for v in pool.views] == [Health.UP, Health.UP]
    assert pool.counters["b"].success_rate_ejections == 1


def test_success_rate_ejection_is_off_by_default() -> None:
    assert HealthConfig().success_rate_threshold == 0.0
    pool = Pool(
        [BackendSpec("a"), BackendSpec("b")], make_strategy("rr"), HealthConfig(eject_after=0)
    )
    for k in range(200):
        complete_on(pool, "a", k, FAULT, 0.01 * k)
    assert pool.get("a").state is Health.UP
    assert pool._health["a"].window is None  # nothing counted, nothing spent


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("success_rate_threshold", 1.5, "share in"),
        ("success_rate_threshold", math.nan, "share in"),
        ("success_rate_window_s", 0.0, "> 0"),
        ("success_rate_window_s", 7200.0, "at most 3600"),
        ("success_rate_min_requests", 0, "1 to 1000000"),
    ],
)
def test_bad_success_rate_settings_name_the_field(field: str, value: float, says: str) -> None:
    with pytest.raises(ConfigError, match=f"health: {field}=.*{says}"):
        HealthConfig(**{field: value})  # type: ignore[arg-type]


# -- the simulated figure (benchmarks/failure_penalty.py) ----------------------------


@pytest.mark.parametrize("rate", [0.3, 1.0])
def test_failure_aware_peak_ewma_fails_fewer_than_plain_and_round_robin(rate: float) -> None:
    figure = bench("failure_penalty")
    failed = {
        label: figure.measure(strategy, options, rate, 2, 10.0)[0]
        for label, strategy, options in [
            ("aware", *figure.AWARE),
            ("plain", "peak-ewma", ()),
            ("rr", "rr", ()),
        ]
    }
    # Four servers, s1 failing `rate` of its requests after 1 ms. Round robin sends s1 a
    # quarter until 5 faults in a row eject it; the penalty keeps it out after one.
    assert failed["aware"] < failed["plain"] / 3
    assert failed["aware"] < failed["rr"] / 3
    assert failed["aware"] > 0.0  # it has to learn from a failure first


# -- Retry-After: the server's hint, the router, the simulator -----------------------


def test_the_hint_is_whole_ms_rounded_up_and_read_back_in_place() -> None:
    assert retry_after_note(0.0372) == "; retry-after-ms=38"
    assert retry_after_note(0.0) == "; retry-after-ms=1"
    frame = bytearray(b"\0" * 13 + b"over its rate limit; retry elsewhere; retry-after-ms=250")
    assert retry_after_ms(frame, 13) == 250.0
    assert retry_after_ms(bytearray(b"\0" * 13 + b"busy"), 13) is None
    assert retry_after_ms(bytearray(b"\0" * 13 + b"retry-after-ms=soon"), 13) is None
    assert (
        retry_after_ms(bytearray(b"retry-after-ms=5" + b"\0" * 13), 16) is None
    )  # not the message


def test_a_token_buckets_wait_is_the_time_to_its_next_whole_token() -> None:
    bucket = TokenBucket(rate=4.0, burst=1.0, now=0.0)  # one token every 0.25 s
    assert bucket.take(0.0) and not bucket.take(0.1)
    assert bucket.wait_s() == pytest.approx(0.15)  # 0.4 of a token held
    assert not bucket.take(0.2) and bucket.wait_s() == pytest.approx(0.05)
    assert bucket.take(0.25)


def test_the_router_hands_a_rejecteds_hint_to_the_strategy() -> None:
    bed = Bed(n=3)
    bed.send(RequestResponse(stream_id=1))
    hinted = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="over; retry-after-ms=750")
    bed.backends["b1"].answer(bed.router, hinted, bed.now)  # replayed on b2
    bed.backends["b2"].answer(
        bed.router, Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy"), bed.now
    )
    bed.backends["b3"].answer(bed.router, hinted, bed.now)  # out of tries: to the client
    assert [(b, o.error_kind, o.retry_after_ms) for b, _, o in bed.strategy.outcomes] == [
        ("b1", "rejected", 750.0),
        ("b2", "rejected", None),
        ("b3", "rejected", 750.0),
    ]
    assert bed.client.sent == [hinted]
    bed.settled()


def rate_limited_s1(**options: str) -> Simulation:
    """s2 and a rate-limited s1 (one token every 0.5 s), 1 ms of work, 2 s at 200/s."""
    cfg = config_from_mapping(
        {"strategy": "peak-ewma", "strategy_options": options, "servers": 2,
         "service": "fixed:1ms", "rate": 200, "duration": "2s", "picks_every": 0}
    )  # fmt: skip
    limit = Control(reject=RateLimit(limit=2.0, burst=1.0))
    sim = Simulation(replace(cfg, timeline=(ServerEvent(0.0, "reject", "s1", control=limit),)))
    result = sim.run()
    assert result.requests.column("ok").to_pylist().count(False) == 0  # replayed on s2
    return sim


def test_a_rate_limited_simulated_server_sends_its_hint_to_the_penalised_cost() -> None:
    honoured = rate_limited_s1(failure_penalty_ms="1")
    ignored = rate_limited_s1(failure_penalty_ms="1", max_retry_after_s="0")
    # Honoured, s1's refusals observe their wait for the next token (up to 500 ms), not
    # the 1 ms penalty, and s1 is hardly drawn again; without the hint it costs 1 ms as
    # s2 does and takes about half the picks, nearly all refused.
    cost = honoured.pools[0].strategy.costs["s1"]  # type: ignore[attr-defined]
    assert 1.0 < cost.cost <= 500.0
    assert ignored.pools[0].strategy.costs["s1"].cost == 1.0  # type: ignore[attr-defined]
    assert honoured.pools[0].counters["s1"].picks <= 10
    assert ignored.pools[0].counters["s1"].picks >= 300


def test_success_rate_ejection_in_the_simulator_cuts_round_robins_failures_at_30_percent() -> None:
    figure = bench("failure_penalty")
    plain = figure.measure("rr", (), 0.3, 2, 10.0)
    ejecting = figure.measure("rr", (), 0.3, 2, 10.0, figure.SR_HEALTH)
    # 70 % successes is under 80 %: s1 is ejected after its first 100 outcomes and on
    # each failed probation; five faults in a row (consecutive ejection) are rare at 30 %.
    assert ejecting[0] < plain[0] / 1.5
    assert ejecting[1] < plain[1] / 1.5  # s1's share of the requests
    quiet = figure.measure("rr", (), 0.1, 2, 10.0, figure.SR_HEALTH)
    assert quiet[0] == figure.measure("rr", (), 0.1, 2, 10.0)[0]  # 90 %: never ejected
