"""The simulator: determinism, conservation, queueing theory, the results contract, config."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.loadreport import LoadReport
from lblab.results import ERROR_KINDS, TABLES, missing_columns
from lblab.simulator.config import (
    EPOCH,
    ServerEvent,
    ServerGroup,
    SimConfig,
    config_from_mapping,
)
from lblab.simulator.output import write_run
from lblab.simulator.run import Simulation, simulate
from lblab.simulator.service import Exponential, Fixed, JsonCost, fit_cost_model, parse_service
from lblab.simulator.workload import ClosedUsers, OpenArrivals, scenario_cells


def small(**kw) -> SimConfig:
    base = {"strategy": "p2c", "servers": 4, "requests": 3000, "rate": 300, "service": "exp:10ms"}
    return config_from_mapping(base | kw)


def test_same_seed_gives_identical_tables_and_another_seed_does_not():
    a, b = simulate(small(seed=7)), simulate(small(seed=7))
    for name in TABLES:
        assert getattr(a, name).equals(getattr(b, name)), name
    c = simulate(small(seed=8))
    assert not a.requests.equals(c.requests)


def test_every_request_ends_once_ok_or_with_a_known_error():
    # One slow server with room for 2, a deadline, rejections replayed elsewhere.
    cfg = SimConfig(
        strategy="rr",
        servers=(
            ServerGroup(count=1, service=Fixed(0.5), capacity=2),
            ServerGroup(count=2, service=Exponential(0.02)),
        ),
        requests=2000,
        arrivals=OpenArrivals(rate=120.0),
        deadline=1.0,
        server_delay=0.002,
        client_delay=0.001,
        max_tries=2,
    )
    sim = Simulation(cfg)
    result = sim.run()
    t = result.requests.to_pandas()
    assert len(t) == cfg.requests
    assert sorted(t["request_id"]) == list(range(cfg.requests))
    assert sim.pools[0].outstanding == 0  # every dispatch was completed exactly once
    assert set(t.loc[~t["ok"], "error_kind"]) <= set(ERROR_KINDS)
    assert t.loc[t["ok"], "error_kind"].isna().all()
    assert (t["attempts"] > 1).any(), "rejections should have been replayed"
    assert (t.loc[t["ok"], "latency_ms"] <= 1000.0 + 1e-6).all()
    assert (t["t_sent"] >= EPOCH).all()


def test_each_attempt_is_timed_from_its_own_dispatch():
    # As the balancer's router does (tests/unit/test_router.py): a request refused by
    # the busy one-slot server is replayed, and the backend that answers the replay is
    # charged from the replay's dispatch, not from the request's first one.
    cfg = SimConfig(
        strategy="rr",
        servers=(
            ServerGroup(count=1, service=Fixed(0.5), capacity=1),
            ServerGroup(count=1, service=Fixed(0.1)),
        ),
        requests=40,
        arrivals=OpenArrivals(rate=50.0, poisson=False),
        server_delay=0.01,
        max_tries=2,
    )
    sim = Simulation(cfg)
    strategy = sim.pools[0].strategy
    sent: dict[int, float] = {}
    timed: list[tuple[float, float, bool]] = []  # (charged ms, since this dispatch, replay)
    refused: set[int] = set()
    dispatch, complete = strategy.on_dispatch, strategy.on_complete

    def on_dispatch(backend, request, now):  # type: ignore[no-untyped-def]
        sent[request.request_id] = now
        dispatch(backend, request, now)

    def on_complete(backend, request, outcome, now):  # type: ignore[no-untyped-def]
        replay = request.request_id in refused
        timed.append((outcome.latency_ms, (now - sent[request.request_id]) * 1000.0, replay))
        if outcome.error_kind == "rejected":
            refused.add(request.request_id)
        complete(backend, request, outcome, now)

    strategy.on_dispatch, strategy.on_complete = on_dispatch, on_complete  # type: ignore[method-assign]
    sim.run()
    replays = [t for t in timed if t[2]]
    assert replays, "the busy server should have refused some requests"
    for charged, since_dispatch, _ in timed:
        assert charged == pytest.approx(since_dispatch)


def test_deadline_turns_a_stuck_server_into_timeouts():
    cfg = small(
        strategy="first", servers=1, requests=200, rate=100, service="fixed:100ms", deadline="500ms"
    )
    t = simulate(cfg).requests.to_pandas()
    assert (t["error_kind"] == "timeout").sum() > 100
    assert (t.loc[t["error_kind"] == "timeout", "latency_ms"].round(6) == 500.0).all()


def test_mm1_mean_response_and_utilisation_match_theory():
    # M/M/1 with lambda = 50/s, mu = 100/s: W = 1 / (mu - lambda) = 20 ms, rho = 0.5.
    cfg = small(strategy="first", servers=1, requests=40_000, rate=50, service="exp:10ms", seed=3)
    result = simulate(cfg)
    lat = result.requests.column("latency_ms").to_numpy()
    assert lat.mean() == pytest.approx(20.0, rel=0.08)
    cpu = result.cpu.column("cpu_percent").to_numpy()
    assert cpu.mean() == pytest.approx(50.0, rel=0.05)
    # Little's law: mean number in system L = lambda * W = 1.0.
    assert 50 * lat.mean() / 1000 == pytest.approx(1.0, rel=0.08)


def test_closed_users_never_exceed_their_concurrency():
    cfg = SimConfig(
        strategy="lc",
        servers=(ServerGroup(count=3, service=Exponential(0.01)),),
        requests=1500,
        arrivals=ClosedUsers(users=4, think=0.005),
    )
    result = simulate(cfg)
    assert result.requests.num_rows == 1500
    assert max(result.picks.column("inflight_at_pick").to_pylist()) < 4


def test_tables_meet_the_results_contract_and_land_on_disk(tmp_path):
    results = [simulate(small(requests=500)), simulate(replace(small(requests=500), strategy="rr"))]
    counts = write_run(tmp_path, results)
    assert counts == {"requests": 1000, "cpu": pytest.approx(counts["cpu"]), "picks": 1000}
    for name in TABLES:
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert missing_columns(name, table.column_names) == [], name
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["simulated"] is True
    assert manifest["config"][0]["servers"][0]["service"] == "exp:10ms"
    assert set(manifest["seeds"]) == {"p2c/r1", "rr/r1"}  # numbered from 1, as live runs


def test_picks_can_be_sampled_or_switched_off():
    assert simulate(small(requests=1000, picks_every=10)).picks.num_rows == 100
    assert simulate(small(requests=1000, picks_every=0)).picks.num_rows == 0


class _ReportProbe:
    """A real strategy that also records the agent reports the pool hands it."""

    def __init__(self) -> None:
        self.inner = make_strategy("rr", rng=random.Random(1))
        self.reports: list[tuple[float, LoadReport]] = []
        self.name, self.summary = "rr", "probe"
        self.uses_agent_reports = True

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def on_report(self, backend, report, now):
        self.reports.append((now, report))


def test_agent_reports_arrive_with_the_configured_staleness():
    probe = _ReportProbe()
    cfg = small(strategy="rr", requests=2000, rate=400, report_period="100ms", report_delay="30ms")
    Simulation(cfg, strategy=probe).run()  # type: ignore[arg-type]
    assert probe.reports
    ages = {round(now - (r.t - EPOCH), 6) for now, r in probe.reports}
    assert ages == {0.03}
    utils = [r.cpu_util for _, r in probe.reports]
    assert all(0.0 <= u <= 1.0 for u in utils) and max(utils) > 0.1


@pytest.mark.parametrize(
    ("spec", "mean"),
    [
        ("fixed:250ms", 0.25),
        ("exp:10ms", 0.01),
        ("bimodal:1ms,501ms,0.1", 0.051),
        ("lognormal:50ms,1.5", 0.05),
    ],
)
def test_service_specs_parse_and_round_trip(spec, mean):
    model = parse_service(spec)
    assert model.mean_s == pytest.approx(mean)
    assert parse_service(model.spec()) == model


@pytest.mark.parametrize(
    "spec", ["exp", "exp:-1ms", "bimodal:1ms,2ms,1.5", "json:b=1", "zipf:3", "fixed:soon"]
)
def test_bad_service_specs_name_the_problem(spec):
    with pytest.raises(ConfigError, match="service"):
        parse_service(spec)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="unknown settings"):
        config_from_mapping({"servres": 3})
    with pytest.raises(ConfigError, match="either rate"):
        config_from_mapping({"rate": 10, "users": 3})
    with pytest.raises(ConfigError, match="scenario"):
        config_from_mapping({"scenario": "xl+xr"})
    with pytest.raises(ConfigError, match="unknown strategy"):
        simulate(config_from_mapping({"strategy": "nope", "requests": 5}))


def test_toml_style_server_groups_build_heterogeneous_pools():
    cfg = config_from_mapping(
        {
            "servers": [
                {"count": 2, "service": "exp:10ms"},
                {"count": 1, "service": "exp:10ms", "speed": 7, "weight": 7},
            ],
            "strategy": "rr",
            "requests": 3000,
            "rate": 400,
            "scenario": "variation",
        }
    )
    assert cfg.server_count == 3 and len(cfg.cells) == 9
    t = simulate(cfg).requests.to_pandas()
    by_server = t.groupby("server")["service_ms"].mean()
    assert by_server["s3"] < by_server["s1"] / 4  # the big server is ~7x faster
    assert set(zip(t["package_bytes"], t["work_bytes"], strict=True)) <= set(
        scenario_cells("variation")
    )


def test_cost_model_fit_recovers_known_coefficients():
    rng = random.Random(5)
    truth = JsonCost(0.0004, 2e-8, 5e-9)
    work, package, service = [], [], []
    for _ in range(300):
        w, p = rng.choice([10_000, 100_000, 1_000_000]), rng.choice([100, 10_000, 1_000_000])
        work.append(w)
        package.append(p)
        service.append(truth.sample(rng, w, p) * 1000 * rng.uniform(0.97, 1.03))
    fit = fit_cost_model(work, package, service)
    assert fit.model.b == pytest.approx(truth.b, rel=0.05)
    assert fit.model.c == pytest.approx(truth.c, rel=0.1)
    assert fit.r2 > 0.98


def test_simulated_time_ends_at_the_last_answer_not_the_last_pending_deadline(tmp_path):
    # 1000 requests at 250/s take about 4 s; the default 30 s deadline of every request
    # is still pending then and must not stretch the run (issue 9, item 4).
    result = simulate(small(requests=1000, rate=250))
    t = result.requests.to_pandas()
    last_answer = float((t["t_sent"] + t["latency_ms"] / 1000.0).max()) - EPOCH
    assert result.config.deadline == 30.0
    assert result.sim_seconds == pytest.approx(last_answer, abs=1e-6)
    assert 3.5 < result.sim_seconds < 5.0
    write_run(tmp_path, [result])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["end"] - manifest["start"] == pytest.approx(last_answer, abs=1e-6)


def test_a_run_that_cannot_finish_is_refused_with_its_bound() -> None:
    with pytest.raises(ConfigError, match=r"at least 9e\+300 simulated seconds .* at most a week"):
        small(requests=10, rate=1e-300)  # was an OverflowError deep in the clock
    with pytest.raises(ConfigError, match=r"served at most .* per second"):
        small(requests=10, servers=1, service="fixed:604800s")


def test_a_run_that_passes_its_horizon_stops_there(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 servers sampled every 0.25 s may span 1000 * 0.25 / 3 = 83 s here; the one
    # request's 200 s of service is spread over all three in the start estimate (67 s).
    monkeypatch.setattr("lblab.simulator.config.MAX_CPU_ROWS", 1000)
    cfg = small(requests=1, servers=3, service="fixed:200s", deadline="none")
    with pytest.raises(ConfigError, match=r"passed 83.3 simulated seconds with 1 of 1 requests"):
        simulate(cfg)


# ---- a phase's duration and the run's server names ----------------------------------


@pytest.mark.parametrize("load", [{"rate": 400}, {"users": 8, "think": "5ms"}])
def test_a_duration_sends_for_that_long_then_answers_what_is_in_flight(load):
    cfg = config_from_mapping(
        {"servers": 3, "service": "exp:5ms", "duration": "4s", "deadline": "1s", **load}
    )
    assert cfg.requests > 1_000_000  # no count given: it only caps the run
    result = simulate(cfg)
    t = result.requests.to_pandas()
    sent = t["t_sent"] - EPOCH
    assert 3.9 < sent.max() < 4.0  # nothing sent at or after the duration
    assert len(t) > 1000
    assert result.sim_seconds == pytest.approx((sent + t["latency_ms"] / 1000).max())


def test_a_count_still_caps_a_run_with_a_duration():
    result = simulate(small(duration="10s", requests=200))
    assert result.requests.num_rows == 200
    assert (result.requests.to_pandas()["t_sent"] - EPOCH).max() < 1.0


def test_a_duration_shorter_than_the_gap_between_sends_sends_the_first_only():
    result = simulate(small(rate=0.5, duration="1s", requests=5, poisson=False))
    assert result.requests.num_rows == 1  # sent at 0; the next would be at 2 s


def test_a_trace_refuses_a_duration():
    with pytest.raises(ConfigError, match="a trace sends its own requests"):
        config_from_mapping({"scenario": "azure-code", "rate": 10, "duration": "5s"})


def test_servers_take_the_names_given():
    cfg = replace(small(servers=3), server_ids=("small", "mid", "big"))
    result = simulate(cfg)
    assert result.servers == ("small", "mid", "big")
    assert set(result.requests.column("server").to_pylist()) <= {"small", "mid", "big"}
    with pytest.raises(ConfigError, match="2 names for 3 servers"):
        replace(cfg, server_ids=("a", "b"))
    with pytest.raises(ConfigError, match="is not an id"):
        replace(cfg, server_ids=("a", "b", "c d"))


# ---- a live run's timeline in the simulator ---------------------------------------


def _timed(cfg: SimConfig, *events: ServerEvent):
    result = simulate(replace(cfg, timeline=events))
    t = result.requests.to_pandas()
    t["t"] = t["t_sent"] - EPOCH
    return result, t


@pytest.mark.parametrize("balancers", [1, 3])
def test_a_killed_server_fails_what_it_had_and_takes_work_again_after_a_restart(balancers):
    cfg = config_from_mapping(
        {"strategy": "rr", "servers": 3, "service": "exp:5ms", "users": 30, "think": "5ms",
         "duration": "6s", "server_delay": "1ms", "balancers": balancers}
    )  # fmt: skip
    sim = Simulation(replace(cfg, timeline=(ServerEvent(2.0, "kill", "s2"),
                                            ServerEvent(3.0, "restart", "s2"))))  # fmt: skip
    result = sim.run()
    t = result.requests.to_pandas()
    t["t"] = t["t_sent"] - EPOCH
    failed = t[~t["ok"]]
    assert set(failed["error_kind"]) == {"connection"}
    assert set(failed["server"]) == {"s2"}
    assert len(failed) >= balancers  # each balancer had requests there
    assert failed["t"].between(1.9, 2.002).all()  # sent before the loss was seen
    s2 = t[t["server"] == "s2"]
    assert not s2["t"].between(2.002, 3.0).any()  # down until a reconnect finds it back
    assert s2["t"].between(3.0, 6.0).any()
    assert all(pool.outstanding == 0 for pool in sim.pools)
    assert result.counters["s2"]["faults"] == len(failed)  # summed over the balancers


def test_a_kill_without_a_restart_keeps_the_server_out_and_reconnects_stop_at_the_end():
    cfg = small(strategy="lc", duration="3s", requests=1_000_000)
    result, t = _timed(cfg, ServerEvent(1.0, "kill", "s1"))
    assert not t.loc[t["t"] > 1.0001, "server"].eq("s1").any()
    assert result.sim_seconds < 3.5


def test_slow_scales_service_times_until_it_is_undone():
    cfg = small(strategy="rr", servers=2, service="fixed:10ms", rate=50, duration="6s")
    _, t = _timed(cfg, ServerEvent(2.0, "slow", "s2", 3.0, 5.0), ServerEvent(4.0, "slow", "s2"))
    s2 = t[t["server"] == "s2"]
    during = s2[s2["t"].between(2.01, 3.98)]["service_ms"]
    outside = s2[~s2["t"].between(1.99, 4.01)]["service_ms"]
    assert during.to_numpy() == pytest.approx(35.0)  # 3 x 10 ms + 5 ms
    assert outside.to_numpy() == pytest.approx(10.0)


def test_probes_to_a_killed_server_are_lost_not_timed_out():
    cfg = small(strategy="prequal", servers=4, duration="3s", server_delay="1ms")
    result, _ = _timed(cfg, ServerEvent(1.0, "kill", "s3"))
    assert result.counters["s3"]["probes_failed"] > 0
    assert result.counters["s3"]["probes_timed_out"] == 0


def test_a_timeline_names_the_runs_servers_and_simulated_actions():
    with pytest.raises(ConfigError, match="'explode' is not simulated"):
        ServerEvent(1.0, "explode", "s1")
    with pytest.raises(ConfigError, match="'s9' is not one of the servers"):
        replace(small(), timeline=(ServerEvent(1.0, "kill", "s9"),))


def test_a_drained_server_refuses_new_work_finishes_the_rest_and_loses_nothing():
    cfg = config_from_mapping(
        {"strategy": "rr", "servers": 3, "service": "exp:5ms", "users": 20, "think": "5ms",
         "duration": "5s", "server_delay": "1ms"}
    )  # fmt: skip
    sim = Simulation(replace(cfg, timeline=(ServerEvent(1.0, "drain", "s2"),
                                            ServerEvent(3.0, "restart", "s2"))))  # fmt: skip
    result = sim.run()
    t = result.requests.to_pandas()
    t["t"] = t["t_sent"] - EPOCH
    assert t["ok"].all()  # refused or unanswered requests went elsewhere
    assert (t["attempts"] > 1).any()
    assert not t.loc[t["t"].between(1.01, 3.0), "server"].eq("s2").any()
    assert t.loc[t["t"] > 3.0, "server"].eq("s2").any()
    assert result.counters["s2"]["faults"] == 0  # a drain is no fault of the server


def test_a_drain_that_outlasts_its_deadline_ends_with_the_server():
    cfg = small(strategy="rr", servers=2, service="fixed:400ms", rate=20, duration="3s")
    _, t = _timed(replace(cfg, drain_timeout=0.5), ServerEvent(0.5, "drain", "s1"))
    s1 = t[t["server"] == "s1"]
    assert not s1.loc[s1["t"] > 1.01].shape[0]  # exited by 1.0 s
    assert t["ok"].all()  # the unanswered ones were replayed on s2


def test_a_paused_server_is_held_down_as_hung_and_answers_its_backlog_after_resume():
    cfg = small(strategy="rr", servers=3, rate=200, duration="10s", server_delay="1ms")
    result, t = _timed(cfg, ServerEvent(1.0, "pause", "s2"), ServerEvent(6.0, "resume", "s2"))
    assert t["ok"].all()  # nothing failed: paused requests wait, then are answered
    s2 = t[t["server"] == "s2"]
    hung_at = 1.0 + 0.001 + 3.0  # the delay, then HUNG_AFTER_S of silence
    assert not s2["t"].between(hung_at + 0.01, 6.0).any()  # ejected, held down
    waited = s2[s2["t"].between(1.01, hung_at - 0.01)]
    assert len(waited) > 50
    assert ((waited["t"] + waited["latency_ms"] / 1000) >= 6.0).all()  # after the resume
    assert s2["t"].between(6.1, 10.0).any()  # taken back once it answers
    assert result.counters["s2"]["ejections"] == 1


def test_a_pause_keeps_the_remaining_service_time():
    cfg = small(strategy="rr", servers=1, service="fixed:1s", rate=1, requests=1)
    _, t = _timed(cfg, ServerEvent(0.5, "pause", "s1"), ServerEvent(2.5, "resume", "s1"))
    assert t["latency_ms"].tolist() == pytest.approx([3000.0])  # 0.5 s, paused 2 s, 0.5 s


def test_a_pause_past_the_silence_limit_loses_the_connection():
    cfg = small(strategy="rr", servers=2, rate=20, duration="40s", deadline="60s")
    _, t = _timed(cfg, ServerEvent(1.0, "pause", "s1"), ServerEvent(35.0, "resume", "s1"))
    failed = t[~t["ok"]]
    assert set(failed["error_kind"]) == {"connection"} and set(failed["server"]) == {"s1"}
    assert (failed["t"] + failed["latency_ms"] / 1000).round(3).eq(31.0).all()  # 1 s + 30 s
    assert t.loc[t["server"] == "s1", "t"].between(35.0, 40.0).any()  # reconnected


def test_a_removed_server_finishes_its_requests_and_an_added_one_takes_work_from_then():
    cfg = replace(
        small(strategy="rr", servers=3, rate=300, duration="6s", server_delay="1ms"),
        joins_later=("s3",),
    )
    sim = Simulation(replace(cfg, timeline=(
        ServerEvent(1.0, "remove", "s2"), ServerEvent(3.0, "add", "s2", weight=2.0),
        ServerEvent(4.0, "add", "s3"),
    )))  # fmt: skip
    result = sim.run()
    t = result.requests.to_pandas()
    t["t"] = t["t_sent"] - EPOCH
    assert t["ok"].all()  # a removal fails nothing: its requests finish where they are
    on = t.groupby("server")["t"]
    assert not t.loc[t["server"] == "s2", "t"].between(1.001, 3.0).any()
    assert on.min()["s3"] >= 4.0 and on.max()["s2"] > 3.0
    assert [v.id for v in sim.pools[0].views] == ["s1", "s2", "s3"]
    assert sim.pools[0].get("s2").weight == 2.0
    assert sim.pools[0].outstanding == 0
