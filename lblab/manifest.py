"""A run's ``manifest.json`` as a typed contract: one writer, one reader, one version.

Four writers make a manifest (the runner, the web UI session, the simulator's output,
the synthetic runs) and the analysis, the twin, the sweep's live check and the terminal
read it. ``Manifest`` and ``PhaseEntry`` are its one definition: frozen values that the
writers build and the readers read, never a dict by string keys. ``save`` writes one
whole or not at all (``lblab.files``); ``ManifestFile`` is the file a run rewrites at
every step; ``load`` and ``from_json`` read one back.

A field has one meaning whatever wrote it: ``config`` is the experiment as resolved
(``loadtests.runconfig``) of a run ``lblab run`` made, on any testbed (empty for ``lblab
simulate``), ``phase_configs`` a simulated run's simulator config of each phase (in the
file it is ``config``, a list, when there is no experiment, as readers outside lblab
know it, and ``phase_configs`` beside the experiment's ``config`` otherwise); ``status`` is the run's, each
phase has its own; ``cpu_limit_method`` says how the servers' CPU was limited. What a
writer records beyond the typed fields (the runner's ``order``, a simulated phase's
``pool_counters``, a phase's ``timeline`` ...) is kept verbatim in ``extra`` and
written beside them.

Versions. ``SCHEMA_VERSION`` is written as ``schema_version``. A manifest without it
was written before the field existed and is read as version 1: its simulated runs gave
their scenarios as names, a per-phase map under ``status``, the CPU limit under
``cpu_limit`` and no status in their phases (all were done); synthetic runs gave
``started`` as text (dropped). A reader refuses a version it does not know (a newer
lblab wrote it) with a ``ManifestError`` naming the file and what to do, as it refuses
a file that is not a manifest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lblab.config import load_json_object
from lblab.errors import ConfigError, ManifestError
from lblab.files import write_bytes_atomically
from lblab.json_fields import (
    Fields,
    MalformedJson,
    an_object,
    choice,
    flag,
    number,
    read_json,
    text,
    to_plain,
    tuple_of,
    whole,
)
from lblab.scenarios import Cell
from lblab.validity import Check, request_facts
from lblab.windows import Window, throughput

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 2
FIRST_VERSION = 1
"""What a manifest without ``schema_version`` is (written before the field existed)."""
RUN_STATUSES = ("running", "done", "failed", "interrupted")
PHASE_STATUSES = ("pending", "running", "done", "failed", "interrupted")
WARMUP_ROWS = "kept, marked warmup=true"
_NOT_A_MANIFEST = (
    "it was not written by lblab run, lblab ui or lblab simulate, or was changed since; "
    "restore it from a copy, or re-run the experiment"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseEntry:
    """One phase (scenario x strategy x replication) as planned, run and checked.

    Times are epoch seconds (a simulation's: its own clock from ``EPOCH``); the counts
    are over the phase's request rows, ``*_in_window`` over those inside ``window``
    (``lblab/windows.py``); ``measured`` is ``validity.request_facts`` of them and
    ``verdicts``/``verdict`` the checks (``validity.judge``)."""

    key: str
    scenario: str
    strategy: str
    replication: int
    status: str = "pending"
    seed: int | None = None
    duration_s: float | None = None
    """The measured length it was planned with (an adaptive run may lengthen one)."""
    attempt: str | None = None
    start: float | None = None
    end: float | None = None
    error: str | None = None
    window: Window | None = None
    requests: int | None = None
    failures: int | None = None
    requests_in_window: int | None = None
    ok_in_window: int | None = None
    ok_per_s_window: float | None = None
    measured: Mapping[str, Any] = field(default_factory=dict)
    harness_cpu: Mapping[str, Any] = field(default_factory=dict)
    loaders: Mapping[str, int] = field(default_factory=dict)
    clocks: Mapping[str, Any] | None = None
    unaccounted: int | None = None
    """Requests the writers counted without a row (None: not counted, as in a simulation)."""
    verdicts: tuple[Check, ...] = ()
    verdict: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cell(self) -> tuple[str, str, int]:
        return (self.scenario, self.strategy, self.replication)

    @property
    def label(self) -> str:
        return f"{self.scenario} {self.strategy} rep {self.replication}"

    @property
    def balancer_cores(self) -> float | None:
        """Cores the balancer nodes used over the window, together; None when not
        measured (an external testbed, a simulation)."""
        used = self.harness_cpu.get("balancer")
        return float(sum(used)) if used else None

    def checks_at(self, level: str) -> list[Check]:
        """Its checks at ``level`` (``pass``, ``warn``, ``fail``, ``n/a``), in order."""
        return [c for c in self.verdicts if c.level == level]

    def updated(self, **facts: Any) -> PhaseEntry:
        """This entry with ``facts`` set: a typed field by its name (a ``Window`` or its
        dict for ``window``), anything else into ``extra``; checked as ``load`` checks."""
        return _phase({**self.to_json(), **facts}, f"phase {self.key}")

    def to_json(self) -> dict[str, Any]:
        return _json_fields(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioEntry:
    """A scenario the run ran: its name and, for a live run, its request shapes and its
    load (``LoadConfig.facts()`` with ``count``, ``duration_s`` and ``warmup_s``)."""

    name: str
    cells: tuple[Cell, ...] = ()
    load: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.cells:
            out["cells"] = [
                {"name": c.name, "package_bytes": c.package_bytes, "work_bytes": c.work_bytes}
                for c in self.cells
            ]
        if self.load:
            out["load"] = to_plain(self.load)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """A run: what was asked and resolved, on what it ran, and each phase."""

    run_id: str
    simulated: bool = False
    status: str | None = None
    config_given: Mapping[str, Any] = field(default_factory=dict)
    """What the person gave: command, preset, config file, flags."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """The experiment as resolved (``RunConfig.raw``); empty for ``lblab simulate``."""
    phase_configs: tuple[Mapping[str, Any], ...] = ()
    """A simulated run's ``SimConfig.describe()`` of each phase, in phase order."""
    scenarios: tuple[ScenarioEntry, ...] = ()
    """Each scenario run, in the run's order."""
    strategies: tuple[str, ...] = ()
    warmup_s: float | None = None
    software: Mapping[str, Any] = field(default_factory=dict)
    host: Mapping[str, Any] = field(default_factory=dict)
    testbed: Mapping[str, Any] = field(default_factory=dict)
    """The started testbed's facts (``servers``, ``cpu_layout``, ...); empty until then."""
    cpu_limit_method: str | None = None
    started: float | None = None
    ended: float | None = None
    collected: float | None = None
    attempts: tuple[Mapping[str, Any], ...] = ()
    adaptive: Mapping[str, Any] | None = None
    phases: tuple[PhaseEntry, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def scenario(self, name: str) -> ScenarioEntry | None:
        """The scenario entry named ``name`` (None when the run has none)."""
        return next((s for s in self.scenarios if s.name == name), None)

    def windows(self) -> dict[tuple[str, str, int], Window]:
        """(scenario, strategy, replication) -> measured window, for every phase that has
        one (runs written before windows have none)."""
        return {p.cell: p.window for p in self.phases if p.window is not None}

    def updated(self, **facts: Any) -> Manifest:
        """This manifest with ``facts`` set, by their names in the file (as
        ``PhaseEntry.updated``)."""
        return from_json({**self.to_json(), **facts})

    def checked_phases(self) -> list[PhaseEntry]:
        """The phases that carry validity checks."""
        return [p for p in self.phases if p.verdicts]

    def to_json(self) -> dict[str, Any]:
        data = {"schema_version": SCHEMA_VERSION, **_json_fields(self)}
        data.setdefault("phases", [])
        if self.warmup_s is not None:
            data["warmup"] = {"seconds": data.pop("warmup_s"), "rows": WARMUP_ROWS}
        if self.phase_configs and not self.config:
            data["config"] = data.pop("phase_configs")
        return data


def measured_fields(requests: pa.Table, window: Window) -> dict[str, Any]:
    """A phase's ``window`` fields from its request rows, labelled by that window: what
    the runner and the simulator both record (``ok_per_s_window`` None for an empty
    window, which has no rate)."""
    measured = request_facts(requests, window)
    ok = measured["ok_in_window"]
    return {
        "window": window,
        "measured": measured,
        "requests_in_window": measured["requests_in_window"],
        "ok_in_window": ok,
        "ok_per_s_window": throughput(ok, window) if window.seconds > 0 else None,
    }


def _json_fields(value: PhaseEntry | Manifest) -> dict[str, Any]:
    """The fields as JSON data, in their order, then ``extra``; a field that is None or
    empty is left out (a reader gets it back as its default)."""
    out: dict[str, Any] = {}
    for f in fields(value):
        v = getattr(value, f.name)
        if f.name != "extra" and v is not None and v != () and v != {}:
            out[f.name] = to_plain(v)
    return {**out, **value.extra}


# ------------------------------------------------------------------ reading


def from_json(data: Mapping[str, Any], source: str = "manifest") -> Manifest:
    """The manifest in ``data`` (``source`` names it in errors). Raises ``ManifestError``
    for a version this lblab does not know or data that is not a manifest."""
    version = data.get("schema_version", FIRST_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < FIRST_VERSION:
        raise ManifestError(
            f"{source} has an unknown schema_version {version!r}; {_NOT_A_MANIFEST}"
        )
    if version > SCHEMA_VERSION:
        raise ManifestError(
            f"{source} has schema_version {version}, newer than this lblab reads "
            f"({SCHEMA_VERSION}): a newer lblab wrote it; update lblab (git pull, then "
            "scripts/setup) to read it"
        )
    body = dict(data)
    body.pop("schema_version", None)
    if version == FIRST_VERSION:
        body = _from_v1(body)
    try:
        return read_json(body, _manifest, source=source, remedy=_NOT_A_MANIFEST)
    except MalformedJson as exc:
        raise ManifestError(str(exc)) from None


def load(path: Path) -> Manifest:
    """The manifest at ``path``; its folder's name is the run id if it names none.
    Every way it cannot be read is a ``ManifestError`` naming the file."""
    try:
        data = load_json_object(path, "run manifest")
    except ConfigError as exc:
        raise ManifestError(str(exc)) from None
    return from_json({"run_id": path.parent.name, **data}, str(path))


def _from_v1(body: dict[str, Any]) -> dict[str, Any]:
    """A version-1 manifest in today's layout (module docstring, "Versions")."""
    if isinstance(body.get("status"), Mapping):  # a simulation: every phase was done
        body["status"] = "done"
    if "cpu_limit" in body and "cpu_limit_method" not in body:
        body["cpu_limit_method"] = body.pop("cpu_limit")
    if isinstance(body.get("scenarios"), list):
        body["scenarios"] = [{"name": s} if isinstance(s, str) else s for s in body["scenarios"]]
    if isinstance(body.get("started"), str):
        del body["started"]
    if body.get("simulated") and isinstance(body.get("phases"), list):
        body["phases"] = [
            {"status": "done", **p} if isinstance(p, Mapping) else p for p in body["phases"]
        ]
    return body


def _fields(value: Any, where: str) -> Fields:
    """``value``'s fields, a null one read as left out (the writers leave out what is
    None or empty, and ``updated`` may set a field to None)."""
    return Fields(value, where, null_is_missing=True)


def _real(value: Any, where: str) -> float:
    """A number, as a float (a time or a duration written as ``100`` reads as ``100.0``)."""
    return float(number(value, where))


def _as_text(value: Any, where: str) -> str:
    """Any value, as its text (the strategies' names, whatever a writer gave)."""
    return str(value)


def _manifest(value: Any, where: str) -> Manifest:
    if isinstance(value.get("config"), list):  # a simulation's: ``phase_configs``
        value = {**value, "phase_configs": value["config"], "config": None}
    f = _fields(value, where)
    objects = tuple_of(an_object)
    return Manifest(
        run_id=f("run_id", text),
        simulated=f("simulated", flag, False),
        status=f("status", choice(RUN_STATUSES), None),
        config_given=f("config_given", an_object, {}),
        config=f("config", an_object, {}),
        phase_configs=f("phase_configs", objects, ()),
        scenarios=f("scenarios", tuple_of(_scenario), ()),
        strategies=f("strategies", tuple_of(_as_text), ()),
        warmup_s=f("warmup", _warmup_seconds, None),
        software=f("software", an_object, {}),
        host=f("host", an_object, {}),
        testbed=f("testbed", an_object, {}),
        cpu_limit_method=f("cpu_limit_method", text, None),
        started=f("started", _real, None),
        ended=f("ended", _real, None),
        collected=f("collected", _real, None),
        attempts=f("attempts", objects, ()),
        adaptive=f("adaptive", an_object, None),
        phases=f("phases", tuple_of(_phase), ()),
        extra=f.rest((*_MANIFEST_FIELDS, "warmup")),
    )


def _warmup_seconds(value: Any, where: str) -> float | None:
    return _fields(value, where)("seconds", _real, None)


def _phase(value: Any, where: str) -> PhaseEntry:
    f = _fields(value, where)
    return PhaseEntry(
        key=f("key", text),
        scenario=f("scenario", text),
        strategy=f("strategy", text),
        replication=f("replication", whole),
        status=f("status", choice(PHASE_STATUSES), "pending"),
        seed=f("seed", whole, None),
        duration_s=f("duration_s", _real, None),
        attempt=f("attempt", text, None),
        start=f("start", _real, None),
        end=f("end", _real, None),
        error=f("error", text, None),
        window=f("window", _window, None),
        requests=f("requests", whole, None),
        failures=f("failures", whole, None),
        requests_in_window=f("requests_in_window", whole, None),
        ok_in_window=f("ok_in_window", whole, None),
        ok_per_s_window=f("ok_per_s_window", _real, None),
        measured=f("measured", an_object, {}),
        harness_cpu=f("harness_cpu", an_object, {}),
        loaders=f("loaders", an_object, {}),
        clocks=f("clocks", an_object, None),
        unaccounted=f("unaccounted", whole, None),
        verdicts=f("verdicts", tuple_of(_check), ()),
        verdict=f("verdict", text, None),
        extra=f.rest(_PHASE_FIELDS),
    )


def _window(value: Any, where: str) -> Window:
    window = value if isinstance(value, Window) else Window.from_dict(value)
    if window is None:
        raise MalformedJson(where, f"is {value!r}, not a start and an end")
    return window


def _scenario(value: Any, where: str) -> ScenarioEntry:
    if isinstance(value, ScenarioEntry):
        return value
    f = _fields(value, where)
    cells = f("cells", tuple_of(_cell), ())
    load = f("load", an_object, {})
    return ScenarioEntry(name=f("name", text), cells=cells, load=load)


def _cell(value: Any, where: str) -> Cell:
    f = _fields(value, where)
    sizes = (f("package_bytes", whole), f("work_bytes", whole))
    name = f("name", text)
    try:
        return Cell(name, *sizes)
    except ConfigError as exc:
        raise MalformedJson.refused(where, exc) from None


def _check(value: Any, where: str) -> Check:
    if isinstance(value, Check):
        return value
    f = _fields(value, where)
    return Check(*(f(name, text) for name in _CHECK_FIELDS))


_CHECK_FIELDS = tuple(f.name for f in fields(Check))
_PHASE_FIELDS = frozenset(f.name for f in fields(PhaseEntry)) - {"extra"}
_MANIFEST_FIELDS = frozenset(f.name for f in fields(Manifest)) - {"extra", "warmup_s"}


# ------------------------------------------------------------------ writing


def to_text(manifest: Manifest) -> str:
    """The manifest as the JSON text a run folder holds (NaN as JSON's ``NaN``)."""
    return json.dumps(manifest.to_json(), indent=2, default=str) + "\n"


def save(path: Path, manifest: Manifest) -> None:
    """Write ``path`` whole or not at all (``WriteFailed`` when it cannot be)."""
    write_bytes_atomically(path, to_text(manifest).encode())


class ManifestFile:
    """The manifest of a run in progress: its current value, rewritten whole on ``save``.

    ``set``/``set_phase`` change the value only (a handler that must not write, as on a
    full disk, saves later); ``update_phase`` changes a phase and saves."""

    __slots__ = ("manifest", "path")

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path, self.manifest = path, manifest

    def save(self) -> None:
        save(self.path, self.manifest)

    def set(self, **fields: Any) -> None:
        self.manifest = replace(self.manifest, **fields)

    def phase(self, index: int) -> PhaseEntry:
        return self.manifest.phases[index]

    def set_phase(self, index: int, **facts: Any) -> None:
        phases = list(self.manifest.phases)
        phases[index] = phases[index].updated(**facts)
        self.manifest = replace(self.manifest, phases=tuple(phases))

    def update_phase(self, index: int, **facts: Any) -> None:
        self.set_phase(index, **facts)
        self.save()

    def add_phases(self, entries: Sequence[PhaseEntry]) -> None:
        self.manifest = replace(self.manifest, phases=(*self.manifest.phases, *entries))

    def add_attempt(self, **facts: Any) -> None:
        self.manifest = replace(self.manifest, attempts=(*self.manifest.attempts, facts))

    def end_attempt(self, **facts: Any) -> None:
        """Record ``facts`` (``ended``, ``error``) on the latest attempt."""
        *before, last = self.manifest.attempts
        self.manifest = replace(self.manifest, attempts=(*before, {**last, **facts}))
