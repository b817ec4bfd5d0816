"""The benchmarks' ``--markdown`` sections: heading, stamp, tables, generated reading.

Only the pure renderers, on made-up figures: no benchmark runs and no process starts.
"""

from __future__ import annotations

import base64
import re
import tomllib
from types import ModuleType

import pyarrow as pa
import pytest

from lblab.experiment.presets import load_preset
from lblab.experiment.runconfig import resolve
from lblab.stamp import Stamp
from tests.benchmark_scripts import bench

STAMP = Stamp("abc1234", "2026-01-02 03:04 UTC", 2, (0.5, 0.4, 0.3))


def tables(text: str) -> list[list[str]]:
    """The markdown tables of ``text``, each a list of its lines."""
    found: list[list[str]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                found.append([])
            found[-1].append(line)
        previous = line
    return found


def check_section(text: str, heading: str, script: str) -> list[list[str]]:
    """The section's shape: heading, blank, stamp naming the command; well-formed tables."""
    command = f"uv run python benchmarks/{script}.py --markdown"
    lines = text.splitlines()
    assert lines[0] == f"## {heading}" and lines[1] == ""
    assert lines[2] == STAMP.markdown(command)
    assert "commit `abc1234`" in lines[2] and "2 cores" in lines[2]
    found = tables(text)
    assert found
    for rows in found:
        assert len(rows) >= 3, rows  # header, rule, at least one row
        assert rows[1] == "|" + "---|" * (rows[0].count("|") - 1)
        assert all(row.count("|") == rows[0].count("|") for row in rows), rows
    assert not re.search(r"\bnan\b", text)
    return found


def test_pick() -> None:
    m = bench("bench_pick")
    rows = [
        m.PickRow("rr", False, [0.5, 0.6], [1.5, 1.6]),
        m.PickRow("lc", True, [1.0, 40.0], [2.0, 41.0]),
    ]
    text = m.markdown(
        rows, [3, 10_000], 0.2, STAMP, "uv run python benchmarks/bench_pick.py --markdown"
    )
    [found] = check_section(text, "A pick's cost per strategy", "bench_pick")
    assert found[0] == (
        "| strategy | full scan | pick us @3 | pick us @10,000 | cycle us @3 | cycle us @10,000 |"
    )
    assert found[3] == "| lc | scan | 1 | 40 | 2 | 41 |"
    assert "over 3 and 10,000 backends" in text
    assert "cheapest pick is `rr` (0.6 us) and the dearest `lc` (40 us, 66.7x)" in text


def test_simulator() -> None:
    m = bench("bench_simulator")
    sim = m.SimBench(1000, 1_000_000, 3, (11.0, 12.0, 13.0), load_after=(9.0, 9.0, 9.0))
    sim.cpu = {
        "bare": [140e3, 141e3, 142e3],
        "textbook": [27e3, 28e3, 26e3],
        "lblab": [33e3, 33e3, 32e3],
    }
    sim.wall = {"bare": [50e3, 51e3, 52e3], "textbook": [7e3, 6e3, 8e3], "lblab": [7e3, 7e3, 8e3]}
    sim.rss = {"start": 130.0, "bare": 131.0, "textbook": 140.0, "lblab": 329.0}
    text = m.markdown(sim, STAMP, "uv run python benchmarks/bench_simulator.py --markdown")
    speed, ratios = check_section(text, "The simulator's speed", "bench_simulator")
    assert speed[2].startswith(
        "| lblab (`Pool`, `p2c`, records) | 33,000 | 32,000-33,000 | 7,000 |"
    )
    assert speed[2].endswith("| 329 |")
    assert ratios[2].startswith("| lblab / textbook | 1.222 | 1.179-1.231 |")
    assert "1,000,000 requests per model and round, 3 interleaved" in text
    assert "read the CPU-second figures" in text  # load 11-13 on 2 cores
    assert "lblab simulates 1.22x as many requests as the textbook" in text


def test_loadgen() -> None:
    m = bench("bench_loadgen")
    results = {
        "raw": [(3000.0, 95.0), (3100.0, 96.0)],
        "locust": [(2000.0, 100.0), (2000.0, 100.0)],
        "bare": [(2500.0, 99.0), (2500.0, 99.0)],
        "fasthttp": [(1000.0, 100.0), (1000.0, 100.0)],
    }
    lg = m.LoadgenBench(8, 5.0, results, [(10_000, 10_000), (9_990, 10_000)], 0.4)
    text = m.markdown(lg, STAMP, "uv run python benchmarks/bench_loadgen.py --markdown")
    clients, costs = check_section(text, "The load generator's cost", "bench_loadgen")
    assert clients[3] == "| Locust + lblab records | 2,000 | 100 |"
    assert "| +20.0 % of throughput |" in costs[2]
    assert costs[3].endswith("| 500 us |")  # 100 % of a core over 2,000 req/s
    assert clients[5] == "| Locust FastHttpUser, HTTP | 1,000 | 100 |"
    fasthttp = next(row for row in costs if "FastHttpUser, HTTP" in row)
    assert fasthttp.endswith("| 1000 us |")
    ratio = next(row for row in costs if "/ FastHttpUser" in row)
    assert ratio.endswith("| 0.50x |")  # 500 us against 1,000 us
    assert "changes its throughput by -20.0 %" in text
    assert "differ from Locust's own count in 9,990 vs 10,000" in text


def fake_cell(
    rps: float, p50: float, cpu: float = float("nan"), machine: float = 50.0
) -> dict[str, float]:
    """A measured cell; its kernel time is a quarter of its CPU."""
    return {
        "n": 10.0, "rps": rps, "p50_ms": p50, "p99_ms": 2 * p50, "cpu_us": cpu,
        "sys_us": cpu / 4, "machine_us": machine, "errors": 0,
    }  # fmt: skip


def balancer_markdown(
    m: ModuleType,
    results: dict[tuple[str, int, str], list[dict[str, float]]],
    targets: list[str],
    sizes: list[str],
    in_flight: list[int],
    *,
    rounds: int = 1,
    baseline: str | None = None,
    picks: dict[str, float] | None = None,
    left_out: dict[str, str] | None = None,
) -> str:
    """``bench_balancer.py``'s section for made-up cells (strategy rr, 1 s cells)."""
    bb = m.BalancerBench(
        "rr", rounds, 1.0, baseline, targets, sizes, in_flight, results,
        picks or {"rr": 0.5}, (0.1, 0.1, 0.1), left_out or {},
    )  # fmt: skip
    return m.markdown(bb, STAMP, "uv run python benchmarks/bench_balancer.py --markdown")


def test_balancer_with_a_baseline() -> None:
    m = bench("bench_balancer")
    results = {}
    for conc in m.IN_FLIGHT:
        results[("100B", conc, "direct")] = [fake_cell(10_000.0, 0.1, machine=40.0)]
        results[("100B", conc, "through")] = [fake_cell(8_000.0, 0.3, 20.0, machine=45.0)]
        results[("100B", conc, "baseline")] = [fake_cell(6_000.0, 0.5, 40.0, machine=70.0)]
    text = balancer_markdown(
        m, results, ["direct", "through", "baseline"], ["100B"], list(m.IN_FLIGHT),
        baseline="HEAD~1", picks={"rr": 0.5, "p2c": 1.25},
        left_out={"haproxy": "haproxy is not installed"},
    )  # fmt: skip
    cells, ratios, picks = check_section(text, "The balancer's cost per request", "bench_balancer")
    assert len(cells) == 2 + 3 * len(m.IN_FLIGHT)
    assert cells[2] == "| 100B | 1 | direct | 10,000 | 0.100 | 0.200 |  |  |  |  |  | 40.0 |  |"
    assert cells[3] == (
        "| 100B | 1 | through lblab | 8,000 | 0.300 | 0.600 | 0.200 | 0.400 | 0.80 | 20.0 | 5.0 "
        "| 45.0 |  |"
    )
    assert "through lblab at `HEAD~1`" in cells[4]
    assert ratios[2] == "| 100B | 1 | 1.33 | 0.50 | 0.50 |"
    assert picks[3] == "| p2c | 1.25 |"
    assert "passes 0.80 of direct's throughput" in text
    # the whole testbed's CPU per request predicts through / direct: 40 / 45 us
    assert "spends 40.0 us of CPU per request direct at 64 in flight, through lblab 45.0 us " \
        "(0.89 predicted, 0.80 measured)" in text  # fmt: skip
    assert "Left out, through HAProxy TCP (relay floor): haproxy is not installed." in text
    assert "in its class" not in text  # nothing in lblab's class was measured


def in_class_cells(
    sizes: tuple[str, ...], counts: tuple[int, ...], lblab: dict[tuple[str, int], float]
) -> dict[tuple[str, int, str], list[dict[str, float]]]:
    """One round: lblab at ``lblab``'s CPU per request, HAProxy-h2 at 20 us, the compiled
    router at 16 and HAProxy TCP at 10; each client's direct at 10,000 req/s."""
    results = {}
    for size in sizes:
        for conc in counts:
            results[(size, conc, "direct")] = [fake_cell(10_000.0, 0.1)]
            results[(size, conc, "through")] = [fake_cell(9_500.0, 0.3, lblab[size, conc])]
            results[(size, conc, "compiled")] = [fake_cell(9_800.0, 0.2, 16.0)]
            results[(size, conc, "haproxy")] = [fake_cell(9_900.0, 0.2, 10.0)]
            results[(size, conc, "h2-direct")] = [fake_cell(20_000.0, 0.05)]
            results[(size, conc, "haproxy-h2")] = [fake_cell(16_000.0, 0.15, 20.0)]
    return results


IN_CLASS = ["direct", "through", "compiled", "haproxy", "h2-direct", "haproxy-h2"]


def test_balancer_in_class_states_each_bound() -> None:
    m = bench("bench_balancer")
    # lblab: 20 us at 1 (HAProxy-h2's: met; 1.25x the compiled router's: met), 30 at 10
    # (1.5x HAProxy-h2's: not; 1.875x the compiled router's: not), 24 at 64 (1.2x: not;
    # 1.5x: met); at 1 MB 20 us, HAProxy-h2's own: not below it.
    lblab = {("100B", 1): 20.0, ("100B", 10): 30.0, ("100B", 64): 24.0}
    lblab |= {("1MB", c): 20.0 for c in (1, 10, 64)}
    results = in_class_cells(("100B", "1MB"), (1, 10, 64), lblab)
    text = balancer_markdown(m, results, IN_CLASS, ["100B", "1MB"], [1, 10, 64])
    cells, against, _ = check_section(text, "The balancer's cost per request", "bench_balancer")
    # HAProxy-h2's added latency and req/s / direct are against h2load's own direct
    h2 = next(row for row in cells if row.startswith("| 100B | 1 | through HAProxy HTTP/2 |"))
    assert h2 == (
        "| 100B | 1 | through HAProxy HTTP/2 | 16,000 | 0.150 | 0.300 | 0.100 | 0.200 | 0.80 "
        "| 20.0 | 5.0 | 50.0 |  |"
    )
    assert "| 100B | 1 | direct, h2load to one nghttpd | 20,000 | 0.050 | 0.100 |  |" in text
    assert "| 100B | 1 | through HAProxy TCP (relay floor) |" in text
    assert against[0] == (
        "| size | in flight | CPU us/req lblab | CPU us/req HAProxy-h2 | lblab / HAProxy-h2 "
        "| lblab / HAProxy-h2 by round | bound vs HAProxy-h2 | CPU us/req compiled router "
        "| lblab / compiled router | lblab / compiled router by round "
        "| bound vs compiled router | CPU us/req HAProxy TCP (relay floor) "
        "| added p50 ms lblab / HAProxy-h2 | added p99 ms lblab / HAProxy-h2 "
        "| through/direct lblab / HAProxy-h2 |"
    )
    assert against[2] == (
        "| 100B | 1 | 20.0 | 20.0 | 1.00 | 1.00-1.00 | <= 1x: yes (1 of 1 rounds) | 16.0 | 1.25 "
        "| 1.25-1.25 | <= 1.5x: yes (1 of 1 rounds) | 10.0 | 0.200 / 0.100 | 0.400 / 0.200 "
        "| 0.95 / 0.80 |"
    )
    assert "| 1.50 | 1.50-1.50 | <= 1x: no (0 of 1 rounds) | 16.0 | 1.88 |" in against[3]
    assert "| <= 1.5x: no (0 of 1 rounds) |" in against[3]
    assert "| 1.20 | 1.20-1.20 | <= 1x: no (0 of 1 rounds) |" in against[4]
    assert "| <= 1.5x: yes (1 of 1 rounds) |" in against[4]
    # 1 MB: strictly below HAProxy-h2; the compiled router's bound is at 100 B only
    assert against[5].startswith("| 1MB | 1 | 20.0 | 20.0 | 1.00 | 1.00-1.00 | < 1x: no (0 of 1")
    assert "| 16.0 | 1.25 | 1.25-1.25 |  | 10.0 |" in against[5]
    assert "issue 44's bounds" in text and "issue 20" not in text.replace(
        "issue 20's bounds against it are dropped", ""
    )
    assert "1.00 / 1.50 / 1.20x HAProxy-h2's and 1.25 / 1.88 / 1.50x the compiled router's" in text
    assert "spends 10.0 / 10.0 / 10.0 us: the relay floor" in text
    assert (
        "HAProxy-h2 50.0 us against h2load's direct 50.0 us (1.00 predicted, 0.80 measured)" in text
    )
    assert "1, 10, 64 request(s) in flight" in text
    assert "Medians of 1 interleaved round(s)" in text and "{" not in text


def test_balancer_bounds_count_the_rounds_that_meet_them() -> None:
    """The verdict is the medians'; beside it, how many interleaved rounds met the bound,
    each round's lblab against the other target's cell of that same round."""
    m = bench("bench_balancer")
    results = {}
    for conc in (1, 64):
        results[("100B", conc, "direct")] = [fake_cell(10_000.0, 0.1) for _ in range(3)]
        # CPU ratios by round 0.9, 1.2, 1.1: the median 1.1 misses 1x; one round met it
        results[("100B", conc, "through")] = [
            fake_cell(9_100.0, 0.3, cpu) for cpu in (18.0, 24.0, 22.0)
        ]
        results[("100B", conc, "h2-direct")] = [fake_cell(20_000.0, 0.05) for _ in range(3)]
        results[("100B", conc, "haproxy-h2")] = [fake_cell(9_900.0, 0.2, 20.0) for _ in range(3)]
    targets = ["direct", "through", "h2-direct", "haproxy-h2"]
    text = balancer_markdown(m, results, targets, ["100B"], [1, 64], rounds=3)
    _, against, _ = check_section(text, "The balancer's cost per request", "bench_balancer")
    assert against[0].startswith("| size | in flight | CPU us/req lblab | CPU us/req HAProxy-h2 |")
    assert "compiled" not in against[0] and "TCP" not in against[0]
    assert against[2].startswith(
        "| 100B | 1 | 22.0 | 20.0 | 1.10 | 0.90-1.20 | <= 1x: no (1 of 3 rounds) |"
    )


def test_balancer_without_a_lone_request_renders_and_bounds_only_what_it_measured() -> None:
    m = bench("bench_balancer")
    lblab = {("100B", c): 20.0 for c in (10, 32)}
    results = in_class_cells(("100B",), (10, 32), lblab)
    text = balancer_markdown(m, results, IN_CLASS, ["100B"], [10, 32])
    _, against, _ = check_section(text, "The balancer's cost per request", "bench_balancer")
    assert "| <= 1x: yes (1 of 1 rounds) |" in against[2]  # at 10 in flight: bounded
    assert against[3].startswith("| 100B | 32 | 20.0 | 20.0 | 1.00 | 1.00-1.00 |  | 16.0 | 1.25 |")
    assert "| 1.25-1.25 |  | 10.0 |" in against[3]  # no bound at 32 in flight
    assert "lone request" not in text
    assert "At 32 in flight (100 B) it passes 0.95 of direct's throughput" in text


def test_in_flight_counts_refuse_nonsense() -> None:
    m = bench("bench_balancer")
    assert m.in_flight_counts("1,10,64") == [1, 10, 64]
    for bad in ("", "0", "x", "1,-2", "5000"):
        with pytest.raises(SystemExit, match="--in-flight"):
            m.in_flight_counts(bad)


def test_harness_with_a_baseline() -> None:
    m = bench("bench_harness")

    def phase(round_: int, strategy: str, balancer: float, locust: float, rate: float) -> object:
        agents = 5.0
        figures = {"balancer": balancer, "locust": locust, "agents": agents, "ok_per_s": rate}
        return m.Phase(round_, strategy, {**figures, "harness": balancer + locust + agents})

    now = m.Tree("this tree", [
        phase(1, "rr", 60.0, 70.0, 2000.0),
        phase(1, "lc", 40.0, 45.0, 4000.0),
        phase(2, "rr", 64.0, 80.0, 2100.0),
    ])  # fmt: skip
    then = m.Tree("`HEAD~1`", [
        phase(1, "rr", 110.0, 150.0, 1900.0),
        phase(1, "lc", 50.0, 60.0, 3800.0),
        # This tree's round 2 rr has no partner here: left out of the pairing.
        phase(2, "lc", 45.0, 55.0, 3900.0),
    ])  # fmt: skip
    command = "uv run python benchmarks/bench_harness.py --markdown"
    text = m.markdown([now, then], STAMP, command, "rr,lc")
    overall, by_strategy = check_section(text, "The harness's cost per request", "bench_harness")
    assert overall[0] == (
        "| tree | phases | balancer us/req | locust us/req | agents us/req | harness us/req "
        "| ok req/s |"
    )
    assert overall[2] == "| this tree | 3 | 60.0 | 70.0 | 5.0 | 135.0 | 2,100 |"
    assert overall[3] == "| `HEAD~1` | 3 | 50.0 | 60.0 | 5.0 | 115.0 | 3,800 |"
    assert by_strategy[0].startswith("| tree | strategy | phases | balancer us/req |")
    assert by_strategy[2] == "| this tree | rr | 2 | 62.0 | 75.0 | 5.0 | 142.0 | 2,050 |"
    assert by_strategy[3] == "| this tree | lc | 1 | 40.0 | 45.0 | 5.0 | 90.0 | 4,000 |"
    assert by_strategy[5] == "| `HEAD~1` | lc | 2 | 47.5 | 57.5 | 5.0 | 110.0 | 3,850 |"
    assert "one replication of rr, lc" in text
    # Pairs (1, rr): 135 / 265, (1, lc): 90 / 115; the median of the two ratios.
    paired = (135 / 265 + 90 / 115) / 2
    assert f"is {paired:.2f}x `HEAD~1`'s" in text
    assert "the ratio of the medians above is 1.17x" in text


def test_perf_split_reads_perf_and_names_places() -> None:
    m = bench("profile_balancer")
    report = """# Samples: 933 of event 'cpu-clock'
#
    48.98%  libpython3.11.so.1.0
    42.66%  [kernel.kallsyms]
     5.79%  loop.cpython-311-x86_64-linux-gnu.so
     0.43%  _struct.cpython-311-x86_64-linux-gnu.so
     1.61%  libc.so.6
     0.53%  [unknown]
"""
    shares = m.parse_perf_report(report)
    assert shares["libpython3.11.so.1.0"] == 48.98 and len(shares) == 6
    places = {name: m.place_of(name) for name in shares}
    assert places == {
        "libpython3.11.so.1.0": "the interpreter (libpython)",
        "[kernel.kallsyms]": "the kernel",
        "loop.cpython-311-x86_64-linux-gnu.so": "uvloop",
        "_struct.cpython-311-x86_64-linux-gnu.so": "other C extensions",
        "libc.so.6": "libc",
        "[unknown]": "other",
    }
    symbols = m.parse_perf_report("    14.58%  [k] finish_task_switch.isra.0\n")
    assert symbols == {"[k] finish_task_switch.isra.0": 14.58}
    cell = m.Cell(10, perf_cpu_us=40.0, by_place={"the kernel": 50.0, "uvloop": 5.0})
    assert m.place_rows([cell]) == [
        ["the kernel", "50.0 % (20.0 us)"],
        ["uvloop", "5.0 % (2.0 us)"],
    ]


def test_faults() -> None:
    m = bench("bench_faults")
    opts = m.Options(6.0, 12, 800.0, 2000)
    outcomes = [m.Outcome(0.1 * i, 0.02, None, None) for i in range(30)]
    outcomes += [
        m.Outcome(1.6, 1.7, "timeout", "balancer"),
        m.Outcome(1.7, 3.0, "timeout", "client"),
    ]
    run = m.FaultRun(
        outcomes, 1.5, {"s1": 0, "s2": 1}, m.Footprint(50.0, 18), None, m.Footprint(51.5, 18),
        {"s1": 0, "s3": None}, ["a note"],
    )  # fmt: skip
    rows = [m.summarize("hang", run), m.summarize("overload", run)]
    run_rows = [{"case": "kill-resume", "exit (resume)": "0", "orphans alive 3 s after": "0"}]
    text = m.markdown(
        rows, run_rows, opts, STAMP, "uv run python benchmarks/bench_faults.py --markdown"
    )
    faults, facts = check_section(text, "Faults under load", "bench_faults")
    assert faults[0] == "| " + " | ".join(m.COLUMNS) + " |"
    assert faults[2].startswith("| hang | 32 | 30 | timeout 2 | balancer 1, client 1 | 2 | 1 |")
    assert "| s2 1 | 3.20 | 50.0 / - / 51.5 | 18 / 18 | 0 (s3 no answer) | a note |" in faults[2]
    assert facts == [
        "| kill-resume | result |",
        "|---|---|",
        "| exit (resume) | 0 |",
        "| orphans alive 3 s after | 0 |",
    ]
    assert "- **hang**: SIGSTOP s2, SIGCONT 3 s later" in text
    assert "- **overload** (36 clients): every server admits 4 requests" in text
    assert "deadline + 0.5 s" in text and "own 3 s deadline" in text
    assert "Not 0 in 2 of 2 case(s): hang (hung 2, lost 1, srv inflight 0 (s3 no answer))" in text
    assert (
        "**kill-resume** (a whole `lblab run --preset tiny --scenarios sp+sr --no-report --duration 6s`): SIGKILL the runner"
        in text
    )


def test_every_fault_case_is_described() -> None:
    m = bench("bench_faults")
    described = m.cases_described()
    assert set(described) == {*m.FAULTS, *m.RUN_CASES}
    assert all(described.values()) and not any("``" in v for v in described.values())


def instrument_bench(m: ModuleType, *, vegeta: bool) -> object:
    open100, open5000, closed2 = m.Load("open", 100), m.Load("open", 5000), m.Load("closed", 100, 2)
    facts = {
        "harness_p50_ms": 0.25, "harness_p99_ms": 1.2, "outside_slot_p50_ms": 0.1,
        "outside_slot_p99_ms": 0.5, "send_lag_p50_ms": 0.05, "send_lag_p99_ms": 0.7,
    }  # fmt: skip
    closed_facts = {k: v for k, v in facts.items() if not k.startswith("send_lag")}
    bench = m.InstrumentBench(
        15.0,
        2.0,
        20.0,
        [
            m.LblabCell(open100, 99.0, facts, "pass", (), (0.2, 0.9)),
            m.LblabCell(
                open5000, 3000.0, {**facts, "harness_p99_ms": 9.0}, "fail", ("disturbance",)
            ),
            m.LblabCell(closed2, 90.0, closed_facts, "pass", (), (0.25, 1.2)),
        ],
        [
            m.Floor("C", "across CPUs (0, 1)", 20_000, 45.0, 900.0),
            m.Floor("Python", "across CPUs (0, 1)", 20_000, 50.0, 1000.0),
        ],
    )
    if vegeta:
        bench.vegeta = [
            m.VegetaCell(open100, 100.0, (0.2, 1.0), (0.125, 0.6), 0),
            m.VegetaCell(open5000, 4990.0, (0.3, 2.0), (0.25, 1.5), 3),
            m.VegetaCell(closed2, 95.0, (0.4, 1.1), (0.2, 0.8), 0),
        ]
    else:
        bench.vegeta_note = "no go command here"
    return bench


def test_instrument() -> None:
    m = bench("bench_instrument")
    command = "uv run python benchmarks/bench_instrument.py --markdown"
    text = m.markdown(instrument_bench(m, vegeta=True), STAMP, command)
    cells, beside, floor = check_section(text, "The instrument's own error", "bench_instrument")
    assert cells[0].startswith("| load | achieved req/s | harness p50 ms | harness p99 ms |")
    # 99 of 100 is reached; the send lag's p99 misses its 0.5 ms.
    assert cells[2] == (
        "| open 100 req/s | 99 | 0.25 | 1.20 | 0.10 | 0.50 | 0.05 | 0.70 "
        "| misses: send lag p99 0.70 > 0.5 | pass |"
    )
    assert cells[3].startswith("| open 5,000 req/s | 3,000 (not reached) | 0.25 | 9.00 |")
    assert cells[3].endswith("| (targets up to 1,000 req/s) | fail (disturbance) |")
    # A closed load has no send lag and no rate to reach.
    assert cells[4] == (
        "| closed 2 users (~100 req/s) | 90 | 0.25 | 1.20 | 0.10 | 0.50 |  |  | meets | pass |"
    )
    assert beside[2] == (
        "| open 100 req/s | 99 | 0.25 | 1.20 | 0.20 | 0.90 | 100 | 0.12 | 0.60 | 0.20 | 1.00 | 0 |"
    )
    # Without requests to read, no figure after the send: left blank, not made up.
    assert beside[3].startswith("| open 5,000 req/s | 3,000 | 0.25 | 9.00 |  |  | 4,990 |")
    assert floor[2] == "| C | across CPUs (0, 1) | 20,000 | 45.0 | 900.0 |"
    assert "Up to 1,000 req/s, 1 of 2 load(s) meet issue 47's targets" in text
    assert "Not reached on this machine: open 5,000 req/s, 3,000 req/s." in text
    assert "Closed, the users sent 90 % of users / 20 ms" in text
    assert "in C, is 0.045 ms at p50 and 0.900 ms at p99" in text
    # After the send: 0.2 / 0.125 and 0.9 / 0.6.
    assert "open 100 req/s 1.6x / 1.5x" in text
    assert "open 100 req/s 1.20 against 0.90 ms (sends 0.70 ms late at p99)" in text


def test_instrument_without_vegeta_says_why() -> None:
    m = bench("bench_instrument")
    text = m.markdown(instrument_bench(m, vegeta=False), STAMP, "uv run python x --markdown")
    assert "vegeta did not run: no go command here." in text
    beside = tables(text)[1]
    assert beside[2] == "| open 100 req/s | 99 | 0.25 | 1.20 | 0.20 | 0.90 |  |  |  |  |  |  |"


def test_instrument_reads_vegetas_results() -> None:
    m = bench("bench_instrument")

    def row(t_s: float, code: str, latency_ms: float, server_ms: float | None) -> list[str]:
        headers = b"Content-Length: 100\r\n"
        if server_ms is not None:
            headers += b"Server-Timing: total;dur=%.3f\r\n" % server_ms
        return [
            str(int(t_s * 1e9)), code, str(int(latency_ms * 1e6)), "100", "100", "", "",
            "", "0", "POST", "http://127.0.0.1:1/", base64.b64encode(headers + b"\r\n").decode(),
        ]  # fmt: skip

    rows = [
        row(0.0, "200", 25.0, 20.0),  # in the warm-up
        row(1.0, "200", 21.0, 20.5),
        row(1.5, "0", 10_000.0, None),  # a timeout: counted, not timed
        row(3.0, "200", 22.0, 19.5),
    ]
    latency, server, failed, window_s = m.vegeta_results(iter(rows), 1.0)
    assert list(latency) == [21.0, 22.0] and list(server) == [20.5, 19.5]
    assert failed == 1 and window_s == 2.0
    with pytest.raises(SystemExit, match="Server-Timing"):
        m.vegeta_results(iter([row(0.0, "200", 21.0, None)]), 0.0)


def test_instrument_after_the_send_takes_out_only_a_late_sends_lag() -> None:
    m = bench("bench_instrument")

    def rows(*items: tuple[str, bool, str, float, float | None, float | None]) -> pa.Table:
        names = ["scenario", "ok", "window", "latency_ms", "server_ms", "send_lag_ms"]
        return pa.table({n: [row[i] for row in items] for i, n in enumerate(names)})

    table = rows(
        ("open-100", True, "inside", 21.0, 20.0, 0.5),  # late: 1.0 - 0.5
        ("open-100", True, "inside", 21.0, 20.0, -0.3),  # early: left at once, counts from then
        ("open-100", True, "before", 30.0, 20.0, 0.0),  # warm-up
        ("open-100", False, "inside", 99.0, 20.0, 0.0),  # failed
        ("open-100", True, "inside", 40.0, None, 0.0),  # no server time
        ("closed-2", True, "inside", 22.0, 20.0, None),  # closed: no lag
    )
    assert m.after_send(table, "open-100") == pytest.approx((0.75, 0.995))
    assert m.after_send(table, "closed-2") == pytest.approx((2.0, 2.0))
    assert m.after_send(table, "open-5000") is None


def test_instrument_experiment_file_is_a_valid_run() -> None:
    m = bench("bench_instrument")
    plan = m.loads([100, 5000], 20.0)
    assert [(x.model, x.rate, x.users) for x in plan] == [
        ("open", 100, 0), ("open", 5000, 0), ("closed", 100, 2), ("closed", 5000, 100),
    ]  # fmt: skip
    raw = tomllib.loads(m.experiment_file(plan, 20.0, 15.0, 2.0))
    config = resolve(load_preset(raw.pop("preset")), raw, {})
    assert [s.name for s in config.scenarios] == ["open-100", "open-5000", "closed-2", "closed-100"]
    assert config.loads["open-5000"].rate == 5000 and config.loads["open-5000"].arrival == "poisson"
    assert config.loads["closed-100"].model == "closed" and config.loads["closed-100"].users == 100
    assert [(s.delay_ms, s.delay_dist, s.workers) for s in config.servers] == [
        (20.0, "fixed", 256)
    ] * 3
    assert config.strategies == ("rr",) and (config.duration, config.warmup) == (15.0, 2.0)
    assert (config.replications, config.max_replications) == (1, 1)


@pytest.mark.parametrize(
    "script",
    ["bench_pick", "bench_simulator", "bench_loadgen", "bench_balancer", "bench_instrument"],
)
def test_markdown_is_a_flag(script: str) -> None:
    """Each script names the flag in its docstring, where its usage is."""
    assert "--markdown" in (bench(script).__doc__ or "")


def test_balancer_names_the_compiled_reference_only_when_it_ran() -> None:
    m = bench("bench_balancer")
    results = {}
    for conc in (1, 10, 64):
        results[("100B", conc, "direct")] = [fake_cell(10_000.0, 0.1)]
        results[("100B", conc, "through")] = [fake_cell(9_000.0, 0.3, 30.0)]
        results[("100B", conc, "router")] = [fake_cell(9_200.0, 0.25, 22.0)]
        results[("100B", conc, "compiled")] = [fake_cell(9_800.0, 0.2, 12.5)]
        results[("100B", conc, "haproxy")] = [fake_cell(9_900.0, 0.2, 10.0)]
    targets = ["direct", "through", "router", "compiled", "haproxy"]
    text = balancer_markdown(
        m, results, targets, ["100B"], [1, 10, 64],
        left_out={"haproxy-h2": "h2load, nghttpd not installed"},
    )  # fmt: skip
    _, against, _ = check_section(text, "The balancer's cost per request", "bench_balancer")
    assert against[0].startswith(
        "| size | in flight | CPU us/req lblab | CPU us/req compiled router "
        "| lblab / compiled router |"
    )
    assert against[2] == (
        "| 100B | 1 | 30.0 | 12.5 | 2.40 | 2.40-2.40 | <= 1.5x: no (0 of 1 rounds) | 10.0 |"
    )
    assert "`benchmarks/compiled_router`" in text
    assert "lblab's CPU is 2.40 / 2.40 / 2.40x the compiled router's at 1 / 10 / 64" in text
    assert "Left out, through HAProxy HTTP/2: h2load, nghttpd not installed." in text
    text = balancer_markdown(
        m, results, [t for t in targets if t != "compiled"], ["100B"], [1, 10, 64]
    )
    assert "compiled" not in text and "in its class" not in text


def test_balancer_prints_the_traced_batching() -> None:
    m = bench("bench_balancer")
    sb = bench("strace_batching")
    results = {}
    for target in ("direct", "through"):
        results[("100B", 10, target)] = [fake_cell(10_000.0, 0.1, 20.0)]
    b = sb.Batching(100)
    b.calls.update({("client", "read"): 50, ("client", "write"): 100, ("backend", "read"): 40})
    b.failed[("backend", "read")] = 10
    big = sb.Batching(100)  # a 1 MB cell: dozens of calls a request
    big.calls.update({("client", "read"): 6250, ("backend", "write"): 6250})
    slowed = sb.Batching(0)  # strace slowed the cell below one answer in its window
    slowed.calls[("client", "read")] = 40
    traces = {("100B", 10, "through"): b, ("1MB", 10, "through"): big}
    traces[("1MB", 64, "through")] = slowed
    bb = m.BalancerBench(
        "rr", 1, 1.0, None, ["direct", "through"], ["100B"], [10], results, {"rr": 0.5},
        (0.1, 0.1, 0.1), traces=traces,
    )  # fmt: skip
    text = m.markdown(bb, STAMP, "uv run python benchmarks/bench_balancer.py --markdown")
    *_, traced, _ = check_section(text, "The balancer's cost per request", "bench_balancer")
    assert traced[0] == (
        "| size | in flight | target | requests | req per read, client | req per write, client "
        "| req per read, backend | req per write, backend | failed calls per req |"
    )
    assert traced[2] == "| 100B | 10 | through | 100 | 2.00 | 1.00 | 2.50 |  | 0.10 |"
    assert traced[3] == "| 1MB | 10 | through | 100 | 0.016 |  |  | 0.016 | 0.00 |"
    assert traced[4] == "| 1MB | 64 | through | 0 |  |  |  |  |  |"


def test_strace_lines_are_sorted_by_side_inside_the_window() -> None:
    """Lines as ``strace -f -ttt -s 0 -o FILE`` writes them (from a real trace of HAProxy)."""
    sb = bench("strace_batching")
    trace = """\
5314  1796308744.008658 recvfrom(7, ""..., 16329, 0, NULL, NULL) = 256
5314  1796308744.008945 sendto(7, ""..., 30, MSG_DONTWAIT|MSG_NOSIGNAL, NULL, 0) = 30
5314  1796308744.010444 sendto(8, ""..., 51, MSG_DONTWAIT|MSG_NOSIGNAL, NULL, 0) = 51
11136 1796308744.010500 recvfrom(8, 0x5615d8a87fc0, 16384, 0, NULL, NULL) = -1 EAGAIN (Resource temporarily unavailable)
11110 1796308744.010600 writev(14, [...], 2 <unfinished ...>
11110 1796308744.010700 <... writev resumed>) = 218
5314  1796308744.010549 epoll_wait(3, [], 200, 0) = 0
5314  1796308745.000000 recvfrom(7, ""..., 16329, 0, NULL, NULL) = 256
"""
    b = sb.count(trace, 1796308744.0, 1796308744.9, {7: "client", 8: "backend"}, 4)
    assert dict(b.calls) == {
        ("client", "read"): 1, ("client", "write"): 1,
        ("backend", "write"): 1, ("backend", "read"): 1,
    }  # fmt: skip
    assert dict(b.failed) == {("backend", "read"): 1}
    assert b.per_call("client", "read") == 4.0 and b.failed_per_request() == 0.25
