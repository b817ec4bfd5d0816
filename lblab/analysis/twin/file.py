"""``RESULTS_DIR/twin/twin.json`` as a typed contract: one writer, one reader, one version.

``simulator/twin/build.py`` builds a ``TwinReport`` and writes it (``save_twin``); the
report, the docs' results page and ``lblab twin`` read it back (``load_twin``) and read
its fields, never the JSON by string keys. The types below are the file's one
definition: a report holds the run it twins, the model the twin fitted
(``TwinModel``), the compared cells (``TwinCell``), the rankings per scenario
(``Ranked`` of ``TwinRank``), each scaled twin (``TwinScale``) and the summary
(``TwinSummary``). ``to_json`` writes every field under its own name, in field order,
so the file keeps the layout readers outside lblab know; figures stay maps keyed by the
figure's name (``throughput_rps``, ``latency_mean_ms``, ``latency_p95_ms``).

Versions. ``TWIN_SCHEMA_VERSION`` is written first, as ``schema_version``. A file
without it was written before the field existed: it is read as version 1, whose cells
named their flagged validity checks ``harness_checks`` (now ``validity``, the checks'
one name). Fields added after the first twins, where the readers can show a report
without them, have a default (None: not known), so an older file reads as far as it
has them. A version this lblab does not know (a newer lblab wrote
it) or a file that is not a twin report (not JSON, a field missing or of the wrong
type) is refused with a ``ConfigError`` that names the file, what is wrong and what to
do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import Field, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically
from lblab.json_fields import (
    Fields,
    MalformedJson,
    Reader,
    flag,
    map_of,
    number,
    optional,
    plain_fields,
    read_json,
    text,
    tuple_of,
    whole,
)

TWIN_JSON = Path("twin") / "twin.json"
TWIN_SCHEMA_VERSION = 2
FIRST_VERSION = 1
"""What a twin report without ``schema_version`` is (written before the field existed)."""
_REBUILD = "rebuild it with `lblab twin RUN`"

Figures = Mapping[str, float | None]
"""A cell's figures by name (``simulator/twin/measure.FIGURES``); None where it has none."""


class _Part:
    """A part of the report: ``to_json`` is its fields by name, in order, as JSON data."""

    __slots__ = ()
    if TYPE_CHECKING:  # each part is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


# ------------------------------------------------------------------ the compared cells


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinCell(_Part):
    """One strategy x scenario: the run's figures, the twin's, and how far apart.

    ``measured_ci95`` holds each figure's measured 95 % interval across replications
    (None ends with one replication), ``error`` the twin's relative error, and
    ``inside_measured_ci`` whether the twin's figure lies inside that interval.
    ``validity`` names the run's harness checks that warned or failed in the cell's
    phases (``compare.harness_flags``); None where the file recorded none."""

    strategy: str
    scenario: str
    measured: Figures
    measured_ci95: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    simulated: Figures
    error: Figures
    inside_measured_ci: Mapping[str, bool | None] = field(default_factory=dict)
    validity: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"{self.strategy} / {self.scenario}"


# ------------------------------------------------------------------ the rankings


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinRank(_Part):
    """The strategies in one scenario ranked by one figure, measured and simulated.

    ``tau`` is Kendall tau-b between the two orders (None: no ranking, as when every
    strategy ties); ``resolved_pairs`` counts the pairs the run tells apart (95 %
    intervals apart; None without intervals or in a file from before the count) and
    ``contradicted_pairs`` names those the twin reverses, as "a > b"."""

    measured: tuple[str, ...]
    simulated: tuple[str, ...]
    tau: float | None
    resolved_pairs: int | None = None
    contradicted_pairs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaledRank(_Part):
    """A scaled twin's ranking by one figure, with its tau against the twin's ranking
    and against the measured one."""

    simulated: tuple[str, ...]
    tau_vs_twin: float | None
    tau_vs_measured: float | None


R = TypeVar("R", TwinRank, ScaledRank)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranked(_Part, Generic[R]):
    """One scenario's rankings: by throughput and by mean latency."""

    throughput: R
    latency_mean: R

    def items(self) -> tuple[tuple[str, R], ...]:
        """(name as in the file, ranking), throughput first."""
        return (("throughput", self.throughput), ("latency_mean", self.latency_mean))


# ------------------------------------------------------------------ the scaled twins


@dataclass(frozen=True, slots=True, kw_only=True)
class TooShort(_Part):
    """A scaled scenario whose window held too few agent periods for ``strategies``,
    which follow the agents' CPU reports (``simulator/twin/scale.too_short``)."""

    window_s: float
    strategies: tuple[str, ...]
    agent_periods: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaledFigures(_Part):
    """A scaled twin's figures of one cell; in the file, flat beside its names."""

    strategy: str
    scenario: str
    figures: Figures

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "scenario": self.scenario, **self.figures}


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinScale(_Part):
    """The twin run on ``servers`` servers (``--scale``), written under ``dir`` (relative
    to the run)."""

    servers: int
    dir: str
    replications: int
    requests_per_phase: Mapping[str, int]
    too_short_for_agent_reports: Mapping[str, TooShort] = field(default_factory=dict)
    figures: tuple[ScaledFigures, ...]
    rank: Mapping[str, Ranked[ScaledRank]]


# ------------------------------------------------------------------ the model


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelServer(_Part):
    """A server as the twin runs it: as configured, and its fitted service times
    (``simulator/twin/measured_service.MeasuredService.describe``)."""

    id: str
    weight: float
    workers: int
    capacity: int | None
    cpu_quota: float | None
    quota_period_s: float | None = None
    fit: str
    fit_r2: float
    service_ms_mean: Mapping[str, float]
    samples: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFront(_Part):
    """A scenario's time outside the servers' slots (ms, round trip): ``client_ms``
    whatever the load, the load ``slope_ms``, and per strategy and server the load
    term the twin solved (``simulator/twin/model.FrontEnd``)."""

    client_ms: float
    slope_ms: float
    server_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelScenario(_Part):
    """What the twin fitted for one scenario (``simulator/twin/model.ScenarioModel``)."""

    front: ModelFront
    think_ms: float
    demand_scale: Mapping[str, float] = field(default_factory=dict)
    quota_binds: Mapping[str, bool] = field(default_factory=dict)
    quota_bound_work_from: tuple[str, ...] = ()
    requests_per_phase: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinModel(_Part):
    """The servers and scenarios as the twin runs them, and the run's settings."""

    servers: tuple[ModelServer, ...]
    scenarios: Mapping[str, ModelScenario]
    deadline_s: float | None
    replications: int
    notes: tuple[str, ...] = ()
    repeats: int | None = None
    """Draws of each of the run's phases (None: a file written before draws existed,
    one each)."""


# ------------------------------------------------------------------ the report


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinSummary(_Part):
    """What the cells and rankings add up to, with the targets they were held to.

    Cells are named "strategy / scenario"; the fields a file from before them lacks are
    None (not known), not empty (none found)."""

    max_abs_throughput_error: float | None
    throughput_misses: tuple[str, ...]
    throughput_misses_outside_ci: tuple[str, ...] | None = None
    throughput_misses_where_the_harness_held: tuple[str, ...] | None = None
    median_measured_ci_halfwidth: float | None = None
    tau_below_target: tuple[str, ...]
    tau_undefined: tuple[str, ...] = ()
    resolved_pairs_contradicted: Mapping[str, tuple[str, ...]] | None = None
    miss_threshold: float
    tau_target: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TwinReport(_Part):
    """A run's twin: the run (``run`` its folder as given), when and how long it took
    to build, the model, the compared cells, the rankings per scenario, each scaled twin
    and the summary. ``schema_version`` is the layout it has as a value, whatever
    version its file was (an older one is read into it)."""

    schema_version: ClassVar[int] = TWIN_SCHEMA_VERSION
    run: str
    run_id: str
    simulated_input: bool
    created: float
    wall_seconds: float | None = None
    model: TwinModel
    cells: tuple[TwinCell, ...]
    rank: Mapping[str, Ranked[TwinRank]]
    scales: tuple[TwinScale, ...] = ()
    summary: TwinSummary

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, **_Part.to_json(self)}

    @classmethod
    def from_json(cls, data: Any, source: str = "twin report") -> TwinReport:
        """The report in ``data`` (``source`` names it in errors). Raises
        ``ConfigError`` for a version this lblab does not know or data that is not a
        twin report."""
        return from_json(data, source)


def save_twin(path: Path, report: TwinReport) -> Path:
    """Write ``report`` to ``path`` whole or not at all, its version first."""
    write_bytes_atomically(path, (json.dumps(report.to_json(), indent=2) + "\n").encode())
    return path


def load_twin(path: Path) -> TwinReport:
    """The twin report at ``path``; every way it cannot be read is a ``ConfigError``
    naming it."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}); {_REBUILD}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); {_REBUILD}") from None
    return from_json(data, str(path))


# ------------------------------------------------------------------ reading


def from_json(data: Any, source: str = "twin report") -> TwinReport:
    """``TwinReport.from_json``: the module docstring's "Versions", then every field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: not a twin report (no cells); {_REBUILD}")
    version = data.get("schema_version", FIRST_VERSION)
    known = isinstance(version, int) and not isinstance(version, bool)
    if not known or not FIRST_VERSION <= version <= TWIN_SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: twin report schema version {version!r}, but this lblab reads "
            f"{FIRST_VERSION} to {TWIN_SCHEMA_VERSION}: read it with the lblab that wrote "
            f"it, or {_REBUILD}"
        )
    if not isinstance(data.get("cells"), list):
        raise ConfigError(f"{source}: not a twin report (no cells); {_REBUILD}")
    if version == FIRST_VERSION:
        data = _from_v1(data)
    return read_json(
        data,
        _report,
        source=source,
        remedy=_REBUILD,
        lead="not a twin report as lblab writes it: ",
        show_values=False,
    )


def _from_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A version-1 report in today's layout: a cell's ``harness_checks`` is ``validity``."""
    cells = [
        {("validity" if k == "harness_checks" else k): v for k, v in c.items()}
        if isinstance(c, Mapping)
        else c
        for c in data["cells"]
    ]
    return {**data, "cells": cells}


_texts = tuple_of(text)
_figures = map_of(optional(number))


def _interval(value: Any, where: str) -> tuple[float | None, float | None]:
    ends = tuple_of(optional(number))(value, where)
    if len(ends) != 2:
        raise MalformedJson(where, f"has {len(ends)} ends, not a low and a high")
    return ends[0], ends[1]


def _cell(value: Any, where: str) -> TwinCell:
    f = Fields(value, where)
    return TwinCell(
        strategy=f("strategy", text),
        scenario=f("scenario", text),
        measured=f("measured", _figures),
        measured_ci95=f("measured_ci95", map_of(_interval), {}),
        simulated=f("simulated", _figures),
        error=f("error", _figures),
        inside_measured_ci=f("inside_measured_ci", map_of(optional(flag)), {}),
        validity=f("validity", optional(_texts), None),
    )


def _rank(value: Any, where: str) -> TwinRank:
    f = Fields(value, where)
    return TwinRank(
        measured=f("measured", _texts),
        simulated=f("simulated", _texts),
        tau=f("tau", optional(number)),
        resolved_pairs=f("resolved_pairs", optional(whole), None),
        contradicted_pairs=f("contradicted_pairs", _texts, ()),
    )


def _scaled_rank(value: Any, where: str) -> ScaledRank:
    f = Fields(value, where)
    return ScaledRank(
        simulated=f("simulated", _texts),
        tau_vs_twin=f("tau_vs_twin", optional(number)),
        tau_vs_measured=f("tau_vs_measured", optional(number)),
    )


def _ranked(read: Reader[R]) -> Reader[Ranked[R]]:
    def both(value: Any, where: str) -> Ranked[R]:
        f = Fields(value, where)
        return Ranked(throughput=f("throughput", read), latency_mean=f("latency_mean", read))

    return both


def _too_short(value: Any, where: str) -> TooShort:
    f = Fields(value, where)
    return TooShort(
        window_s=f("window_s", number),
        strategies=f("strategies", _texts),
        agent_periods=f("agent_periods", number),
    )


def _scaled_figures(value: Any, where: str) -> ScaledFigures:
    f = Fields(value, where)
    rest = f.rest(("strategy", "scenario"))
    return ScaledFigures(
        strategy=f("strategy", text), scenario=f("scenario", text), figures=_figures(rest, where)
    )


def _scale(value: Any, where: str) -> TwinScale:
    f = Fields(value, where)
    return TwinScale(
        servers=f("servers", whole),
        dir=f("dir", text),
        replications=f("replications", whole),
        requests_per_phase=f("requests_per_phase", map_of(whole)),
        too_short_for_agent_reports=f("too_short_for_agent_reports", map_of(_too_short), {}),
        figures=f("figures", tuple_of(_scaled_figures)),
        rank=f("rank", map_of(_ranked(_scaled_rank))),
    )


def _server(value: Any, where: str) -> ModelServer:
    f = Fields(value, where)
    return ModelServer(
        id=f("id", text),
        weight=f("weight", number),
        workers=f("workers", whole),
        capacity=f("capacity", optional(whole)),
        cpu_quota=f("cpu_quota", optional(number)),
        quota_period_s=f("quota_period_s", optional(number), None),
        fit=f("fit", text),
        fit_r2=f("fit_r2", number),
        service_ms_mean=f("service_ms_mean", map_of(number)),
        samples=f("samples", whole),
    )


def _front(value: Any, where: str) -> ModelFront:
    f = Fields(value, where)
    return ModelFront(
        client_ms=f("client_ms", number),
        slope_ms=f("slope_ms", number),
        server_ms=f("server_ms", map_of(map_of(number)), {}),
    )


def _scenario(value: Any, where: str) -> ModelScenario:
    f = Fields(value, where)
    return ModelScenario(
        front=f("front", _front),
        think_ms=f("think_ms", number),
        demand_scale=f("demand_scale", map_of(number), {}),
        quota_binds=f("quota_binds", map_of(flag), {}),
        quota_bound_work_from=f("quota_bound_work_from", _texts, ()),
        requests_per_phase=f("requests_per_phase", whole),
    )


def _model(value: Any, where: str) -> TwinModel:
    f = Fields(value, where)
    return TwinModel(
        servers=f("servers", tuple_of(_server)),
        scenarios=f("scenarios", map_of(_scenario)),
        deadline_s=f("deadline_s", optional(number)),
        replications=f("replications", whole),
        notes=f("notes", _texts, ()),
        repeats=f("repeats", optional(whole), None),
    )


def _summary(value: Any, where: str) -> TwinSummary:
    f = Fields(value, where)
    return TwinSummary(
        max_abs_throughput_error=f("max_abs_throughput_error", optional(number)),
        throughput_misses=f("throughput_misses", _texts),
        throughput_misses_outside_ci=f("throughput_misses_outside_ci", optional(_texts), None),
        throughput_misses_where_the_harness_held=f(
            "throughput_misses_where_the_harness_held", optional(_texts), None
        ),
        median_measured_ci_halfwidth=f("median_measured_ci_halfwidth", optional(number), None),
        tau_below_target=f("tau_below_target", _texts),
        tau_undefined=f("tau_undefined", _texts, ()),
        resolved_pairs_contradicted=f(
            "resolved_pairs_contradicted", optional(map_of(_texts)), None
        ),
        miss_threshold=f("miss_threshold", number),
        tau_target=f("tau_target", number),
    )


def _report(value: Any, where: str) -> TwinReport:
    f = Fields(value, where)
    return TwinReport(
        run=f("run", text),
        run_id=f("run_id", text),
        simulated_input=f("simulated_input", flag),
        created=f("created", number),
        wall_seconds=f("wall_seconds", optional(number), None),
        model=f("model", _model),
        cells=f("cells", tuple_of(_cell)),
        rank=f("rank", map_of(_ranked(_rank))),
        scales=f("scales", tuple_of(_scale), ()),
        summary=f("summary", _summary),
    )
