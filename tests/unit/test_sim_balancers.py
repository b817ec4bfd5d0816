"""Many balancers in the simulator: own state each, the documented split, the column, K=1 kept."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lblab.analysis.load import open_results
from lblab.balancer.pool import Pool
from lblab.balancer.strategies.registry import make_strategy
from lblab.cli import app
from lblab.errors import ConfigError
from lblab.results import missing_columns, to_arrow, write_part
from lblab.simulator.config import config_from_mapping, rng_stream
from lblab.simulator.run import Simulation, simulate


def config(**kw):
    base = {"strategy": "p2c", "servers": 4, "requests": 3000, "rate": 300, "service": "exp:10ms"}
    return config_from_mapping(base | kw)


def balancers_of(result) -> list[str]:
    return result.requests.column("balancer").to_pylist()


# ---- each balancer keeps its own state ---------------------------------------------------


def test_each_balancer_has_its_own_pool_strategy_and_random_stream():
    sim = Simulation(config(balancers=3, seed=5))
    assert len(sim.pools) == 3
    assert len({id(p) for p in sim.pools}) == len({id(p.strategy) for p in sim.pools}) == 3
    assert sim.pools[0].views[0] is not sim.pools[1].views[0]
    # b1 draws from the stream one balancer uses; the others from their own.
    streams = ["strategy", "strategy:b2", "strategy:b3"]
    for pool, name in zip(sim.pools, streams, strict=True):
        assert pool.strategy.rng.getstate() == rng_stream(5, 0, name).getstate()  # type: ignore[attr-defined]


def test_a_balancer_counts_only_its_own_requests_in_flight():
    # Every request goes to s1 and stays there 1 s: with two balancers taking turns,
    # each sees only its own requests in flight at its picks (one balancer: 0..9).
    one = {"strategy": "first", "servers": 2, "requests": 10, "rate": 10, "poisson": False}
    one |= {"service": "fixed:1s", "deadline": "none"}
    picks = [simulate(config(**one, balancers=k)).picks for k in (1, 2)]
    inflight = [p.column("inflight_at_pick").to_pylist() for p in picks]
    assert inflight == [list(range(10)), [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]]


def test_each_pool_completes_its_own_dispatches_and_counters_sum_over_balancers():
    sim = Simulation(config(balancers=4, strategy="lc"))
    result = sim.run()
    per_balancer = Counter(balancers_of(result))
    for b, pool in enumerate(sim.pools):
        assert pool.outstanding == 0
        assert sum(c.picks for c in pool.counters.values()) == per_balancer[f"b{b + 1}"]
    assert sum(c["picks"] for c in result.counters.values()) == result.requests.num_rows


def _recorded_reports(monkeypatch) -> list[tuple[int, str]]:
    """Every report a pool is handed: (which pool, the report's source)."""
    seen: list[tuple[int, str]] = []
    report = Pool.report

    def recording(self, backend_id, rep, now):
        seen.append((id(self), rep.source))
        return report(self, backend_id, rep, now)

    monkeypatch.setattr(Pool, "report", recording)
    return seen


@pytest.mark.parametrize(
    ("strategy", "source", "to_every_balancer"),
    [("dwrr", "agent", True), ("dynamic-immediate", "push", True), ("dynamic", "response", False)],
)
def test_reports_reach_the_balancers_that_would_get_them_live(
    monkeypatch, strategy, source, to_every_balancer
):
    seen = _recorded_reports(monkeypatch)
    sim = Simulation(config(strategy=strategy, balancers=3, requests=1500))
    result = sim.run()
    counts = Counter(pool for pool, s in seen if s == source)
    got = [counts[id(p)] for p in sim.pools]
    if to_every_balancer:
        assert got[0] > 0 and got == [got[0]] * 3
    else:  # a response report goes back only to the balancer whose request it answers
        ok = result.requests.filter(result.requests["ok"])
        mine = Counter(ok.column("balancer").to_pylist())
        assert got == [mine["b1"], mine["b2"], mine["b3"]]


def test_probes_go_out_and_come_back_to_the_balancer_that_sent_them():
    sim = Simulation(config(strategy="prequal", balancers=2, requests=2000, rate=200))
    sim.run()
    for pool in sim.pools:
        picks = sum(c.picks for c in pool.counters.values())
        sent = sum(c.probes_sent for c in pool.counters.values())
        answered = sum(c.probes_answered for c in pool.counters.values())
        assert sent == 3 * picks  # r_probe 3, 4 servers: three distinct ones a pick
        assert answered == sent


# ---- the split ---------------------------------------------------------------------------


def test_evenly_spaced_arrivals_go_to_their_index_mod_k():
    result = simulate(config(balancers=3, poisson=False))
    ids = result.requests.column("request_id").to_pylist()
    assert balancers_of(result) == [f"b{i % 3 + 1}" for i in ids]


def test_poisson_arrivals_go_to_a_uniform_balancer_and_keep_their_send_times():
    one, four = simulate(config(requests=8000)), simulate(config(requests=8000, balancers=4))
    counts = Counter(balancers_of(four))
    assert sorted(counts) == ["b1", "b2", "b3", "b4"]
    # Multinomial(8000, 1/4): sd 39 a balancer; 4 sd either way.
    assert all(abs(n - 2000) < 160 for n in counts.values())
    ids = four.requests.column("request_id").to_numpy()
    assert not all(b == f"b{i % 4 + 1}" for i, b in zip(ids, balancers_of(four), strict=True))
    # The draw has its own stream: the arrivals are those of one balancer.
    sent = [np.sort(r.requests.column("t_sent").to_numpy()) for r in (one, four)]
    assert np.array_equal(*sent)


def test_closed_users_are_dealt_round_robin_and_keep_their_balancer():
    # 5 users on 3 balancers: users 1 and 4 on b1, 2 and 5 on b2, 3 on b3; each user
    # sends its next request when its answer comes (10 ms: no queueing with 5 workers a
    # server), so the shares follow the users.
    closed = {"strategy": "rr", "servers": 2, "workers": 5, "service": "fixed:10ms"}
    closed |= {"users": 5, "think": "0ms", "requests": 1000, "balancers": 3}
    result = simulate(config_from_mapping(closed))
    assert Counter(balancers_of(result)) == {"b1": 400, "b2": 400, "b3": 200}


# ---- the balancer column -----------------------------------------------------------------


def test_the_requests_table_names_the_balancer_b1_with_one():
    result = simulate(config(requests=500))
    assert set(balancers_of(result)) == {"b1"}
    assert result.requests.schema.field("balancer").type == pa.string()
    assert missing_columns("requests", result.requests.column_names) == []


def test_a_table_without_the_column_meets_the_contract_and_reads_as_b1(tmp_path):
    row = {"run_id": "r", "scenario": "sp+sr", "strategy": "rr", "replication": 0}
    row |= {"t_sent": 1.0, "latency_ms": 2.0, "ok": True, "error_kind": None}
    row |= {"error_origin": None, "package_bytes": 100, "work_bytes": 10, "server": "s1"}
    assert missing_columns("requests", list(row)) == []
    table = to_arrow("requests", [row])
    assert table.column("balancer").to_pylist() == ["b1"]
    write_part(tmp_path, "requests", "old", pa.Table.from_pylist([row]))  # as a live run writes
    frame = open_results(tmp_path).table("requests", ["balancer", "latency_ms"])
    assert frame["balancer"].tolist() == ["b1"]


def test_the_summary_shows_the_per_balancer_split(tmp_path):
    args = ["simulate", "--servers", "3", "--requests", "600", "--rate", "300", "--balancers", "2",
            "--out", str(tmp_path / "run"), "--no-report"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "per balancer" in result.output
    assert "b1" in result.output and "b2" in result.output


# ---- one balancer is what it was ---------------------------------------------------------


def test_one_balancer_gives_the_figures_it_gave_before_there_could_be_several():
    # Pinned from the simulator before many balancers (the same seed, the same numbers).
    result = simulate(config(seed=7, requests=2000))
    t = result.requests
    servers = t.column("server").to_pylist()
    assert servers[:12] == ["s2", "s3", "s4", "s3", "s4", "s1", "s4", "s2", "s1", "s4", "s2", "s3"]
    assert Counter(servers) == {"s1": 505, "s2": 501, "s3": 482, "s4": 512}
    assert float(np.sum(t.column("latency_ms").to_numpy())) == pytest.approx(37451.134296, abs=1e-6)


def test_a_given_strategy_object_serves_one_balancer_only():
    strategy = make_strategy("p2c")
    Simulation(config(requests=10), strategy)  # one balancer: fine
    with pytest.raises(ConfigError, match="serves one balancer"):
        Simulation(config(requests=10, balancers=2), strategy)


# ---- a bad K is refused in one line --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0, "balancers: 0 must be 1 or more"),
        (1025, "balancers: 1025 must be at most 1024"),
        ("2.5", "balancers: '2.5' is not a whole number"),
        (True, "balancers: True is not a whole number"),
        ("many", "balancers: 'many' is not a whole number"),
    ],
)
def test_a_bad_number_of_balancers_is_refused_in_one_line(value, says):
    with pytest.raises(ConfigError) as refused:
        config(balancers=value)
    assert str(refused.value) == says


def test_the_command_line_refuses_a_bad_number_of_balancers():
    result = CliRunner().invoke(app, ["simulate", "--requests", "10", "--balancers", "0"])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "testbed.balancers: 0 must be 1 or more"


def test_the_strategies_decisions_reach_the_result() -> None:
    """Prequal's random fallbacks (fewer than two probes in its pool: its first picks)
    are summed over the balancers into the result, as /metrics shows them live."""
    from lblab.simulator.config import config_from_mapping
    from lblab.simulator.run import simulate

    config = config_from_mapping(
        {"strategy": "prequal", "servers": 4, "requests": 400, "rate": 200, "balancers": 2}
    )
    decisions = simulate(config).decisions
    assert set(decisions) == {"fallbacks"} and 2 <= decisions["fallbacks"] < 400, decisions
