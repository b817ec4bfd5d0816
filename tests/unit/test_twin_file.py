"""twin.json's one writer and one reader (``analysis/twin/file.py``): the typed report
round-trips, the version comes first, the old layout reads, and what is not a twin
report is refused with a ``ConfigError`` naming the file and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.analysis.twin import (
    TWIN_SCHEMA_VERSION,
    ModelFront,
    ModelScenario,
    ModelServer,
    Ranked,
    ScaledFigures,
    ScaledRank,
    TooShort,
    TwinCell,
    TwinModel,
    TwinRank,
    TwinReport,
    TwinScale,
    TwinSummary,
    load_twin,
    save_twin,
)
from lblab.errors import ConfigError

REBUILD = "rebuild it with `lblab twin RUN`"


def _rank(tau: float | None) -> TwinRank:
    return TwinRank(
        measured=("lc", "rr"),
        simulated=("rr", "lc"),
        tau=tau,
        resolved_pairs=1,
        contradicted_pairs=("lc > rr",),
    )


def _scaled_rank() -> ScaledRank:
    return ScaledRank(simulated=("lc", "rr"), tau_vs_twin=1.0, tau_vs_measured=None)


def _report() -> TwinReport:
    figures = {"throughput_rps": 100.0, "latency_mean_ms": 5.5, "latency_p95_ms": None}
    cell = TwinCell(
        strategy="rr",
        scenario="sp+sr",
        measured=figures,
        measured_ci95={"throughput_rps": (95.0, 105.0), "latency_p95_ms": (None, None)},
        simulated={**figures, "throughput_rps": 120.0},
        error={"throughput_rps": 0.2, "latency_mean_ms": 0.0, "latency_p95_ms": None},
        inside_measured_ci={"throughput_rps": False, "latency_p95_ms": None},
        validity=("machine warn",),
    )
    return TwinReport(
        run="results/quick-1",
        run_id="quick-1",
        simulated_input=False,
        created=1_700_000_000.5,
        wall_seconds=12.5,
        model=TwinModel(
            servers=(
                ModelServer(
                    id="s1",
                    weight=1.0,
                    workers=2,
                    capacity=None,
                    cpu_quota=0.25,
                    quota_period_s=0.01,
                    fit="json:a=0ms,b=1e-07,c=7e-08",
                    fit_r2=0.5,
                    service_ms_mean={"100B+10000B": 1.7},
                    samples=4890,
                ),
            ),
            scenarios={
                "sp+sr": ModelScenario(
                    front=ModelFront(client_ms=1.5, slope_ms=0.2, server_ms={"rr": {"s1": 0.1}}),
                    think_ms=0.0,
                    demand_scale={"s1": 1.0},
                    quota_binds={"s1": True},
                    quota_bound_work_from=("s2",),
                    requests_per_phase=5013,
                )
            },
            deadline_s=None,
            replications=2,
            notes=("a note",),
        ),
        cells=(cell,),
        rank={"sp+sr": Ranked(throughput=_rank(-1.0), latency_mean=_rank(None))},
        scales=(
            TwinScale(
                servers=30,
                dir="twin/scale-30",
                replications=1,
                requests_per_phase={"sp+sr": 3000},
                too_short_for_agent_reports={
                    "sp+sr": TooShort(window_s=0.1, strategies=("dwrr",), agent_periods=0.4)
                },
                figures=(ScaledFigures(strategy="rr", scenario="sp+sr", figures=figures),),
                rank={"sp+sr": Ranked(throughput=_scaled_rank(), latency_mean=_scaled_rank())},
            ),
        ),
        summary=TwinSummary(
            max_abs_throughput_error=0.2,
            throughput_misses=("rr / sp+sr",),
            throughput_misses_outside_ci=("rr / sp+sr",),
            throughput_misses_where_the_harness_held=(),
            median_measured_ci_halfwidth=0.05,
            tau_below_target=("sp+sr",),
            tau_undefined=(),
            resolved_pairs_contradicted={"sp+sr": ("lc > rr",)},
            miss_threshold=0.15,
            tau_target=0.8,
        ),
    )


def test_a_saved_report_reads_back_equal_with_its_version_first(tmp_path: Path) -> None:
    report = _report()
    path = save_twin(tmp_path / "twin.json", report)
    data = json.loads(path.read_text())
    assert next(iter(data)) == "schema_version" and data["schema_version"] == 2
    assert TWIN_SCHEMA_VERSION == TwinReport.schema_version == 2
    assert load_twin(path) == report
    assert TwinReport.from_json(report.to_json()) == report


def test_the_file_keeps_its_layout() -> None:
    data = _report().to_json()
    assert list(data) == [
        "schema_version",
        *("run", "run_id", "simulated_input", "created", "wall_seconds", "model"),
        *("cells", "rank", "scales", "summary"),
    ]
    cell = data["cells"][0]
    assert cell["measured_ci95"]["throughput_rps"] == [95.0, 105.0]
    assert cell["validity"] == ["machine warn"]
    assert set(data["rank"]["sp+sr"]) == {"throughput", "latency_mean"}
    (scale,) = data["scales"]
    assert scale["figures"] == [
        {
            "strategy": "rr",
            "scenario": "sp+sr",
            "throughput_rps": 100.0,
            "latency_mean_ms": 5.5,
            "latency_p95_ms": None,
        }
    ]
    assert list(scale["too_short_for_agent_reports"]["sp+sr"]) == [
        "window_s",
        "strategies",
        "agent_periods",
    ]
    assert data["model"]["scenarios"]["sp+sr"]["front"]["server_ms"] == {"rr": {"s1": 0.1}}


def _v1() -> dict[str, Any]:
    """``_report`` as version 1 wrote it: no version, a cell's checks ``harness_checks``."""
    data = _report().to_json()
    del data["schema_version"]
    cell = data["cells"][0]
    cell["harness_checks"] = cell.pop("validity")
    return data


def test_a_report_without_a_version_is_version_1_and_its_flags_are_renamed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(_v1()))
    assert load_twin(path) == _report()


def test_fields_an_older_twin_did_not_write_read_as_not_known(tmp_path: Path) -> None:
    data = _v1()
    del data["cells"][0]["harness_checks"], data["summary"]["resolved_pairs_contradicted"]
    del data["rank"]["sp+sr"]["throughput"]["resolved_pairs"], data["wall_seconds"]
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(data))
    report = load_twin(path)
    assert report.cells[0].validity is None and report.wall_seconds is None
    assert report.summary.resolved_pairs_contradicted is None
    assert report.rank["sp+sr"].throughput.resolved_pairs is None


def _changed(change: str) -> dict[str, Any]:
    data = _report().to_json()
    match change:
        case "no strategy":
            del data["cells"][0]["strategy"]
        case "cells not a list":
            data["cells"] = {"rr": {}}
        case "tau as text":
            data["rank"]["sp+sr"]["throughput"]["tau"] = "high"
        case "no summary":
            del data["summary"]
        case "scale figure as text":
            data["scales"][0]["figures"][0]["throughput_rps"] = "fast"
        case "a cell a list":
            data["cells"][0] = []
        case "version 9":
            data["schema_version"] = 9
        case "version true":
            data["schema_version"] = True
    return data


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("no strategy", "not a twin report as lblab writes it: cells[0].strategy is missing"),
        ("cells not a list", "not a twin report (no cells)"),
        ("tau as text", "rank.sp+sr.throughput.tau is a str, not a number"),
        ("no summary", "summary is missing"),
        ("scale figure as text", "scales[0].figures[0].throughput_rps is a str, not a number"),
        ("a cell a list", "cells[0] is a list, not an object"),
        ("version 9", "schema version 9, but this lblab reads 1 to 2"),
        ("version true", "schema version True, but this lblab reads 1 to 2"),
    ],
)
def test_a_malformed_report_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, change: str, says: str
) -> None:
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(_changed(change)))
    with pytest.raises(ConfigError, match=REBUILD) as caught:
        load_twin(path)
    assert str(caught.value).startswith(f"{path}: ") and says in str(caught.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"schema_version": 9, "cells": []}', "schema version 9, but this lblab reads 1 to 2"),
        ("{not json", "not JSON"),
        ('{"rank": []}', "not a twin report (no cells)"),
        ("[]", "not a twin report (no cells)"),
    ],
)
def test_what_cannot_be_read_is_named_with_what_to_do(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "twin.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=REBUILD) as caught:
        load_twin(path)
    assert str(path) in str(caught.value) and says in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_twin(tmp_path / "nope.json")


# ------------------------------------------------------------------ any report round-trips

_names = st.text(min_size=1, max_size=6)
_figure_names = _names.filter(lambda n: n not in ("strategy", "scenario"))
_nums = st.floats(allow_nan=False, allow_infinity=False)
_maybe_nums = st.none() | _nums
_ints = st.integers(0, 10**9)
_words = st.lists(_names, max_size=3).map(tuple)
_figures = st.dictionaries(_figure_names, _maybe_nums, max_size=3)
_twin_ranks = st.builds(
    TwinRank,
    measured=_words,
    simulated=_words,
    tau=_maybe_nums,
    resolved_pairs=st.none() | _ints,
    contradicted_pairs=_words,
)
_scaled_ranks = st.builds(
    ScaledRank, simulated=_words, tau_vs_twin=_maybe_nums, tau_vs_measured=_maybe_nums
)
_cells = st.builds(
    TwinCell,
    strategy=_names,
    scenario=_names,
    measured=_figures,
    measured_ci95=st.dictionaries(_names, st.tuples(_maybe_nums, _maybe_nums), max_size=2),
    simulated=_figures,
    error=_figures,
    inside_measured_ci=st.dictionaries(_names, st.none() | st.booleans(), max_size=2),
    validity=st.none() | _words,
)
_scales = st.builds(
    TwinScale,
    servers=_ints,
    dir=_names,
    replications=_ints,
    requests_per_phase=st.dictionaries(_names, _ints, max_size=2),
    too_short_for_agent_reports=st.dictionaries(
        _names,
        st.builds(TooShort, window_s=_nums, strategies=_words, agent_periods=_nums),
        max_size=2,
    ),
    figures=st.lists(
        st.builds(ScaledFigures, strategy=_names, scenario=_names, figures=_figures), max_size=2
    ).map(tuple),
    rank=st.dictionaries(
        _names, st.builds(Ranked, throughput=_scaled_ranks, latency_mean=_scaled_ranks), max_size=2
    ),
)
_servers = st.builds(
    ModelServer,
    id=_names,
    weight=_nums,
    workers=_ints,
    capacity=st.none() | _ints,
    cpu_quota=_maybe_nums,
    quota_period_s=_maybe_nums,
    fit=_names,
    fit_r2=_nums,
    service_ms_mean=st.dictionaries(_names, _nums, max_size=2),
    samples=_ints,
)
_scenarios = st.builds(
    ModelScenario,
    front=st.builds(
        ModelFront,
        client_ms=_nums,
        slope_ms=_nums,
        server_ms=st.dictionaries(_names, st.dictionaries(_names, _nums, max_size=2), max_size=2),
    ),
    think_ms=_nums,
    demand_scale=st.dictionaries(_names, _nums, max_size=2),
    quota_binds=st.dictionaries(_names, st.booleans(), max_size=2),
    quota_bound_work_from=_words,
    requests_per_phase=_ints,
)
_reports = st.builds(
    TwinReport,
    run=st.text(max_size=10),
    run_id=st.text(max_size=10),
    simulated_input=st.booleans(),
    created=_nums,
    wall_seconds=_maybe_nums,
    model=st.builds(
        TwinModel,
        servers=st.lists(_servers, max_size=2).map(tuple),
        scenarios=st.dictionaries(_names, _scenarios, max_size=2),
        deadline_s=_maybe_nums,
        replications=_ints,
        notes=_words,
    ),
    cells=st.lists(_cells, max_size=3).map(tuple),
    rank=st.dictionaries(
        _names, st.builds(Ranked, throughput=_twin_ranks, latency_mean=_twin_ranks), max_size=2
    ),
    scales=st.lists(_scales, max_size=2).map(tuple),
    summary=st.builds(
        TwinSummary,
        max_abs_throughput_error=_maybe_nums,
        throughput_misses=_words,
        throughput_misses_outside_ci=st.none() | _words,
        throughput_misses_where_the_harness_held=st.none() | _words,
        median_measured_ci_halfwidth=_maybe_nums,
        tau_below_target=_words,
        tau_undefined=_words,
        resolved_pairs_contradicted=st.none() | st.dictionaries(_names, _words, max_size=2),
        miss_threshold=_nums,
        tau_target=_nums,
    ),
)


@settings(max_examples=60, deadline=None)
@given(_reports)
def test_any_report_reads_back_as_written(report: TwinReport) -> None:
    text = json.dumps(report.to_json())
    assert TwinReport.from_json(json.loads(text), "twin.json") == report
