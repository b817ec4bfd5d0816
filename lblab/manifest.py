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
writer records beyond the typed fields (the runner's ``order``, the simulator's
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
            out["load"] = _plain(self.load)
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
            out[f.name] = _plain(v)
    return {**out, **value.extra}


def _plain(value: Any) -> Any:
    if isinstance(value, Window):
        return value.to_dict()
    if isinstance(value, PhaseEntry | ScenarioEntry):
        return value.to_json()
    if isinstance(value, Check):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


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
        return _manifest(body)
    except _Malformed as exc:
        raise ManifestError(f"{source}: {exc}; {_NOT_A_MANIFEST}") from None


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


class _Malformed(ValueError):
    """What is wrong with a field; ``from_json`` names the file and the remedy."""


def _manifest(body: Mapping[str, Any]) -> Manifest:
    if isinstance(body.get("config"), list):
        body = {**body, "phase_configs": body["config"], "config": None}
    warmup = _object(body, "warmup", "")
    rest = {k: v for k, v in body.items() if k not in _MANIFEST_FIELDS and k != "warmup"}
    phases = _list(body, "phases", "")
    return Manifest(
        run_id=_text(body, "run_id", "", required=True),
        simulated=_flag(body, "simulated", ""),
        status=_choice(body, "status", RUN_STATUSES, ""),
        config_given=_object(body, "config_given", ""),
        config=_object(body, "config", ""),
        phase_configs=tuple(_objects(body, "phase_configs", "")),
        scenarios=tuple(
            _scenario(s, f"scenarios[{i}].") for i, s in enumerate(_list(body, "scenarios", ""))
        ),
        strategies=tuple(str(s) for s in _list(body, "strategies", "")),
        warmup_s=_number(warmup, "seconds", "warmup."),
        software=_object(body, "software", ""),
        host=_object(body, "host", ""),
        testbed=_object(body, "testbed", ""),
        cpu_limit_method=_text(body, "cpu_limit_method", ""),
        started=_number(body, "started", ""),
        ended=_number(body, "ended", ""),
        collected=_number(body, "collected", ""),
        attempts=tuple(_objects(body, "attempts", "")),
        adaptive=_object(body, "adaptive", "") if body.get("adaptive") is not None else None,
        phases=tuple(_phase(p, f"phases[{i}]") for i, p in enumerate(phases)),
        extra=rest,
    )


def _phase(entry: Any, where: str) -> PhaseEntry:
    if not isinstance(entry, Mapping):
        raise _Malformed(f"{where} is a {type(entry).__name__}, not an object")
    at = f"{where}."
    rest = {k: v for k, v in entry.items() if k not in _PHASE_FIELDS}
    window = entry.get("window")
    if window is not None and not isinstance(window, Window):
        window = Window.from_dict(window)
        if window is None:
            raise _Malformed(f"{at}window is {entry['window']!r}, not a start and an end")
    return PhaseEntry(
        key=_text(entry, "key", at, required=True),
        scenario=_text(entry, "scenario", at, required=True),
        strategy=_text(entry, "strategy", at, required=True),
        replication=_whole(entry, "replication", at, required=True),
        status=_choice(entry, "status", PHASE_STATUSES, at) or "pending",
        seed=_whole(entry, "seed", at),
        duration_s=_number(entry, "duration_s", at),
        attempt=_text(entry, "attempt", at),
        start=_number(entry, "start", at),
        end=_number(entry, "end", at),
        error=_text(entry, "error", at),
        window=window,
        requests=_whole(entry, "requests", at),
        failures=_whole(entry, "failures", at),
        requests_in_window=_whole(entry, "requests_in_window", at),
        ok_in_window=_whole(entry, "ok_in_window", at),
        ok_per_s_window=_number(entry, "ok_per_s_window", at),
        measured=_object(entry, "measured", at),
        harness_cpu=_object(entry, "harness_cpu", at),
        loaders=_object(entry, "loaders", at),
        clocks=_object(entry, "clocks", at) if entry.get("clocks") is not None else None,
        unaccounted=_whole(entry, "unaccounted", at),
        verdicts=tuple(
            _check(c, f"{at}verdicts[{i}].") for i, c in enumerate(_list(entry, "verdicts", at))
        ),
        verdict=_text(entry, "verdict", at),
        extra=rest,
    )


def _scenario(item: Any, at: str) -> ScenarioEntry:
    if isinstance(item, ScenarioEntry):
        return item
    if not isinstance(item, Mapping):
        raise _Malformed(f"{at[:-1]} is a {type(item).__name__}, not an object")
    cells = []
    for j, c in enumerate(_objects(item, "cells", at)):
        where = f"{at}cells[{j}]."
        sizes = (_whole(c, "package_bytes", where, True), _whole(c, "work_bytes", where, True))
        try:
            cells.append(Cell(_text(c, "name", where, required=True), *sizes))
        except ConfigError as exc:
            raise _Malformed(f"{where[:-1]}: {exc}") from None
    load = _object(item, "load", at)
    return ScenarioEntry(name=_text(item, "name", at, required=True), cells=tuple(cells), load=load)


def _check(item: Any, at: str) -> Check:
    if isinstance(item, Check):
        return item
    if not isinstance(item, Mapping):
        raise _Malformed(f"{at[:-1]} is a {type(item).__name__}, not an object")
    return Check(*(_text(item, name, at, required=True) for name in _CHECK_FIELDS))


_CHECK_FIELDS = tuple(f.name for f in fields(Check))
_PHASE_FIELDS = frozenset(f.name for f in fields(PhaseEntry)) - {"extra"}
_MANIFEST_FIELDS = frozenset(f.name for f in fields(Manifest)) - {"extra", "warmup_s"}


def _present(data: Mapping[str, Any], name: str, at: str, required: bool) -> Any:
    value = data.get(name)
    if value is None and required:
        raise _Malformed(f"{at}{name} is missing")
    return value


def _text(data: Mapping[str, Any], name: str, at: str, required: bool = False) -> Any:
    value = _present(data, name, at, required)
    if value is not None and not isinstance(value, str):
        raise _Malformed(f"{at}{name} is {value!r}, not text")
    return value


def _choice(data: Mapping[str, Any], name: str, allowed: Sequence[str], at: str) -> str | None:
    value = _text(data, name, at)
    if value is not None and value not in allowed:
        raise _Malformed(f"{at}{name} is {value!r}, not one of {', '.join(allowed)}")
    return value


def _flag(data: Mapping[str, Any], name: str, at: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise _Malformed(f"{at}{name} is {value!r}, not true or false")
    return value


def _number(data: Mapping[str, Any], name: str, at: str) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Malformed(f"{at}{name} is {value!r}, not a number")
    return float(value)


def _whole(data: Mapping[str, Any], name: str, at: str, required: bool = False) -> Any:
    value = _present(data, name, at, required)
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise _Malformed(f"{at}{name} is {value!r}, not a whole number")
    return int(value)


def _object(data: Mapping[str, Any], name: str, at: str) -> Mapping[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Malformed(f"{at}{name} is a {type(value).__name__}, not an object")
    return value


def _list(data: Mapping[str, Any], name: str, at: str) -> Sequence[Any]:
    value = data.get(name)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise _Malformed(f"{at}{name} is a {type(value).__name__}, not a list")
    return value


def _objects(data: Mapping[str, Any], name: str, at: str) -> list[Mapping[str, Any]]:
    items = _list(data, name, at)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise _Malformed(f"{at}{name}[{i}] is a {type(item).__name__}, not an object")
    return list(items)


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
