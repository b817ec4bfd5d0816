"""The trace model's schedule: parsing, time scaling, windows, the end, bad input, and
the two drivers (the Locust spec and the simulator) taking the same sends."""

from __future__ import annotations

import gzip
import itertools
import statistics
from pathlib import Path

import pytest

from lblab.errors import ConfigError
from lblab.experiment import runconfig
from lblab.experiment.presets import load_preset
from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.scenarios import TRACE_SCENARIOS, Scenario, builtin_scenario
from lblab.simulator.config import config_from_mapping
from lblab.simulator.run import simulate
from lblab.simulator.workload import TraceArrivals
from lblab.traces import (
    AZURE_BYTES_PER_CONTEXT_TOKEN,
    AZURE_BYTES_PER_GENERATED_TOKEN,
    Schedule,
    TraceWindow,
    load_trace,
    parse_trace,
    schedule,
)

# Ten requests, bursty: gaps 0.1 s x 4, then 1 s, then 0.2 s x 4 (mean gap 2.2 / 9 s).
TIMES = [0.0, 0.1, 0.2, 0.3, 0.4, 1.4, 1.6, 1.8, 2.0, 2.2]
TEXT = "time_s,package_bytes,work_bytes\n" + "".join(
    f"{100 + t},{100 + i},{1000 * (i + 1)}\n" for i, t in enumerate(TIMES)
)


def trace_file(tmp_path: Path, text: str = TEXT, name: str = "t.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def one_line_error(text: str, source: str = "t.csv") -> str:
    with pytest.raises(ConfigError) as caught:
        parse_trace(text, source)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ parsing


def test_seconds_are_counted_from_the_first_request_and_sizes_kept() -> None:
    trace = parse_trace(TEXT, "t.csv")
    assert trace.times == pytest.approx(TIMES)
    assert trace.packages == tuple(100 + i for i in range(10))
    assert trace.works == tuple(1000 * (i + 1) for i in range(10))


def test_timestamps_any_column_order_extra_columns_and_blank_lines() -> None:
    text = (
        "work_bytes,note,Timestamp,package_bytes\n"
        "10,a,2023-11-16 18:17:03.9799600,1\n"
        "\n"
        "20,b,2023-11-16 18:17:04.4799600,2\n"
        "30,c,2023-11-16 18:17:06.4799600,3\n"
    )
    trace = parse_trace(text, "t.csv")
    assert trace.times == pytest.approx([0.0, 0.5, 2.5])
    assert (trace.packages, trace.works) == ((1, 2, 3), (10, 20, 30))


def test_gzipped_files_and_a_byte_order_mark_read_alike(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(TEXT.encode()))
    assert load_trace(str(path)).times == pytest.approx(TIMES)
    marked = tmp_path / "marked.csv"
    marked.write_bytes(TEXT.encode("utf-8-sig"))  # as a spreadsheet saves it
    assert load_trace(str(marked)).works == load_trace(str(path)).works


def test_the_azure_traces_ship_whole_and_map_tokens_to_bytes() -> None:
    code, conv = load_trace("azure-code"), load_trace("azure-conv")
    assert (len(code.times), len(conv.times)) == (8819, 19366)
    # First lines: 2023-11-16 18:17:03.9799600,4808,10 and 18:15:46.6805900,374,44.
    assert (code.packages[0], code.works[0]) == (4808 * 8, 10 * 1000)
    assert (conv.packages[0], conv.works[0]) == (374 * 8, 44 * 1000)
    assert (AZURE_BYTES_PER_CONTEXT_TOKEN, AZURE_BYTES_PER_GENERATED_TOKEN) == (8, 1000)
    assert code.times[-1] == pytest.approx(3435.948056)
    # The documented medians: the conversation trace's request is a mid-sized cell.
    assert statistics.median(conv.packages) == 1020 * 8
    assert statistics.median(conv.works) == 129_000
    assert statistics.median(code.packages) == 1469 * 8
    assert statistics.median(code.works) == 13_000
    assert max(conv.packages) <= 112_400 and max(code.works) <= 1_899_000


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "text,where,says",
    [
        ("", "t.csv:1:", "empty"),
        ("time_s,package_bytes,work_bytes\n", "t.csv:2:", "no requests"),
        ("time_s,package_bytes\n0,1\n", "t.csv:1:", "no work_bytes column"),
        ("package_bytes,work_bytes\n1,2\n", "t.csv:1:", "no time_s or timestamp column"),
        ("time_s,package_bytes,work_bytes\n0,1,1\n2,1,1\n1.5,1,1\n", "t.csv:4:", "sort the trace"),
        ("time_s,package_bytes,work_bytes\n0,1,1\n1,-5,1\n", "t.csv:3:", "negative"),
        ("time_s,package_bytes,work_bytes\n0,1,1\n1,1,-1\n", "t.csv:3:", "negative"),
        ("time_s,package_bytes,work_bytes\n0,1,1\n1,1\n", "t.csv:3:", "2 fields"),
        ("time_s,package_bytes,work_bytes\nsoon,1,1\n", "t.csv:2:", "not a number"),
        ("time_s,package_bytes,work_bytes\nnan,1,1\n", "t.csv:2:", "not a number"),
        ("time_s,package_bytes,work_bytes\n0,1.5,1\n", "t.csv:2:", "whole number"),
        ("timestamp,package_bytes,work_bytes\nmonday,1,1\n", "t.csv:2:", "ISO 8601"),
    ],
)
def test_bad_traces_give_one_line_naming_the_file_line_and_remedy(
    text: str, where: str, says: str
) -> None:
    message = one_line_error(text)
    assert message.startswith(where) and says in message


def test_a_missing_or_unreadable_file_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the trace.*azure-code"):
        load_trace(str(tmp_path / "nowhere.csv"))
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(ConfigError, match=r"bad\.csv\.gz: cannot read"):
        load_trace(str(bad))


@pytest.mark.parametrize(
    "window,says",
    [
        (dict(start=1.0, length=0.3), "holds 0 of"),
        (dict(start=100.0), "holds 0 of"),
        (dict(start=2.1), "holds 1 of"),
    ],
)
def test_a_window_needs_two_requests(tmp_path: Path, window: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Schedule(parse_trace(TEXT, "t.csv"), TraceWindow(source="t.csv", **window), 5.0)


def test_requests_all_at_one_instant_have_no_rate() -> None:
    trace = parse_trace("time_s,package_bytes,work_bytes\n3,1,1\n3,2,2\n", "t.csv")
    with pytest.raises(ConfigError, match="same time"):
        Schedule(trace, TraceWindow(source="t.csv"), 5.0)


@pytest.mark.parametrize("start,length", [(-1.0, None), (float("nan"), None), (0.0, 0.0)])
def test_window_bounds_are_checked(start: float, length: float | None) -> None:
    with pytest.raises(ConfigError):
        TraceWindow(source="x", start=start, length=length)


# ------------------------------------------------------------------ the schedule


def test_scaling_gives_the_mean_rate_and_keeps_the_shape_of_the_gaps() -> None:
    trace = parse_trace(TEXT, "t.csv")
    plan = Schedule(trace, TraceWindow(source="t.csv"), rate=45.0)
    assert plan.native_rate == pytest.approx(9 / 2.2)
    assert plan.dues[-1] / (len(plan) - 1) == pytest.approx(1 / 45.0)  # mean gap 1/R
    factor = plan.dues[-1] / TIMES[-1]
    assert plan.dues == pytest.approx([t * factor for t in TIMES])
    assert (plan.packages, plan.works) == (trace.packages, trace.works)


def test_rate_zero_keeps_the_trace_pace() -> None:
    plan = Schedule(parse_trace(TEXT, "t.csv"), TraceWindow(source="t.csv"), rate=0.0)
    assert plan.dues == pytest.approx(TIMES)
    assert plan.rate == pytest.approx(9 / 2.2)


def test_a_window_takes_its_requests_and_starts_at_the_first_of_them() -> None:
    trace = parse_trace(TEXT, "t.csv")
    plan = Schedule(trace, TraceWindow(source="t.csv", start=0.25, length=1.5), rate=0.0)
    # 0.3, 0.4, 1.4, 1.6 lie in [0.25, 1.75): re-based at the first, their own pace.
    assert plan.dues == pytest.approx([0.0, 0.1, 1.1, 1.3])
    assert plan.packages == (103, 104, 105, 106)


def test_without_loop_the_replay_stops_at_the_window_end() -> None:
    plan = Schedule(parse_trace(TEXT, "t.csv"), TraceWindow(source="t.csv"), rate=9.0)
    assert plan.count(until=1e6) == 10
    assert len(list(plan.sends(until=1e6))) == 10
    assert plan.count(until=0.5) == 5  # dues 0, 0.1/2.2*... : those before 0.5 s
    assert [d for d, _, _ in plan.sends(until=0.5)] == [d for d in plan.dues if d < 0.5]
    assert plan.count(most=3) == 3


def test_a_looping_replay_starts_each_pass_one_mean_gap_after_the_last() -> None:
    plan = Schedule(parse_trace(TEXT, "t.csv"), TraceWindow(source="t.csv", loop=True), 9.0)
    assert plan.period == pytest.approx(10 / 9.0)
    sends = list(plan.sends(most=25))
    assert len(sends) == 25
    assert sends[10][0] == pytest.approx(plan.period)
    assert sends[10][0] - sends[9][0] == pytest.approx(1 / 9.0)
    assert [s[1] for s in sends[10:20]] == list(plan.packages)
    # Exactly n requests every n / R seconds.
    assert plan.count(until=3 * plan.period) == 30
    with pytest.raises(ConfigError, match="looping trace needs"):
        plan.count()


@pytest.mark.parametrize("generators", [1, 2, 3, 7])
def test_processes_split_the_schedule_without_sending_twice(generators: int) -> None:
    plan = Schedule(parse_trace(TEXT, "t.csv"), TraceWindow(source="t.csv", loop=True), 9.0)
    parts = [list(plan.sends(most=23, first=i, step=generators)) for i in range(generators)]
    merged = sorted(itertools.chain.from_iterable(parts))
    assert merged == sorted(plan.sends(most=23))
    assert sum(len(p) for p in parts) == 23


# ------------------------------------------------------------------ the live run's config


def resolve(file: dict) -> runconfig.RunConfig:
    return runconfig.resolve(load_preset("quick"), file, {})


def test_a_builtin_trace_scenario_runs_under_the_trace_model() -> None:
    cfg = resolve({"run": {"scenarios": ["azure-conv"]}, "load": {"rate": 40, "trace_start": 60}})
    load = cfg.loads["azure-conv"]
    assert load.model == "trace" and load.trace == "azure-conv"
    assert cfg.scenarios[0].trace == TraceWindow(source="azure-conv", start=60.0)
    facts = load.facts()
    own = schedule(TraceWindow(source="azure-conv", start=60.0)).native_rate
    assert facts["trace_rate"] == 40 and facts["trace_own_rate"] == own
    assert own == pytest.approx(5.5, abs=0.1)  # the window's own: about the whole trace's
    assert set(TRACE_SCENARIOS) == {"azure-code", "azure-conv"}
    assert builtin_scenario("azure-code").trace == TraceWindow(source="azure-code")


def test_a_defined_trace_scenario_reads_its_file(tmp_path: Path) -> None:
    path = trace_file(tmp_path)
    cfg = resolve(
        {
            "run": {"scenarios": ["mine", "sp+sr"]},
            "scenario_defs": {"mine": {"trace": path, "rate": 20, "trace_loop": True}},
        }
    )
    assert cfg.loads["mine"].model == "trace"
    assert cfg.scenarios[0].trace == TraceWindow(source=path, loop=True)
    assert cfg.loads["sp+sr"].model == "closed"


@pytest.mark.parametrize(
    "file,says",
    [
        ({"run": {"scenarios": ["sp+sr"]}, "load": {"model": "trace", "trace": "azure-code"}},
         "trace model takes each request's shape from the trace"),
        ({"run": {"scenarios": ["azure-code"]}, "load": {"count": 9000}},
         "does not loop; give count <= 8819"),
        ({"run": {"scenarios": ["azure-code"]}, "load": {"trace_start": "2h"}},
         "holds 0 of the trace's 8819 requests"),
        ({"run": {"scenarios": ["m"]}, "scenario_defs": {"m": {"cells": ["sp+sr"], "trace": "x"}}},
         "cells or a trace, not both"),
        ({"run": {"scenarios": ["azure-code"]}, "load": {"trace_loop": "yes"}},
         "not true or false"),
    ],
)  # fmt: skip
def test_trace_configs_that_cannot_run_stop_at_load(file: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        resolve(file)


def test_a_bad_trace_file_stops_the_run_at_load(tmp_path: Path) -> None:
    path = trace_file(tmp_path, "time_s,package_bytes,work_bytes\n0,1,1\n1,-2,1\n")
    with pytest.raises(ConfigError, match=r"t\.csv:3: package_bytes -2 is negative"):
        resolve({"run": {"scenarios": ["m"]}, "scenario_defs": {"m": {"trace": path}}})


def test_the_spec_carries_the_trace_to_locust_and_the_phase_ends_with_it() -> None:
    window = TraceWindow(source="azure-code", start=10.0, length=30.0, loop=False)
    spec = LoadSpec(
        run_id="r",
        scenario=Scenario("azure-code", (), window),
        strategy="rr",
        replication=0,
        model="trace",
        rate=20.0,
        duration=1000.0,
    )
    again = LoadSpec.from_json(spec.to_json())
    assert again == spec
    load = runconfig.LoadConfig(model="trace", trace="azure-code", rate=20.0)
    plan = schedule(window, 20.0)
    # The window's n requests at 20/s: the last is due (n - 1) / 20 s in, long before 1000 s.
    assert loadgen.expected_seconds(spec, load) == pytest.approx((len(plan) - 1) / 20)
    with pytest.raises(ConfigError, match="trace model and only it"):
        LoadSpec(run_id="r", scenario=spec.scenario, strategy="rr", replication=0)


# ------------------------------------------------------------------ the simulator


def test_the_simulator_sends_the_same_schedule(tmp_path: Path) -> None:
    path = trace_file(tmp_path)
    cfg = config_from_mapping(
        {"trace": path, "rate": 45, "servers": 2, "service": "exp:1ms", "trace_loop": True,
         "requests": 25, "picks_every": 0}
    )  # fmt: skip
    assert isinstance(cfg.arrivals, TraceArrivals) and cfg.scenario == "t"
    result = simulate(cfg)
    rows = sorted(
        zip(
            result.requests["t_sent"].to_pylist(),
            result.requests["package_bytes"].to_pylist(),
            result.requests["work_bytes"].to_pylist(),
            strict=True,
        )
    )
    planned = list(cfg.arrivals.schedule.sends(most=25))
    t0 = rows[0][0]
    assert [(p, w) for _, p, w in rows] == [(p, w) for _, p, w in planned]
    assert [t - t0 for t, _, _ in rows] == pytest.approx([d for d, _, _ in planned], abs=1e-6)


def test_the_simulator_replays_one_pass_unless_told() -> None:
    cfg = config_from_mapping({"scenario": "azure-code", "rate": 100, "trace_length": "60s"})
    assert cfg.requests == len(cfg.arrivals.schedule)  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="does not loop"):
        config_from_mapping({"scenario": "azure-code", "requests": 9000})
    with pytest.raises(ConfigError, match="not users"):
        config_from_mapping({"scenario": "azure-code", "users": 3})
