"""least-request, wrr-orca, c3: exact sequences, formulas and the EDF core."""

from __future__ import annotations

import math
import random

import pytest

from lblab.balancer.health import HealthConfig
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import BackendView, Health, Outcome, RequestView
from lblab.balancer.strategies.c3 import C3Config, ServerState
from lblab.balancer.strategies.edf import EdfScheduler
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.loadreport import LoadReport
from tests.unit.test_strategies_weighted import OK, run
from tests.unit.test_strategies_weighted import weighted_pool as make


def hold(pool: Pool, count: int, start: int = 0, now: float = 0.0) -> str:
    """``count`` picks left in flight."""
    out = []
    for k in range(count):
        req = RequestView(request_id=start + k)
        view = pool.pick(req, now)
        assert view is not None
        pool.dispatch(view, req, now)
        out.append(view.id)
    return "".join(out)


def counts(seq: str, ids: str = "abc") -> list[int]:
    return [seq.count(c) for c in ids]


# -- EDF ------------------------------------------------------------------------------


def fresh(weights: list[float]) -> EdfScheduler:
    """Every entry added at clock 0, in order (Envoy's schedule before any pick)."""
    return EdfScheduler([(1.0 / w, pos) for pos, w in enumerate(weights)])


def test_edf_shares_are_exact_within_one() -> None:
    edf = fresh([1.0, 2.0, 3.0])
    picks = [edf.pick_and_add([1.0, 2.0, 3.0].__getitem__) for _ in range(6000)]
    assert [picks.count(i) for i in range(3)] == [1000, 2000, 3000]
    assert picks[:6] == [2, 1, 2, 0, 1, 2]  # deadlines 1/3, 1/2, 2/3, 1 (FIFO: 0 before 1, 2)


def state(edf: EdfScheduler) -> list[tuple[int, float]]:
    """``(position, deadline)`` of every entry (the private heap, read as Envoy's test does)."""
    return sorted((pos, deadline) for deadline, _, pos in edf._heap)


@pytest.mark.parametrize(
    ("weights", "picks"), [([25.0, 75.0], 23), ([1.3, 2.7, 3.1], 47), ([0.5, 7.0], 1000)]
)
def test_edf_with_picks_is_a_fresh_schedule_after_that_many_picks(
    weights: list[float], picks: int
) -> None:
    # Envoy's createWithPicks test: the emulated picks leave every deadline where real
    # picks do, up to float rounding (25 and 75 at 23 is the case of Envoy's epsilon)
    emulated = EdfScheduler.with_picks(weights, picks)
    real = fresh(weights)
    for _ in range(picks):
        real.pick_and_add(weights.__getitem__)
    for (pos_e, deadline_e), (pos_r, deadline_r) in zip(state(emulated), state(real), strict=True):
        assert pos_e == pos_r
        assert deadline_e == pytest.approx(deadline_r, abs=1e-9)


def test_edf_random_start_is_within_one_period() -> None:
    rng = random.Random(3)
    edf = EdfScheduler.with_random_start([1.0, 4.0], rng)
    first = [edf.pick_and_add([1.0, 4.0].__getitem__) for _ in range(500)]
    assert counts("".join(map(str, first)), "01") in ([100, 400], [99, 401], [101, 399])


# -- least-request -----------------------------------------------------------------------


def test_least_request_edf_weights_1_2_3_over_6000_picks() -> None:
    pool = make("least-request", [1, 2, 3])
    seq = run(pool, 6000)
    got = counts(seq)
    assert all(abs(g - e) <= 1 for g, e in zip(got, [1000, 2000, 3000], strict=True)), got
    assert got == [999, 2000, 3001]  # seed 1: the pinned pre-pick start


def test_least_request_equal_weights_use_n_choices_not_edf() -> None:
    pool = make("least-request", [2, 2, 2])
    assert pool.strategy.edf is None  # type: ignore[attr-defined]
    pool = make("least-request", [1, 2])
    assert pool.strategy.edf is not None  # type: ignore[attr-defined]


def envoy_n_choices(seed: int, n: int, choice_count: int, picks: int) -> str:
    """Envoy's unweighted pick on its own: draws with replacement, strictly fewer replaces."""
    rng = random.Random(seed)
    rng.getrandbits(32)  # the strategy's seed_
    inflight = [0] * n
    out = []
    for _ in range(picks):
        best = rng.randrange(n)
        for _ in range(choice_count - 1):
            drawn = rng.randrange(n)
            if inflight[drawn] < inflight[best]:
                best = drawn
        inflight[best] += 1
        out.append(chr(ord("a") + best))
    return "".join(out)


@pytest.mark.parametrize("choice_count", [2, 3])
def test_least_request_n_choices_sequence(choice_count: int) -> None:
    pool = make("least-request", [1, 1, 1, 1], seed=7, choice_count=str(choice_count))
    seq = hold(pool, 40)
    assert seq == envoy_n_choices(7, 4, choice_count, 40)


def test_least_request_n_choices_pinned() -> None:
    assert hold(make("least-request", [1, 1, 1], seed=7), 12) == "acabccabacbc"
    three = make("least-request", [1, 1, 1], seed=7, choice_count="3")
    assert hold(three, 12) == "acbabbcaccba"


def envoy_full_scan(seed: int, n: int, picks: int) -> str:
    """Envoy's ``unweightedHostPickFullScan`` on its own, every pick held: the fewest in
    flight in list order, the k-th tied replacing the candidate when ``random % k == 0``."""
    rng = random.Random(seed)
    rng.getrandbits(32)  # the strategy's seed_
    inflight = [0] * n
    out = []
    for _ in range(picks):
        best, tied = 0, 1
        for i in range(1, n):
            if inflight[i] < inflight[best]:
                best, tied = i, 1
            elif inflight[i] == inflight[best]:
                tied += 1
                if rng.randrange(tied) == 0:
                    best = i
        inflight[best] += 1
        out.append(chr(ord("a") + best))
    return "".join(out)


def test_least_request_full_scan_sequence_is_envoys() -> None:
    pool = make("least-request", [1, 1, 1, 1], seed=7, selection_method="full_scan")
    seq = hold(pool, 40)
    assert seq == envoy_full_scan(7, 4, 40)
    assert counts(seq, "abcd") == [10, 10, 10, 10]  # always one of the least loaded
    assert hold(make("least-request", [1, 1, 1], seed=7, selection_method="full_scan"), 12) == (
        envoy_full_scan(7, 3, 12)
    )


def test_least_request_full_scan_spreads_ties_evenly_and_counts_them() -> None:
    pool = make("least-request", [1, 1, 1, 1], seed=3, selection_method="full_scan")
    seq = run(pool, 4000)  # nothing stays in flight: every pick is a four-way tie
    assert all(850 <= c <= 1150 for c in counts(seq, "abcd")), counts(seq, "abcd")
    assert pool.strategy.ties == 4000


def test_least_request_full_scan_leaves_the_weighted_regime_to_edf() -> None:
    pool = make("least-request", [1, 2, 3], selection_method="full_scan")
    assert pool.strategy.edf is not None  # type: ignore[attr-defined]
    assert counts(run(pool, 6000)) == counts(run(make("least-request", [1, 2, 3]), 6000))
    with pytest.raises(ConfigError, match="'all' is not one of n_choices, full_scan"):
        make_strategy("least-request", {"selection_method": "all"})


def test_least_request_first_drawn_wins_ties_and_counts_them() -> None:
    pool = make("least-request", [1, 1], seed=2)
    seq = run(pool, 20)  # nothing stays in flight: every pick ties, the first draw wins
    rng = random.Random(2)
    rng.getrandbits(32)
    draws = [(rng.randrange(2), rng.randrange(2)) for _ in range(20)]
    assert seq == "".join("ab"[first] for first, _ in draws)
    # a tie needs another backend drawn: two draws of the same one are not one
    assert pool.strategy.ties == sum(first != second for first, second in draws)


def test_least_request_host_weight_and_bias() -> None:
    view = BackendView(id="a", index=0, weight=4.0, inflight=3)
    for bias, expected in (("0", 4.0), ("1", 1.0), ("2", 0.25), ("0.5", 2.0)):
        strategy = make_strategy("least-request", {"active_request_bias": bias})
        assert strategy.host_weight(view) == pytest.approx(expected)  # type: ignore[attr-defined]


def test_least_request_bias_moves_load_away_from_busy_backends() -> None:
    # weights 1:3, all 400 requests held: bias 0 is plain EDF (1:3 exactly); a larger
    # bias divides the heavy backend's weight by more as its in-flight count grows
    shares = [
        counts(hold(make("least-request", [1, 3], active_request_bias=bias), 400), "ab")
        for bias in ("0", "1", "2")
    ]
    assert shares == [[100, 300], [146, 254], [164, 236]]


def test_least_request_slow_start_switches_to_edf() -> None:
    health = HealthConfig(  # Envoy's defaults (10 %, linear), no early end
        slow_start_window_s=10.0,
        slow_start_aggression=1.0,
        slow_start_min_weight=0.1,
        slow_start_fast_after=0,
    )
    strategy = make_strategy("least-request", rng=random.Random(1))
    pool = Pool([BackendSpec("a"), BackendSpec("b")], strategy, health=health)
    assert strategy.edf is None  # type: ignore[attr-defined]
    pool.set_state("b", Health.DOWN, 0.0)
    pool.set_state("b", Health.UP, 0.0)  # b at 0.1 of its weight
    assert strategy.edf is not None  # type: ignore[attr-defined]
    early = run(pool, 110)
    assert 9 <= early.count("b") <= 11, early.count("b")


def test_least_request_skips_excluded_and_down() -> None:
    for weights in ([1, 1, 1], [1, 2, 3]):
        pool = make("least-request", weights)
        pool.set_state("b", Health.DOWN, 0.0)
        assert "b" not in run(pool, 30)
        req = RequestView(request_id=99, exclude=frozenset({"a"}))
        assert [pool.strategy.pick(pool.views, req, 0.0).id for _ in range(5)] == ["c"] * 5  # type: ignore[union-attr]
        req = RequestView(request_id=100, exclude=frozenset({"a", "c"}))
        assert pool.pick(req, 0.0) is None


def test_least_request_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match="choice_count=1"):
        make_strategy("least-request", {"choice_count": "1"})
    with pytest.raises(ConfigError, match="active_request_bias"):
        make_strategy("least-request", {"active_request_bias": "-0.5"})
    with pytest.raises(ConfigError, match="active_request_bias"):
        make_strategy("least-request", {"active_request_bias": "nan"})


# -- wrr-orca -------------------------------------------------------------------------


def agent(pool: Pool, backend: str, now: float, util: float, qps: float, eps: float = 0) -> None:
    report = LoadReport(server=backend, source="agent", t=now, cpu_util=util, qps=qps, eps=eps)
    pool.report(backend, report, now)


def capacity_1_2(pool: Pool, now: float) -> None:
    """Reports of two servers that each serve what they get at half their CPU: a does
    100/s, b 200/s, so a's capacity is half b's."""
    agent(pool, "a", now, util=0.5, qps=100.0)
    agent(pool, "b", now, util=0.5, qps=200.0)


def drive(pool: Pool, start: float, end: float, rate: float = 300.0) -> str:
    """Picks at ``rate`` per second in ``[start, end)``, reports every 0.25 s."""
    out = []
    k = 0
    t = start
    while t < end:
        if k % int(rate / 4) == 0:
            capacity_1_2(pool, t)
        req = RequestView(request_id=int(start * 1e6) + k)
        view = pool.pick(req, t)
        assert view is not None
        pool.dispatch(view, req, t)
        pool.complete(view, req, OK, t)
        out.append(view.id)
        k += 1
        t = start + k / rate
    return "".join(out)


def test_wrr_orca_blackout_keeps_shares_equal_then_capacity_shares() -> None:
    pool = make("wrr-orca", [1, 1])
    strategy = pool.strategy
    first = drive(pool, 0.0, 10.0)
    assert counts(first, "ab") == [1500, 1500]  # 10 s of round robin: the blackout
    assert strategy.rr_fallbacks == 10  # type: ignore[attr-defined]
    after = drive(pool, 10.0, 20.0)
    a, b = counts(after, "ab")
    assert strategy.weights_in_force == {"a": 200.0, "b": 400.0}  # type: ignore[attr-defined]
    assert b / a == pytest.approx(2.0, rel=0.05), (a, b)
    assert abs(a - 1000) <= 10, (a, b)  # EDF per 1 s schedule: within 1 each rebuild


def test_wrr_orca_blackout_zero_uses_weights_at_once() -> None:
    pool = make("wrr-orca", [1, 1], blackout_period="0")
    capacity_1_2(pool, 0.0)
    seq = run(pool, 300)
    assert counts(seq, "ab") in ([100, 200], [99, 201], [101, 199])


def test_wrr_orca_weight_formula_and_error_penalty() -> None:
    for penalty, expected in (("1", 100 / (0.5 + 0.1)), ("0", 200.0), ("2", 100 / 0.7)):
        pool = make("wrr-orca", [1, 1], error_utilization_penalty=penalty)
        agent(pool, "a", 0.0, util=0.5, qps=100.0, eps=10.0)
        rec = pool.strategy.records["a"]  # type: ignore[attr-defined]
        assert rec.weight == pytest.approx(expected)


def test_wrr_orca_ignores_empty_reports_and_merges_sources() -> None:
    pool = make("wrr-orca", [1, 1])
    strategy = pool.strategy
    agent(pool, "a", 0.0, util=0.0, qps=100.0)  # util 0: no weight
    agent(pool, "b", 0.0, util=0.5, qps=0.0)  # qps 0: no weight
    for backend in "ab":
        assert strategy.records[backend].non_empty_since is None  # type: ignore[attr-defined]
        assert strategy.usable_weight(backend, 100.0) == 0.0  # type: ignore[attr-defined]
    # live: cpu_util from the agent, qps and eps from the server's response reports
    pool.report("b", LoadReport(server="b", source="agent", t=0, cpu_util=0.25), 1.0)
    rec = strategy.records["b"]  # type: ignore[attr-defined]
    assert rec.non_empty_since is None  # b's only qps so far was 0
    pool.report("b", LoadReport(server="b", source="response", t=0, qps=50.0, eps=5.0), 2.0)
    assert rec.weight == pytest.approx(50 / (0.25 + 0.1))
    assert (rec.non_empty_since, rec.last_updated) == (2.0, 1.0)  # as old as its older input


def test_wrr_orca_mean_weight_for_backends_without_one() -> None:
    pool = make("wrr-orca", [1, 1, 1], blackout_period="0")
    agent(pool, "a", 0.0, util=1.0, qps=100.0)
    agent(pool, "b", 0.0, util=1.0, qps=300.0)
    seq = run(pool, 600)
    assert pool.strategy.weights_in_force == {"a": 100.0, "b": 300.0, "c": 200.0}  # type: ignore[attr-defined]
    assert all(abs(g - e) <= 1 for g, e in zip(counts(seq), [100, 300, 200], strict=True))


def test_wrr_orca_one_usable_weight_is_round_robin() -> None:
    pool = make("wrr-orca", [1, 1, 1], blackout_period="0")
    agent(pool, "a", 0.0, util=0.1, qps=1000.0)
    seq = run(pool, 9)
    assert sorted(seq[:3]) == ["a", "b", "c"] and seq[:3] * 3 == seq
    assert pool.strategy.weights_in_force == {"a": 1.0, "b": 1.0, "c": 1.0}  # type: ignore[attr-defined]


def test_wrr_orca_weights_expire_and_blackout_again() -> None:
    pool = make("wrr-orca", [1, 1], weight_expiration_period="60")
    strategy = pool.strategy

    def weights_at(now: float) -> dict[str, float]:
        run(pool, 1, now=now, start=int(now * 1000))
        return strategy.weights_in_force  # type: ignore[attr-defined,no-any-return]

    capacity_1_2(pool, 0.0)
    capacity_1_2(pool, 10.0)  # the last update
    assert weights_at(10.0) == {"a": 200.0, "b": 400.0}
    assert weights_at(69.0) == {"a": 200.0, "b": 400.0}
    assert weights_at(70.0) == {"a": 1.0, "b": 1.0}  # 60 s old: expired, blackout reset
    assert strategy.records["a"].non_empty_since is None  # type: ignore[attr-defined]
    capacity_1_2(pool, 75.0)  # reports again: a new blackout from 75 s
    assert weights_at(84.0) == {"a": 1.0, "b": 1.0}
    capacity_1_2(pool, 84.5)
    assert weights_at(85.0) == {"a": 200.0, "b": 400.0}


def test_wrr_orca_backend_back_from_down_starts_over() -> None:
    pool = make("wrr-orca", [1, 1, 1], blackout_period="0")
    for backend, qps in (("a", 100.0), ("b", 200.0), ("c", 300.0)):
        agent(pool, backend, 0.0, util=1.0, qps=qps)
    run(pool, 1)
    pool.set_state("c", Health.DOWN, 0.5)
    pool.set_state("c", Health.UP, 0.6)
    assert "c" not in pool.strategy.records  # type: ignore[attr-defined]
    run(pool, 1, now=0.7, start=1)
    assert pool.strategy.weights_in_force == {"a": 100.0, "b": 200.0, "c": 150.0}  # type: ignore[attr-defined]


def test_wrr_orca_rebuilds_only_every_update_period() -> None:
    pool = make("wrr-orca", [1, 1], blackout_period="0", weight_update_period="2")
    capacity_1_2(pool, 0.0)
    run(pool, 1)
    agent(pool, "a", 0.5, util=0.5, qps=400.0)
    run(pool, 1, now=1.9, start=1)
    assert pool.strategy.weights_in_force["a"] == 200.0  # type: ignore[attr-defined]
    run(pool, 1, now=2.0, start=2)
    assert pool.strategy.weights_in_force["a"] == 800.0  # type: ignore[attr-defined]


def test_wrr_orca_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"weight_update_period=0\.05"):
        make_strategy("wrr-orca", {"weight_update_period": "0.05"})
    with pytest.raises(ConfigError, match="error_utilization_penalty"):
        make_strategy("wrr-orca", {"error_utilization_penalty": "-1"})
    with pytest.raises(ConfigError, match="blackout_period"):
        make_strategy("wrr-orca", {"blackout_period": "inf"})
    with pytest.raises(ConfigError, match="weight_expiration_period"):
        make_strategy("wrr-orca", {"weight_expiration_period": "0"})


# -- c3 -------------------------------------------------------------------------------


def respond(
    pool: Pool,
    view: BackendView,
    req: RequestView,
    now: float,
    queue: int,
    service_ms: float,
    latency_ms: float,
) -> None:
    report = LoadReport(
        server=view.id, source="response", t=now, inflight=queue, service_ms=service_ms
    )
    pool.report(view.id, report, now)
    pool.complete(view, req, Outcome(ok=True, latency_ms=latency_ms), now)


def test_c3_score_is_the_papers_psi() -> None:
    state = ServerState(0.0, C3Config())
    state.observe(queue=2, service_ms=4.0, latency_ms=10.0)
    # EWMAs from 0 with alpha 0.9: q 1.8, 1/mu 3.6, R - 1/mu 5.4
    assert (state.q, state.s, state.r_minus_s) == pytest.approx((1.8, 3.6, 5.4))
    assert state.score(0, 1) == pytest.approx(5.4 + 2.8**3 * 3.6)
    assert state.score(2, 3) == pytest.approx(5.4 + (1 + 6 + 1.8) ** 3 * 3.6)
    state.observe(queue=0, service_ms=1.0, latency_ms=2.0)
    assert (state.q, state.s, state.r_minus_s) == pytest.approx((0.18, 1.26, 1.44))


def test_c3_ranks_by_feedback_and_outstanding() -> None:
    pool = make("c3", [1, 1, 1])
    strategy = pool.strategy
    views = {v.id: v for v in pool.views}
    # no feedback yet: every score 0, ties to the first in list order
    req = RequestView(request_id=1)
    assert pool.pick(req, 0.0) is views["a"]
    assert strategy.ties == 1  # type: ignore[attr-defined]
    pool.dispatch(views["a"], req, 0.0)
    respond(pool, views["a"], req, 0.001, queue=0, service_ms=1.0, latency_ms=2.0)
    # a: 0.9 + 1 * 0.9 = 1.8; b, c still 0: b first
    assert pool.pick(RequestView(request_id=2), 0.002) is views["b"]
    for rid, (backend, queue, service) in enumerate((("b", 4, 2.0), ("c", 0, 0.5)), start=3):
        req = RequestView(request_id=rid)
        pool.dispatch(views[backend], req, 0.002)
        respond(pool, views[backend], req, 0.003, queue=queue, service_ms=service, latency_ms=3.0)
    scores = {v.id: strategy.score(v, 0.004) for v in pool.views}  # type: ignore[attr-defined]
    assert scores == pytest.approx({"a": 0.9 + 0.9, "b": 0.9 + 4.6**3 * 1.8, "c": 2.25 + 0.45})
    seq = hold(pool, 4, start=10, now=0.004)
    # a 1.8 < c 2.7; a with 1 outstanding: 0.9 + 8 * 0.9 = 8.1 > c; then c 2.25 + 3.6...
    assert seq == "acca"


def test_c3_clients_multiply_own_outstanding() -> None:
    one = make("c3", [1, 1])
    many = make("c3", [1, 1], clients="10")
    for pool in (one, many):
        views = {v.id: v for v in pool.views}
        for rid, backend in enumerate("ab"):
            req = RequestView(request_id=rid)
            pool.dispatch(views[backend], req, 0.0)
            respond(pool, views[backend], req, 0.0, queue=0, service_ms=1.0, latency_ms=1.0)
        hold(pool, 1, start=10)  # tie: a takes one request
    a1 = one.strategy.score(one.views[0], 0.0)  # type: ignore[attr-defined]
    a10 = many.strategy.score(many.views[0], 0.0)  # type: ignore[attr-defined]
    assert a1 == pytest.approx(2.0**3 * 0.9)
    assert a10 == pytest.approx(11.0**3 * 0.9)


def test_c3_rate_limiter_passes_over_and_backpressure() -> None:
    pool = make("c3", [1, 1], max_tokens="1", tie="first")
    strategy = pool.strategy
    assert hold(pool, 2) == "ab"  # a has spent its one token: b, though a ranks first
    assert strategy.backpressure == 0  # type: ignore[attr-defined]
    assert hold(pool, 1, start=2) == "a"  # no token anywhere: the best anyway
    assert strategy.backpressure == 1  # type: ignore[attr-defined]
    assert strategy.backpressure_wait_ms == pytest.approx(20.0)  # type: ignore[attr-defined]
    # srate 1 per 20 ms: 10 ms later half a token, 20 ms later a whole one
    assert hold(pool, 1, start=3, now=0.010) == "a"
    assert strategy.backpressure == 2  # type: ignore[attr-defined]
    assert strategy.backpressure_wait_ms == pytest.approx(30.0)  # type: ignore[attr-defined]
    assert hold(pool, 1, start=4, now=0.020) == "a"
    assert strategy.backpressure == 2  # type: ignore[attr-defined]


def test_c3_token_bucket_refills_at_srate_up_to_max() -> None:
    cfg = C3Config(max_tokens=3.0)
    state = ServerState(0.0, cfg)
    assert [state.try_acquire(0.0, cfg) for _ in range(4)] == [0.0, 0.0, 0.0, 20.0]
    state.srate = 4.0  # 4 per 20 ms: one every 5 ms
    assert state.try_acquire(2.0, cfg) == pytest.approx((1 - 0.4) * 20 / 4)
    assert state.try_acquire(5.0, cfg) == 0.0
    assert state.try_acquire(1000.0, cfg) == 0.0 and state.tokens == pytest.approx(2.0)


def test_c3_receive_rate_slots() -> None:
    cfg = C3Config()
    state = ServerState(0.0, cfg)
    for t in (1.0, 5.0, 9.0):
        state.answered(t, cfg)  # three in slot 0
    assert state.receive_rate(25.0, cfg) == pytest.approx(3 / 20 + 100 * 19 / 20)
    state.answered(26.0, cfg)
    assert state.receive_rate(70.0, cfg) == 1.0  # after an idle slot: the count itself


def set_rates(state: ServerState, now_ms: float, srate: float, rrate: float) -> None:
    """Put ``srate`` and ``rrate`` in place, the receive slot at ``now_ms`` (20 ms slots)."""
    state.srate, state.rrate = srate, rrate
    state.slot, state.count = math.floor(now_ms / 20), 0


def test_c3_cubic_rate_control() -> None:
    cfg = C3Config()
    state = ServerState(0.0, cfg)
    state.answered(1.0, cfg)  # srate 1 < rrate 100, never decreased: + s_max
    assert state.srate == 11.0
    set_rates(state, 100.0, srate=50.0, rrate=10.0)
    state.answered(100.0, cfg)  # srate > rrate, last increase 99 ms ago > 4 x 20: decrease
    assert (state.r_max, state.srate, state.decreased_at) == (50.0, 10.0, 100.0)
    set_rates(state, 101.0, srate=30.0, rrate=10.0)
    state.answered(101.0, cfg)  # again: nothing increased since
    assert (state.r_max, state.srate) == (30.0, 6.0)
    k = math.cbrt(30.0 * 0.2 / 0.000004)  # 114.5 ms to climb back to R0
    set_rates(state, 201.0, srate=6.0, rrate=100.0)
    state.answered(201.0, cfg)  # cubic target 0.000004 (100 - k)^3 + 30 = 30.0: capped +10
    assert state.srate == 16.0
    set_rates(state, 231.0, srate=28.0, rrate=100.0)
    state.answered(231.0, cfg)  # target 30.0 is less than 10 above 28: taken
    assert state.srate == pytest.approx(0.000004 * (130 - k) ** 3 + 30)
    rate = state.srate
    set_rates(state, 300.0, srate=rate, rrate=1.0)
    state.answered(300.0, cfg)  # srate > rrate, but increased 69 ms ago: hysteresis
    assert state.srate == rate
    set_rates(state, 312.0, srate=rate, rrate=1.0)
    state.answered(312.0, cfg)  # 81 ms after the increase: decrease
    assert (state.decreased_at, state.srate) == (312.0, pytest.approx(0.2 * rate))


def test_c3_feedback_only_from_answered_requests() -> None:
    pool = make("c3", [1, 1])
    strategy = pool.strategy
    req = RequestView(request_id=1)
    view = pool.pick(req, 0.0)
    assert view is not None and view.id == "a"
    pool.dispatch(view, req, 0.0)
    pool.report(
        "a", LoadReport(server="a", source="response", t=0, inflight=5, service_ms=9.0), 0.0
    )
    pool.complete(view, req, Outcome(ok=False, latency_ms=30_000.0, error_kind="timeout"), 30.0)
    state = strategy.servers["a"]  # type: ignore[attr-defined]
    assert (state.q, state.s, state.srate) == (0.0, 0.0, 1.0)  # no response: nothing moves
    req = RequestView(request_id=2)
    pool.dispatch(view, req, 30.0)
    pool.complete(view, req, Outcome(ok=False, latency_ms=1.0, error_kind="rejected"), 30.0)
    # an answer, no feedback: the rate moves (30 idle seconds: rrate 0 < srate 1, decrease)
    assert (state.q, state.rrate, state.srate) == (0.0, 0.0, 0.2)


def test_c3_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match="clients=0"):
        make_strategy("c3", {"clients": "0"})
    with pytest.raises(ConfigError, match="rate_interval_ms"):
        make_strategy("c3", {"rate_interval_ms": "0"})
    with pytest.raises(ConfigError, match="max_tokens"):
        make_strategy("c3", {"max_tokens": "0.5"})
