"""The simulated twin of a run: the same testbed in the simulator, and how far it misses.

``lblab twin RESULTS_DIR`` reads a finished run (live or simulated), builds its twin and
writes ``RESULTS_DIR/twin/``: the simulated run (the tables ``lblab simulate`` writes),
one ``scale-N/`` folder per ``--scale`` and ``twin.json`` with measured vs simulated
figures, prediction errors and rank agreement (Kendall tau-b).

What the twin takes from the run, all measured or configured; what it fits are measured
quantities (service times, time outside the slot), never the figures it is compared on:

- **Servers**: the run's servers in order, with their weights, workers and max-inflight
  (capacity). Each server's service time is what that server reported per request
  (``service_ms``, the slot's time from start to end of the work, so CPU quotas, cgroup
  throttling and CPU contention on a shared machine are in it). The twin resamples those
  times per request shape (``MeasuredService``); a shape the server never served is
  priced by the JSON-work cost model that ``lblab calibrate`` fits to the same rows.
- **CPU quotas**: a server whose CPU reached 90 % of its quota (below one core) in a
  phase of the scenario had its quota as its limit. Its own slot times include the
  stalls when a period's budget ran out mid-request, and miss its work outside the slot
  (frame decoding, the response, the event loop: same process, same allowance). The
  twin gives it the slot times of the scenario's servers whose quota did not bind (the
  same work without stalls, ``_work_model``) times its CPU per answered request where
  its quota bound (CPU samples in the window: share of the allowance x allowance /
  answers per second; median over those phases) over their mean, and runs them under
  its quota as the kernel enforces it (``simulator.quota``: full speed until the budget
  of the live server's period, 10 ms, is spent, then a stall): a lone request is fast,
  a loaded server caps at quota / CPU per request. A server that never reached its quota
  was held below it by the machine's other processes; its slot times are used as
  measured.
- **Front end** (``FrontEnd``): ``latency - queue_ms - service_ms`` of each request is
  the time spent outside the server's slot (generator, balancer, links, the server's
  event loop). Over the scenario's phases and the servers whose quota did not bind, it
  is fitted as a client part (a round trip client<->balancer, the same for every
  request) plus a load term ``slope * u / (1 - u)`` at the server, with ``u`` the share
  of time its slot was busy: the server's event loop waits for the worker that runs the
  slot. The load term is charged between the balancer and the server (so it counts as
  in flight, as it does live) and solved per strategy for the utilisation the twin's
  own simulation gives the server (``solve_fronts``). A throttled server's event loop
  waits out its stalls instead, which its CPU per answer under its quota prices.
- **Load**: the closed model's users, and as think time the loop's measured time
  outside the request (``users / sent-rate - mean latency``, Little's law: the configured
  think time plus the generator's own time between a response and the next send),
  median over the scenario's phases; the open model's rate and arrival process.
- Scenarios (request shapes), strategies and their options, request timeout (deadline),
  agent interval, replications and seeds; measured windows as in the run (the same
  share of warm-up), so both sides' figures come from ``analysis.metrics`` alike.

A scaled twin (``--scale N``) gives N servers the same capacity mix (each measured
server repeated N / n times), and users or rate times N / n; the front end (with each
strategy's solved load terms) and think time stay per request (a balancer and
generator scaled out with the servers). Its phases are long enough for the agents'
reports to matter (``_auto_scale_requests``) unless ``scale_requests`` caps them.

Each compared cell carries the run's harness checks (generator, balancer, machine) that
warned or failed in its phases: the twin gives the generator and the balancer no CPU,
so a miss where they were short of it is the harness's; the summary lists the misses
where the harness held apart.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from lblab.analysis.stats import beyond, kendall_tau
from lblab.errors import ConfigError
from lblab.servers.cpulimit import quota_for
from lblab.simulator.config import EPOCH, ServerGroup, SimConfig
from lblab.simulator.service import JsonCost, ServiceModel, fit_cost_model
from lblab.simulator.workload import Arrivals, Cell, ClosedUsers, OpenArrivals
from lblab.verdicts import FAIL, WARN
from lblab.windows import Window

TWIN_DIR = "twin"
TWIN_JSON = "twin.json"
FIGURES = ("throughput_rps", "latency_mean_ms", "latency_p95_ms")
RANKED = {"throughput": "throughput_rps", "latency_mean": "latency_mean_ms"}
MISS = 0.15
"""A cell whose throughput error is above this (relative) misses the twin's target."""
TAU_TARGET = 0.8
TIE = 0.01
"""Strategies whose figures are within 1 % of each other tie in the rankings: an open
load gives every strategy the offered rate, and such differences are no order."""
HARNESS_CHECKS = ("generator", "balancer", "machine")
"""The run's checks (``lblab/verdicts.py``) that say the harness, which the twin does not
model, was short of CPU: a miss in such a cell is the harness's, not the simulator's."""
MAX_SAMPLES_PER_CELL = 5000
MIN_REQUESTS = 2000
MAX_SCALE = 100_000


# ------------------------------------------------------------------ service model


@dataclass(frozen=True, slots=True, eq=False)
class MeasuredService:
    """A server's own measured service times, resampled per request shape.

    ``samples[(package_bytes, work_bytes)]`` holds seconds; a shape without samples is
    priced by ``fit`` (the calibrated cost model) times a resampled measured ratio
    of service time to the fit's prediction, so its spread is the server's too.
    """

    fit: JsonCost
    samples: Mapping[Cell, tuple[float, ...]]
    ratios: tuple[float, ...]
    r2: float

    @property
    def mean_s(self) -> float:
        pooled = [s for values in self.samples.values() for s in values]
        return float(np.mean(pooled)) if pooled else self.fit.mean_s

    def shape_mean_s(self, work_bytes: int, package_bytes: int) -> float:
        """Mean seconds of one request shape: its samples', else the fit's times the
        mean measured ratio (what ``sample`` draws from, on average)."""
        measured = self.samples.get((package_bytes, work_bytes))
        if measured:
            return float(np.mean(measured))
        ratio = float(np.mean(self.ratios)) if self.ratios else 1.0
        return self.fit.predict(work_bytes, package_bytes) * ratio

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        measured = self.samples.get((package_bytes, work_bytes))
        if measured:
            return measured[int(rng.random() * len(measured))]
        ratio = self.ratios[int(rng.random() * len(self.ratios))] if self.ratios else 1.0
        return self.fit.sample(rng, work_bytes, package_bytes) * ratio

    def spec(self) -> str:
        return f"measured({len(self.samples)} shapes; otherwise {self.fit.spec()})"

    def describe(self) -> dict[str, Any]:
        return {
            "fit": self.fit.spec(),
            "fit_r2": round(self.r2, 4),
            "service_ms_mean": {
                f"{p}B+{w}B": round(1000.0 * float(np.mean(v)), 4)
                for (p, w), v in sorted(self.samples.items())
            },
            "samples": sum(len(v) for v in self.samples.values()),
        }


def fit_service(rows: pd.DataFrame, seed: int = 1) -> MeasuredService:
    """The service model of one server from its rows (``package_bytes``, ``work_bytes``,
    ``service_ms`` of successful requests)."""
    fit = fit_cost_model(rows["work_bytes"], rows["package_bytes"], rows["service_ms"])
    rng = np.random.default_rng(seed)
    samples: dict[Cell, tuple[float, ...]] = {}
    for (package, work), group in rows.groupby(["package_bytes", "work_bytes"], sort=True):
        seconds = group["service_ms"].to_numpy(dtype=float) / 1000.0
        if len(seconds) > MAX_SAMPLES_PER_CELL:
            seconds = rng.choice(seconds, MAX_SAMPLES_PER_CELL, replace=False)
        samples[(int(package), int(work))] = tuple(float(s) for s in seconds)
    predicted = (
        fit.model.a
        + fit.model.b * rows["work_bytes"].to_numpy(dtype=float)
        + fit.model.c * rows["package_bytes"].to_numpy(dtype=float)
    )
    ratio = rows["service_ms"].to_numpy(dtype=float) / 1000.0 / np.maximum(predicted, 1e-9)
    if len(ratio) > MAX_SAMPLES_PER_CELL:
        ratio = rng.choice(ratio, MAX_SAMPLES_PER_CELL, replace=False)
    return MeasuredService(fit.model, samples, tuple(float(r) for r in ratio), fit.r2)


# ------------------------------------------------------------------ the run, described


@dataclass(frozen=True, slots=True)
class TwinServer:
    id: str
    weight: float
    workers: int
    capacity: int | None
    cpu_quota: float | None

    @property
    def quota_period(self) -> float:
        """Seconds per quota period, the live server's own (``servers.cpulimit.quota_for``;
        a whole core's without a quota, where it is unused)."""
        return quota_for(self.cpu_quota or 1.0)[0] / 1e6


@dataclass(frozen=True, slots=True)
class TwinScenario:
    name: str
    cells: tuple[Cell, ...]
    closed: bool
    users: int = 0
    rate: float = 0.0
    poisson: bool = False


@dataclass(frozen=True, slots=True)
class Testbed:
    """What the twin copies from the run: servers, load, matrix, settings."""

    servers: tuple[TwinServer, ...]
    strategies: tuple[str, ...]
    strategy_options: Mapping[str, Mapping[str, str]]
    scenarios: tuple[TwinScenario, ...]
    replications: int
    seed: int
    deadline: float | None
    report_period: float
    warmup_fraction: float
    notes: tuple[str, ...]
    live: bool = True
    """Live servers do work outside their slot; a simulated run's servers do none."""


def _live_testbed(manifest: Mapping[str, Any]) -> Testbed:
    from lblab.loadtests.runconfig import build

    config = build(manifest["config"])
    facts = manifest.get("testbed", {}).get("servers", {})
    # The quotas the servers ran with: scaled to fit their CPUs (loadtests/isolation.py).
    running = (manifest.get("testbed", {}).get("cpu_layout") or {}).get("quotas") or {}
    servers = []
    for spec in config.servers:
        started = facts.get(spec.id, {})
        servers.append(
            TwinServer(
                id=spec.id,
                weight=float(config.weights.get(spec.id, 1.0)),
                workers=int(started.get("workers") or spec.workers or 1),
                capacity=started.get("max_inflight") or spec.max_inflight,
                cpu_quota=running.get(spec.id, spec.cpu_quota),
            )
        )
    scenarios = []
    for s in config.scenarios:
        load = config.loads[s.name]
        cells = tuple((c.package_bytes, c.work_bytes) for c in s.cells)
        if load.model == "trace":
            raise ConfigError(
                f"scenario {s.name}: the twin does not model trace phases; simulate the "
                f"trace itself: lblab simulate --scenario {s.name} (or trace = FILE)"
            )
        if load.model == "closed":
            scenarios.append(TwinScenario(s.name, cells, True, users=load.users))
        else:
            scenarios.append(
                TwinScenario(
                    s.name, cells, False, rate=load.rate, poisson=load.arrival == "poisson"
                )
            )
    notes = []
    if config.timeline:
        notes.append("the run's timeline events (kill, drain, add...) are not modelled")
    length = config.warmup + config.duration
    return Testbed(
        servers=tuple(servers),
        strategies=config.strategies,
        strategy_options=config.strategy_options,
        scenarios=tuple(scenarios),
        replications=config.replications,
        seed=config.seed,
        deadline=config.request_timeout,
        report_period=config.testbed.agent_interval,
        warmup_fraction=config.warmup / length if length > 0 else 0.0,
        notes=tuple(notes),
    )


def _simulated_testbed(manifest: Mapping[str, Any]) -> Testbed:
    configs = manifest.get("config")
    if not isinstance(configs, list) or not configs:
        raise ConfigError("the simulated run's manifest has no config list; re-run lblab simulate")
    first = configs[0]
    servers: list[TwinServer] = []
    for group in first["servers"]:
        for _ in range(int(group["count"])):
            servers.append(
                TwinServer(
                    id=f"s{len(servers) + 1}",
                    weight=float(group["weight"]),
                    workers=int(group["workers"]),
                    capacity=group.get("capacity"),
                    cpu_quota=None,
                )
            )
    scenarios: dict[str, TwinScenario] = {}
    options: dict[str, dict[str, str]] = {}
    for c in configs:
        options[c["strategy"]] = dict(c.get("strategy_options") or {})
        arrivals = c["arrivals"]
        closed = arrivals["model"] == "ClosedUsers"
        scenarios.setdefault(
            c["scenario"],
            TwinScenario(
                c["scenario"],
                tuple((int(p), int(w)) for p, w in c["cells"]),
                closed,
                users=int(arrivals.get("users", 0)),
                rate=float(arrivals.get("rate", 0.0)),
                poisson=bool(arrivals.get("poisson", False)),
            ),
        )
    return Testbed(
        servers=tuple(servers),
        strategies=tuple(dict.fromkeys(c["strategy"] for c in configs)),
        strategy_options=options,
        scenarios=tuple(scenarios.values()),
        replications=len({c["replication"] for c in configs}),
        # The first replication's seed (replications were numbered from 0, now from 1;
        # each one's seed is the first's plus its place in either numbering).
        seed=int(min(c["seed"] for c in configs)),
        deadline=first.get("deadline"),
        report_period=float(first["report_period"]),
        warmup_fraction=0.0,
        notes=(),
        live=False,
    )


# ------------------------------------------------------------------ measured figures


@dataclass(frozen=True)
class Measured:
    units: pd.DataFrame
    """One row per unit: the analysis's unit metrics plus ``front_ms``."""
    pooled: pd.DataFrame
    """strategy, scenario, the mean of each of FIGURES over replications and its 95 %
    interval (``<figure>_lo``, ``_hi``; NaN with one replication)."""
    rows: pd.DataFrame
    """Successful requests with the service columns (for fitting)."""
    servers: pd.DataFrame
    """One row per unit and server inside the window: ``ok_per_s``, ``slot_ms`` (mean
    service time), ``front_ms`` and ``cpu_percent`` (mean share of its CPU allowance)."""


def measure(run_dir: Path) -> Measured:
    """The run's figures by the report's own definitions (analysis.metrics)."""
    from lblab.analysis.load import KEY, open_results
    from lblab.analysis.metrics import REQUEST_COLUMNS, pool, unit_metrics

    results = open_results(run_dir)
    windows = results.windows()
    columns = list(
        dict.fromkeys([*REQUEST_COLUMNS, "package_bytes", "work_bytes", "service_ms", "queue_ms"])
    )
    requests = results.table("requests", columns)
    if requests.empty:
        raise ConfigError(f"{run_dir} has no measured requests; give a finished run")
    if "service_ms" not in requests.columns or requests["service_ms"].notna().sum() == 0:
        raise ConfigError(
            f"{run_dir}: the requests table has no service_ms (servers' own service times, "
            "recorded by lblab runs since the twin exists); re-run the experiment with this "
            "lblab to build its twin"
        )
    units = unit_metrics(requests, None, windows)
    ok = requests[requests["ok"].fillna(False).astype(bool) & requests["service_ms"].notna()]
    ok = ok.assign(front_ms=ok["latency_ms"] - ok["queue_ms"].fillna(0.0) - ok["service_ms"])
    front = ok.groupby(KEY, observed=True)["front_ms"].mean().reset_index()
    front["replication"] = front["replication"].astype(int)
    for col in ("run_id", "strategy", "scenario"):
        front[col] = front[col].astype(str)
    units = units.merge(front, on=KEY, how="left")
    servers = _per_server(results, ok, windows)
    long = pool(units, list(FIGURES))
    pooled = long.pivot_table(
        index=["strategy", "scenario"],
        columns="metric",
        values=["mean", "lo", "hi"],
        observed=True,
        dropna=False,
    )
    pooled.columns = [m if v == "mean" else f"{m}_{v}" for v, m in pooled.columns]
    return Measured(units=units, pooled=pooled.reset_index(), rows=ok, servers=servers)


def _per_server(results: Any, ok: pd.DataFrame, windows: Mapping[Any, Window]) -> pd.DataFrame:
    """Per unit and server: answers per second, slot time, front end and CPU share."""
    from lblab.analysis.load import KEY

    inside = ok[ok["window"].astype(str) == "inside"] if "window" in ok.columns else ok
    frame = (
        inside.groupby([*KEY, "server"], observed=True)
        .agg(
            ok=("service_ms", "size"), slot_ms=("service_ms", "mean"), front_ms=("front_ms", "mean")
        )
        .reset_index()
    )
    frame = frame[frame["ok"] > 0]
    seconds = [
        windows[(str(r.run_id), str(r.scenario), str(r.strategy), int(r.replication))].seconds
        if (str(r.run_id), str(r.scenario), str(r.strategy), int(r.replication)) in windows
        else math.nan
        for r in frame.itertuples()
    ]
    frame = frame.assign(ok_per_s=frame["ok"] / np.asarray(seconds, dtype=float))
    cpu = results.table("cpu", ["server", "cpu_percent"])
    if cpu.empty:
        return frame.assign(cpu_percent=math.nan)
    if "window" in cpu.columns:
        cpu = cpu[cpu["window"].astype(str) == "inside"]
    share = cpu.groupby([*KEY, "server"], observed=True)["cpu_percent"].mean().reset_index()
    for col in (*KEY, "server"):
        frame[col] = frame[col].astype(str)
        share[col] = share[col].astype(str)
    return frame.merge(share, on=[*KEY, "server"], how="left")


# ------------------------------------------------------------------ building the twin


U_MAX = 0.95
"""The front end's load term stops growing at this slot utilisation: a server busy
all the time measures u = 0.98-1.0, where u / (1 - u) would be all noise."""


@dataclass(frozen=True, slots=True)
class FrontEnd:
    """The time a request spends outside its server's slot (ms, round trip).

    ``client_ms`` whatever the load (the generator, the balancer, the links), plus, at a
    server whose quota did not bind, ``slope_ms * u / (1 - u)`` with ``u`` the share of
    time its slot was busy. The server's event loop receives the request and sends the
    answer in the process whose worker runs the slot, and waits for it (the GIL, the
    process's CPU) the more the busier the worker is: measured, the unthrottled s3's
    requests spent 6 ms outside its slot at u = 0.28 and 75-103 ms at u = 0.99 (lp+lr),
    1.5 ms at 0.19 and 4.6 ms at 0.67 (sp+sr). A throttled server's event loop waits out
    its stalls instead, which its CPU per answer under its quota prices. Fitted over the
    scenario's units (``_fit_front``); the twin solves for the u its own simulation of
    each strategy gives (``solve_fronts``).
    """

    client_ms: float
    slope_ms: float = 0.0

    def server_ms(self, u: float) -> float:
        u = min(max(u, 0.0), U_MAX)
        return self.slope_ms * u / (1.0 - u)


@dataclass(frozen=True, slots=True)
class ScenarioModel:
    """The per-scenario part of the model that is measured from the run."""

    front: FrontEnd
    think_ms: float
    requests: int
    demand_scale: Mapping[str, float]
    """Per server: its CPU demand per request over its slot time (``_demand_scale``)."""
    quota_binds: Mapping[str, bool]
    """Per server: whether its CPU quota was its limit in the scenario (``_quota_binds``)."""
    work: MeasuredService | None = None
    """The slot times, in this scenario, of the servers whose quota did not bind: the
    work of a request without the stalls a throttled server's own slot times include
    (``_work_model``). None when every quota bound (or none did)."""

    @property
    def work_servers(self) -> tuple[str, ...]:
        """The servers whose slot times ``work`` holds (none without it)."""
        if self.work is None:
            return ()
        return tuple(server for server, binds in self.quota_binds.items() if not binds)

    def service_of(self, server: str, own: MeasuredService) -> MeasuredService:
        """What the twin resamples for ``server`` (before ``demand_scale``): the
        scenario's unthrottled work where the server's quota bound, else its own times."""
        return self.work if self.quota_binds[server] and self.work is not None else own


def _median(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.median()) if len(values) else 0.0


def scenario_models(
    testbed: Testbed, measured: Measured, services: Mapping[str, MeasuredService]
) -> dict[str, ScenarioModel]:
    """Per scenario, the measured part of the model (``services``: each server's own
    service model, ``fit_service``)."""
    out = {}
    units = measured.units
    for s in testbed.scenarios:
        mine = units[units["scenario"] == s.name]
        if mine.empty:
            raise ConfigError(f"scenario {s.name}: the run has no measured requests for it")
        sent_rate = mine["throughput_rps"] * mine["requests"] / mine["ok"].clip(lower=1)
        think = 0.0
        if s.closed:
            cycle_ms = 1000.0 * s.users / sent_rate.where(sent_rate > 0)
            think = max(0.0, _median(cycle_ms - mine["latency_mean_ms"]))
        requests = _median(mine["requests"]) / max(1.0 - testbed.warmup_fraction, 1e-9)
        per_server = measured.servers[measured.servers["scenario"] == s.name]
        binds = {
            srv.id: testbed.live
            and _quota_binds(per_server[per_server["server"] == srv.id], srv.cpu_quota)
            for srv in testbed.servers
        }
        free = tuple(srv.id for srv in testbed.servers if not binds[srv.id])
        work = _work_model(measured.rows, s.name, free) if any(binds.values()) else None
        model = ScenarioModel(
            front=_fit_front(mine, per_server, binds) if testbed.live else _flat_front(mine),
            think_ms=think,
            requests=max(MIN_REQUESTS, round(requests)),
            demand_scale={},
            quota_binds=binds,
            work=work,
        )
        scales = {
            srv.id: _demand_scale(
                per_server[per_server["server"] == srv.id],
                srv.cpu_quota,
                _work_mean(
                    measured.rows, s.name, srv.id, model.service_of(srv.id, services[srv.id])
                ),
            )
            if binds[srv.id] and srv.cpu_quota is not None
            else 1.0
            for srv in testbed.servers
        }
        out[s.name] = replace(model, demand_scale=scales)
    return out


MIN_SERVER_ANSWERS = 10
"""A unit whose server answered fewer requests in the window tells nothing of its cost."""


def _flat_front(units: pd.DataFrame) -> FrontEnd:
    """A simulated run's front end: its fixed client and server delays, whatever the load."""
    return FrontEnd(max(0.0, _median(units["front_ms"])))


def utilisation(rows: pd.DataFrame) -> pd.Series:
    """Share of the window a server's slot was busy: answers per second x mean slot time."""
    return rows["ok_per_s"] * rows["slot_ms"] / 1000.0


def _fit_front(
    units: pd.DataFrame, per_server: pd.DataFrame, binds: Mapping[str, bool]
) -> FrontEnd:
    """``FrontEnd`` by least squares over the scenario's units of the servers whose quota
    did not bind (each unit and server one point: its requests' mean time outside the
    slot against its slot utilisation). Their front end only: a throttled server's own
    out-of-slot time is its stalls, which the quota model gives it (counting it here
    would charge it twice, and to every server). Without such servers, or without a
    spread of utilisations to fit a slope on, the median front end of all requests with
    no load term; a negative slope (noise) likewise; a negative intercept is held at 0."""
    free = per_server[
        ~per_server["server"].astype(str).map(binds).fillna(False).astype(bool)
        & (per_server["ok"] >= MIN_SERVER_ANSWERS)
    ]
    free = free[free["front_ms"].notna() & free["slot_ms"].notna()]
    if free.empty:
        return _flat_front(units)
    u = utilisation(free).clip(0.0, U_MAX).to_numpy(dtype=float)
    x = u / (1.0 - u)
    y = free["front_ms"].to_numpy(dtype=float)
    flat = FrontEnd(max(0.0, float(np.median(y))))
    if len(x) < 3 or np.ptp(x) < 0.1:
        return flat
    slope, intercept = np.polyfit(x, y, 1)
    if slope <= 0:
        return flat
    if intercept < 0:
        return FrontEnd(0.0, float(np.dot(x, y) / np.dot(x, x)))
    return FrontEnd(float(intercept), float(slope))


QUOTA_REACHED = 90.0
"""A server whose CPU reached this share (%) of its allowance in a unit hit its quota."""


def _quota_binds(rows: pd.DataFrame, quota: float | None) -> bool:
    """Whether a server's CPU quota (below one core) was its limit in the scenario: its
    CPU reached ``QUOTA_REACHED`` % of the allowance in at least one unit. Otherwise
    the machine's other processes held it below its quota (a busy shared machine), its
    measured slot times already are what it could do, and the twin uses them as they are."""
    if quota is None or quota >= 1 or rows.empty:
        return False
    return bool((rows["cpu_percent"] >= QUOTA_REACHED).any())


def _cpu_ms(rows: pd.DataFrame, quota: float) -> pd.Series:
    """CPU time per answered request (ms), in and out of the slot: the CPU the server
    used in the window (its share of its allowance times the allowance) over its answers."""
    return rows["cpu_percent"] / 100.0 * quota * 1000.0 / rows["ok_per_s"]


def _work_model(rows: pd.DataFrame, scenario: str, free: Sequence[str]) -> MeasuredService | None:
    """The slot times of the servers in ``free`` (whose quota did not bind) in a scenario.

    A throttled server's own slot times include the stalls when its period's budget ran
    out mid-request (in sp+sr 6 % of its slots last 3-10 ms, its median 0.5 ms); the
    twin's quota model stalls the requests again, so resampling them would stall twice
    and give the server a long tail it does not have at full speed. The same work on a
    server that was not throttled is the request's work without stalls; the scale to
    the throttled server's own CPU per answer (``_demand_scale``) then prices its
    framing and event loop. None without such a server's answers."""
    mine = rows[
        (rows["scenario"].astype(str) == scenario) & rows["server"].astype(str).isin(list(free))
    ]
    return fit_service(mine) if len(mine) >= 3 else None


def _work_mean(rows: pd.DataFrame, scenario: str, server: str, service: MeasuredService) -> float:
    """Mean (ms) of what the twin resamples for a server's answers in a scenario, over
    the request shapes that server answered there (all phases pooled)."""
    mine = rows[(rows["scenario"].astype(str) == scenario) & (rows["server"].astype(str) == server)]
    if mine.empty:
        return math.nan
    shapes = mine.groupby(["package_bytes", "work_bytes"], observed=True).size()
    total = sum(
        n * service.shape_mean_s(int(work), int(package)) for (package, work), n in shapes.items()
    )
    return 1000.0 * total / len(mine)


def _demand_scale(rows: pd.DataFrame, quota: float, work_ms: float) -> float:
    """CPU demand per request over the mean of the times the twin resamples for a server
    whose quota binds (``work_ms``, ``_work_mean``).

    Those times (the unthrottled servers' slots, ``_work_model``) miss the server's
    work outside the slot (frame decoding, the response, the event loop: the same
    process, the same CPU allowance). The twin gives each request ``sample * scale`` of
    CPU and lets ``simulator.quota`` apply the stalls: the median CPU per answer over
    the scenario's units where the server answered enough and its quota bound (below its
    quota it batches less and spends more per answer, which is not what caps it), over
    ``work_ms``. Without such units the quota itself (the slot time of a saturated
    server is its CPU time stretched by 1 / quota).
    """
    rows = rows[(rows["ok"] >= MIN_SERVER_ANSWERS) & rows["cpu_percent"].notna()]
    if (rows["cpu_percent"] >= QUOTA_REACHED).any():
        rows = rows[rows["cpu_percent"] >= QUOTA_REACHED]
    scale = _median(_cpu_ms(rows, quota)) / work_ms if not rows.empty else math.nan
    return scale if math.isfinite(scale) and scale > 0 else quota


@dataclass(frozen=True, slots=True, eq=False)
class ScaledService:
    """A measured service model whose times are multiplied by ``scale``."""

    base: MeasuredService
    scale: float

    @property
    def mean_s(self) -> float:
        return self.base.mean_s * self.scale

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.base.sample(rng, work_bytes, package_bytes) * self.scale

    def spec(self) -> str:
        return f"{self.base.spec()} x{self.scale:.3g}"


def _groups(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    total: int,
    model: ScenarioModel,
    server_ms: Mapping[str, float],
) -> tuple[ServerGroup, ...]:
    """``total`` servers with the run's capacity mix (each server repeated in turn), each
    request costing its server ``model.demand_scale`` times a measured slot time, under
    the server's CPU quota as a cgroup enforces it, and spending ``server_ms`` (round
    trip) between the balancer and its server (its event loop)."""
    n = len(testbed.servers)
    base, extra = divmod(total, n)
    groups = []
    for i, s in enumerate(testbed.servers):
        count = base + (1 if i < extra else 0)
        if count:
            groups.append(
                ServerGroup(
                    count=count,
                    # duck-typed like the others
                    service=cast(
                        ServiceModel,
                        ScaledService(
                            model.service_of(s.id, services[s.id]), model.demand_scale[s.id]
                        ),
                    ),
                    workers=s.workers,
                    weight=s.weight,
                    capacity=s.capacity,
                    cpu_quota=s.cpu_quota if model.quota_binds[s.id] else None,
                    quota_period=s.quota_period,
                    delay=server_ms.get(s.id, 0.0) / 2000.0,
                )
            )
    return tuple(groups)


def _arrivals(scenario: TwinScenario, model: ScenarioModel, factor: float) -> Arrivals:
    if scenario.closed:
        return ClosedUsers(
            users=max(1, round(scenario.users * factor)), think=model.think_ms / 1000.0
        )
    return OpenArrivals(rate=scenario.rate * factor, poisson=scenario.poisson)


def configs_for(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    servers: int,
    replications: int,
    max_requests: int | Mapping[str, int] | None,
    run_id: str,
    server_ms: Mapping[tuple[str, str], Mapping[str, float]],
    only: Sequence[tuple[str, str]] | None = None,
) -> list[SimConfig]:
    """One SimConfig per scenario x strategy x replication for ``servers`` servers
    (``only``: these (scenario, strategy) cells); ``server_ms[(scenario, strategy)]``
    gives each server's front-end load term (``solve_fronts``); ``max_requests`` caps a
    phase's requests, one cap or one per scenario."""
    factor = servers / len(testbed.servers)
    out = []
    for scenario in testbed.scenarios:
        model = models[scenario.name]
        requests = round(model.requests * factor)
        cap = max_requests.get(scenario.name) if isinstance(max_requests, Mapping) else max_requests
        if cap is not None:
            requests = min(requests, cap)
        for strategy in testbed.strategies:
            if only is not None and (scenario.name, strategy) not in only:
                continue
            groups = _groups(
                testbed, services, servers, model, server_ms.get((scenario.name, strategy), {})
            )
            for rep in range(replications):
                out.append(
                    SimConfig(
                        strategy=strategy,
                        strategy_options=tuple(
                            (str(k), str(v))
                            for k, v in testbed.strategy_options.get(strategy, {}).items()
                        ),
                        servers=groups,
                        requests=max(requests, 1),
                        arrivals=_arrivals(scenario, model, factor),
                        scenario=scenario.name,
                        cells=scenario.cells,
                        report_period=testbed.report_period,
                        client_delay=model.front.client_ms / 2000.0,
                        deadline=testbed.deadline,
                        seed=testbed.seed + rep,
                        replication=rep + 1,
                        run_id=run_id,
                    )
                )
    return out


FRONT_ROUNDS = 12
"""At most this many rounds of ``solve_fronts`` (each simulates one replication of the
cells not settled yet)."""
FRONT_SETTLED = 0.02
"""A load term is settled when the one its utilisation asks for is within 2 % of it
(or within ``FRONT_FLOOR_MS``)."""
FRONT_FLOOR_MS = 0.05


def solve_fronts(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    start: Mapping[tuple[str, str], float],
) -> dict[tuple[str, str], dict[str, float]]:
    """Per (scenario, strategy): each server's front-end load term (ms, round trip) at
    the slot utilisation the twin's own simulation of that strategy gives it.

    The load term slows the strategy's server, which lowers its utilisation: a fixed
    point ``x = g(x)`` with ``g`` falling. Each round simulates the first replication of
    every cell not settled, reads each server's utilisation and moves its load term a
    step towards what that asks for: half the way at first, and half as far again each
    time the residual changes sign (a steep ``g`` would make plain steps oscillate).
    It starts from ``start[(scenario, server)]``, the server's median utilisation in the
    scenario's live units (the same start for every strategy). Servers whose quota bound
    get none (``FrontEnd``), nor does a scenario without a slope.
    """
    from lblab.simulator.run import simulate

    n = len(testbed.servers)
    solved: dict[tuple[str, str], dict[str, float]] = {}
    todo = []
    for scenario in testbed.scenarios:
        model = models[scenario.name]
        for strategy in testbed.strategies:
            key = (scenario.name, strategy)
            solved[key] = {
                s.id: model.front.server_ms(start.get((scenario.name, s.id), 0.0))
                for s in testbed.servers
                if not model.quota_binds[s.id]
            }
            if model.front.slope_ms > 0 and solved[key]:
                todo.append(key)
    step = {(key, sid): 0.5 for key in todo for sid in solved[key]}
    last_sign: dict[tuple[tuple[str, str], str], float] = {}
    for _ in range(FRONT_ROUNDS):
        if not todo:
            break
        configs = configs_for(testbed, services, models, n, 1, None, "solve", solved, todo)
        todo = []
        for cfg in configs:
            key = (cfg.scenario, cfg.strategy)
            front = models[cfg.scenario].front
            result = simulate(cfg)
            busy = _slot_utilisation(result, testbed.warmup_fraction)
            # the n-server twin's servers are the run's, in order (``_groups``)
            ids = {name: testbed.servers[i].id for i, name in enumerate(result.servers)}
            busy = {ids[name]: u for name, u in busy.items()}
            settled = True
            for sid, old in solved[key].items():
                residual = front.server_ms(busy.get(sid, 0.0)) - old
                if abs(residual) <= max(FRONT_SETTLED * old, FRONT_FLOOR_MS):
                    continue
                settled = False
                sign = math.copysign(1.0, residual)
                if last_sign.get((key, sid), sign) != sign:
                    step[(key, sid)] /= 2.0
                last_sign[(key, sid)] = sign
                solved[key][sid] = old + step[(key, sid)] * residual
            if not settled:
                todo.append(key)
    return solved


def _sim_window(result: Any, warmup_fraction: float) -> Window:
    """A simulated phase's measured window, as the live runner cuts it
    (``lblab/windows.py``): the first ``warmup_fraction`` of the sends is warm-up, the
    window ends at the last send."""
    last_send = pc.max(result.requests["t_sent"]).as_py()
    return Window(EPOCH + warmup_fraction * (last_send - EPOCH), last_send)


def _slot_utilisation(result: Any, warmup_fraction: float) -> dict[str, float]:
    """Per server of a simulated phase: the share of the measured window its slot was
    busy (``utilisation``, over the answers sent in the window)."""
    window = _sim_window(result, warmup_fraction)
    q = result.requests.select(["t_sent", "ok", "server", "service_ms"]).to_pandas()
    inside = q[(q["t_sent"] >= window.start) & q["ok"]]
    seconds = max(window.seconds, 1e-9)
    return {
        str(server): float(group["service_ms"].sum()) / 1000.0 / seconds
        for server, group in inside.groupby("server", observed=True)
    }


def _simulate_all(
    configs: Sequence[SimConfig], warmup_fraction: float, out: Path, progress: Any = None
) -> dict[tuple[str, str], float]:
    """Run every config and write it with measured windows as the live runner does
    (``_sim_window``). Returns each (scenario, strategy)'s shortest window in simulated
    seconds."""
    from lblab.simulator.output import write_run
    from lblab.simulator.run import simulate

    results, windows = [], []
    shortest: dict[tuple[str, str], float] = {}
    for i, cfg in enumerate(configs, 1):
        if progress is not None:
            progress(
                f"twin:   {cfg.scenario} {cfg.strategy} ({i}/{len(configs)}, "
                f"{cfg.requests:,} requests)"
            )
        r = simulate(cfg)
        window = _sim_window(r, warmup_fraction)
        windows.append(window)
        results.append(r)
        key = (cfg.scenario, cfg.strategy)
        shortest[key] = min(shortest.get(key, math.inf), window.seconds)
    write_run(out, results, extra={"twin": True}, windows=windows)
    return shortest


SCALE_AGENT_PERIODS = 10
"""An automatic scaled phase is long enough for its window to hold this many agent
periods at the 3-server twin's fastest throughput times the scale."""
MIN_SCALE_REQUESTS = 20_000
MAX_SCALE_REQUESTS = 2_000_000
"""Bounds of an automatic scaled phase (``--scale-requests`` sets one cap instead)."""


def _auto_scale_requests(
    testbed: Testbed, simulated: pd.DataFrame, factor: float
) -> dict[str, int]:
    """Per scenario: requests for a scaled phase whose window spans
    ``SCALE_AGENT_PERIODS`` agent periods, so that strategies following the agents'
    CPU reports get them (a fixed count lasts ever less simulated time as servers are
    added: 60 000 sp+sr requests are 0.15 s at 1000 servers). Within
    ``MIN_SCALE_REQUESTS``..``MAX_SCALE_REQUESTS``; never longer than the live phase
    (``configs_for`` caps at the run's own length times the scale)."""
    out = {}
    seconds = SCALE_AGENT_PERIODS * testbed.report_period / max(1.0 - testbed.warmup_fraction, 0.05)
    for scenario in testbed.scenarios:
        rates = simulated.loc[simulated["scenario"] == scenario.name, "throughput_rps"]
        rate = float(pd.to_numeric(rates, errors="coerce").max()) if len(rates) else math.nan
        need = rate * factor * seconds if math.isfinite(rate) else MAX_SCALE_REQUESTS
        out[scenario.name] = int(min(max(math.ceil(need), MIN_SCALE_REQUESTS), MAX_SCALE_REQUESTS))
    return out


MIN_AGENT_REPORTS = 8
"""A scaled phase whose window holds fewer agent periods than this gives a strategy that
follows the agents' CPU reports (``uses_agent_reports``: dwrr and kin) too few to follow:
at 1000 servers the window of a phase of 60 000 sp+sr requests lasts 0.15 simulated s."""


def _too_short(
    windows: Mapping[tuple[str, str], float], report_period: float
) -> dict[str, dict[str, Any]]:
    """Per scenario: the strategies that follow agent reports and had fewer than
    ``MIN_AGENT_REPORTS`` agent periods in their window, with the window's length."""
    from lblab.balancer.strategies.registry import strategy_class

    out: dict[str, dict[str, Any]] = {}
    for (scenario, strategy), seconds in windows.items():
        periods = seconds / report_period if report_period > 0 else math.inf
        if periods < MIN_AGENT_REPORTS and strategy_class(strategy).uses_agent_reports:
            entry = out.setdefault(scenario, {"window_s": seconds, "strategies": []})
            entry["window_s"] = round(min(entry["window_s"], seconds), 4)
            entry["agent_periods"] = round(entry["window_s"] / report_period, 2)
            entry["strategies"].append(strategy)
    return out


# ------------------------------------------------------------------ comparing


def _rel_error(simulated: float, measured: float) -> float | None:
    if not (math.isfinite(simulated) and math.isfinite(measured)) or measured == 0:
        return None
    return (simulated - measured) / measured


def _number(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return round(v, 4) if math.isfinite(v) else None


def _figures(
    pooled: pd.DataFrame, strategy: str, scenario: str, suffix: str = ""
) -> dict[str, float | None]:
    row = pooled[(pooled["strategy"] == strategy) & (pooled["scenario"] == scenario)]
    return {
        f: _number(row[f + suffix].iloc[0]) if len(row) and f + suffix in row else None
        for f in FIGURES
    }


def _inside(value: float | None, lo: float | None, hi: float | None) -> bool | None:
    if value is None or lo is None or hi is None:
        return None
    return lo <= value <= hi


def _ranking(
    pooled: pd.DataFrame, scenario: str, strategies: Sequence[str], metric: str
) -> list[float]:
    return [
        _figures(pooled, s, scenario)[metric] or float("nan") for s in strategies
    ]  # nan: a strategy without figures ranks nowhere (tau skips it below)


def _order(strategies: Sequence[str], values: Sequence[float], higher: bool) -> list[str]:
    pairs = [(v, s) for s, v in zip(strategies, values, strict=True) if math.isfinite(v)]
    return [s for v, s in sorted(pairs, key=lambda p: -p[0] if higher else p[0])]


def _tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    keep = [i for i in range(len(a)) if math.isfinite(a[i]) and math.isfinite(b[i])]
    tau = kendall_tau([a[i] for i in keep], [b[i] for i in keep], TIE)
    return None if tau is None else round(tau, 4)


def measure_simulated(run_dir: Path) -> pd.DataFrame:
    """Pooled FIGURES of a twin's simulated run, by the same definitions."""
    return measure(run_dir).pooled


def compare(
    testbed: Testbed, measured: pd.DataFrame, simulated: pd.DataFrame
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per cell: both figures and the relative errors; per scenario: rankings and tau."""
    cells = []
    for scenario in testbed.scenarios:
        for strategy in testbed.strategies:
            m = _figures(measured, strategy, scenario.name)
            lo = _figures(measured, strategy, scenario.name, "_lo")
            hi = _figures(measured, strategy, scenario.name, "_hi")
            s = _figures(simulated, strategy, scenario.name)
            cells.append(
                {
                    "strategy": strategy,
                    "scenario": scenario.name,
                    "measured": m,
                    "measured_ci95": {f: [lo[f], hi[f]] for f in FIGURES},
                    "simulated": s,
                    "error": {
                        f: _number(_rel_error(s[f] or math.nan, m[f] or math.nan)) for f in FIGURES
                    },
                    "inside_measured_ci": {f: _inside(s[f], lo[f], hi[f]) for f in FIGURES},
                }
            )
    ranks: dict[str, Any] = {}
    for scenario in testbed.scenarios:
        ranks[scenario.name] = {}
        for name, metric in RANKED.items():
            higher = metric == "throughput_rps"
            mv = _ranking(measured, scenario.name, testbed.strategies, metric)
            sv = _ranking(simulated, scenario.name, testbed.strategies, metric)
            resolved, contradicted = _resolved_pairs(
                measured, scenario.name, testbed.strategies, metric, sv
            )
            ranks[scenario.name][name] = {
                "measured": _order(testbed.strategies, mv, higher),
                "simulated": _order(testbed.strategies, sv, higher),
                "tau": _tau(mv, sv),
                "resolved_pairs": resolved,
                "contradicted_pairs": contradicted,
            }
    return cells, ranks


def _resolved_pairs(
    measured: pd.DataFrame,
    scenario: str,
    strategies: Sequence[str],
    metric: str,
    simulated: Sequence[float],
) -> tuple[int | None, list[str]]:
    """The pairs of strategies the run tells apart (their measured 95 % intervals do not
    overlap), and those of them the twin orders the other way round, as "a > b" in the
    measured order (a simulated tie within ``TIE`` is no contradiction). None without
    intervals (one replication). Tau counts every pair alike, a near-tie the run cannot
    resolve as much as a clear gap; this says whether the twin contradicts a measured
    difference."""
    figures = [_figures(measured, st, scenario) for st in strategies]
    lows = [_figures(measured, st, scenario, "_lo")[metric] for st in strategies]
    highs = [_figures(measured, st, scenario, "_hi")[metric] for st in strategies]
    if any(v is None for v in lows + highs):
        return None, []
    lo, hi = cast(list[float], lows), cast(list[float], highs)
    resolved, contradicted = 0, []
    for i in range(len(strategies)):
        for j in range(len(strategies)):
            if figures[i][metric] is None or figures[j][metric] is None or not lo[i] > hi[j]:
                continue
            resolved += 1  # i measured above j, intervals apart
            if beyond(simulated[i], simulated[j], TIE) < 0:
                contradicted.append(f"{strategies[i]} > {strategies[j]}")
    return resolved, contradicted


def _scale_ranks(
    testbed: Testbed, base: pd.DataFrame, measured: pd.DataFrame, scaled: pd.DataFrame
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scenario in testbed.scenarios:
        out[scenario.name] = {}
        for name, metric in RANKED.items():
            higher = metric == "throughput_rps"
            sv = _ranking(scaled, scenario.name, testbed.strategies, metric)
            out[scenario.name][name] = {
                "simulated": _order(testbed.strategies, sv, higher),
                "tau_vs_twin": _tau(_ranking(base, scenario.name, testbed.strategies, metric), sv),
                "tau_vs_measured": _tau(
                    _ranking(measured, scenario.name, testbed.strategies, metric), sv
                ),
            }
    return out


def _median_halfwidth(cells: list[dict[str, Any]]) -> float | None:
    """Median over cells of the measured throughput's 95 % half-width, relative: how
    finely the run itself can tell two figures apart."""
    widths = [
        (hi - lo) / 2 / c["measured"]["throughput_rps"]
        for c in cells
        for lo, hi in [c["measured_ci95"]["throughput_rps"]]
        if lo is not None and hi is not None and c["measured"]["throughput_rps"]
    ]
    return round(float(np.median(widths)), 4) if widths else None


def harness_flags(manifest: Mapping[str, Any]) -> dict[tuple[str, str], list[str]]:
    """Per (strategy, scenario): the harness checks that warned or failed in any of its
    phases, as "machine fail" (sorted, each once); empty where the harness held."""
    flags: dict[tuple[str, str], set[str]] = {}
    for phase in manifest.get("phases") or []:
        key = (str(phase.get("strategy")), str(phase.get("scenario")))
        found = flags.setdefault(key, set())
        for check in phase.get("verdicts") or []:
            if check.get("name") in HARNESS_CHECKS and check.get("level") in (WARN, FAIL):
                found.add(f"{check['name']} {check['level']}")
    return {key: sorted(found) for key, found in flags.items()}


def _misses(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells whose throughput error is unknown or above ``MISS``."""
    return [
        c
        for c in cells
        if c["error"]["throughput_rps"] is None or abs(c["error"]["throughput_rps"]) > MISS
    ]


def _names(cells: list[dict[str, Any]]) -> list[str]:
    return [f"{c['strategy']} / {c['scenario']}" for c in cells]


def _summary(cells: list[dict[str, Any]], ranks: dict[str, Any]) -> dict[str, Any]:
    errors = [c["error"]["throughput_rps"] for c in cells]
    finite = [abs(e) for e in errors if e is not None]
    misses = _misses(cells)
    return {
        "max_abs_throughput_error": max(finite) if finite else None,
        "throughput_misses": _names(misses),
        "throughput_misses_outside_ci": _names(
            [c for c in misses if c["inside_measured_ci"]["throughput_rps"] is False]
        ),
        "throughput_misses_where_the_harness_held": _names(
            [c for c in misses if not c.get("harness_checks")]
        ),
        "median_measured_ci_halfwidth": _median_halfwidth(cells),
        "tau_below_target": [
            name
            for name, r in ranks.items()
            if r["throughput"]["tau"] is not None and r["throughput"]["tau"] < TAU_TARGET
        ],
        "tau_undefined": [name for name, r in ranks.items() if r["throughput"]["tau"] is None],
        "resolved_pairs_contradicted": {
            name: r["throughput"]["contradicted_pairs"]
            for name, r in ranks.items()
            if r["throughput"]["contradicted_pairs"]
        },
        "miss_threshold": MISS,
        "tau_target": TAU_TARGET,
    }


# ------------------------------------------------------------------ the whole twin


def make_twin(
    run_dir: str | Path,
    scales: Sequence[int] = (),
    *,
    scale_replications: int = 1,
    scale_requests: int | None = None,
    echo: Any = None,
) -> Path:
    """Build the twin of ``run_dir``; returns ``run_dir/twin/twin.json``.

    ``lblab run --twin`` calls this at the end of a run. Raises ``ConfigError`` (one
    line for the user) when the run cannot be twinned.
    """
    from lblab.analysis.load import open_run

    say = echo or (lambda _msg: None)
    for n in scales:  # before the run is read: a bad count is refused at once
        if not 1 <= n <= MAX_SCALE:
            raise ConfigError(f"--scale {n}: give a server count from 1 to {MAX_SCALE}")
    run_dir = Path(run_dir)
    run = open_run(run_dir)
    testbed = _simulated_testbed(run.manifest) if run.simulated else _live_testbed(run.manifest)
    measured = measure(run_dir)
    services = {}
    for s in testbed.servers:
        rows = measured.rows[measured.rows["server"].astype(str) == s.id]
        if len(rows) < 3:
            raise ConfigError(
                f"server {s.id} answered {len(rows)} requests in the run: too few to fit its "
                "service model; give a run where every server served (e.g. a longer one)"
            )
        services[s.id] = fit_service(rows)
    models = scenario_models(testbed, measured, services)
    out = run_dir / TWIN_DIR
    if out.is_dir():
        shutil.rmtree(out)  # rebuilt whole: no part of an earlier twin may linger in it
    t0 = time.perf_counter()
    n = len(testbed.servers)
    live_busy = (
        measured.servers.assign(u=utilisation(measured.servers))
        .groupby(["scenario", "server"], observed=True)["u"]
        .median()
    )
    say("twin: solving each strategy's front end for the load it puts on its servers")
    fronts = solve_fronts(
        testbed,
        services,
        models,
        {(str(sc), str(sv)): float(u) for (sc, sv), u in live_busy.items()},
    )
    base_configs = configs_for(
        testbed, services, models, n, testbed.replications, None, f"twin-{run.run_id}", fronts
    )
    say(f"twin: simulating {len(base_configs)} phases on {n} servers")
    _simulate_all(base_configs, testbed.warmup_fraction, out)
    simulated = measure_simulated(out)
    cells, ranks = compare(testbed, measured.pooled, simulated)
    flags = harness_flags(run.manifest)
    for cell in cells:
        cell["harness_checks"] = flags.get((cell["strategy"], cell["scenario"]), [])
    scaled_out = []
    for total in scales:
        caps = (
            scale_requests
            if scale_requests is not None
            else _auto_scale_requests(testbed, simulated, total / n)
        )
        configs = configs_for(
            testbed,
            services,
            models,
            total,
            scale_replications,
            caps,
            f"twin-{run.run_id}-x{total}",
            fronts,
        )
        say(
            f"twin: simulating {len(configs)} phases on {total} servers "
            f"({sum(c.requests for c in configs):,} requests)"
        )
        folder = out / f"scale-{total}"
        windows = _simulate_all(configs, testbed.warmup_fraction, folder, say)
        pooled = measure_simulated(folder)
        short = _too_short(windows, testbed.report_period)
        for scenario, entry in short.items():
            say(
                f"twin: at {total} servers a {scenario} window lasted {entry['window_s']:g} "
                f"simulated s ({entry['agent_periods']:g} agent periods): too short for "
                f"{', '.join(entry['strategies'])}, which follow the agents' reports; "
                "raise --scale-requests"
            )
        scaled_out.append(
            {
                "servers": total,
                "dir": str(folder.relative_to(run_dir)),
                "replications": scale_replications,
                "requests_per_phase": {c.scenario: c.requests for c in configs},
                "too_short_for_agent_reports": short,
                "figures": [
                    {"strategy": st, "scenario": sc.name, **_figures(pooled, st, sc.name)}
                    for sc in testbed.scenarios
                    for st in testbed.strategies
                ],
                "rank": _scale_ranks(testbed, simulated, measured.pooled, pooled),
            }
        )
    report = {
        "run": str(run_dir),
        "run_id": run.run_id,
        "simulated_input": run.simulated,
        "created": time.time(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "model": {
            "servers": [
                {
                    "id": s.id,
                    "weight": s.weight,
                    "workers": s.workers,
                    "capacity": s.capacity,
                    "cpu_quota": s.cpu_quota,
                    "quota_period_s": s.quota_period if s.cpu_quota else None,
                    **services[s.id].describe(),
                }
                for s in testbed.servers
            ],
            "scenarios": {
                name: {
                    "front": {
                        "client_ms": round(m.front.client_ms, 3),
                        "slope_ms": round(m.front.slope_ms, 3),
                        "server_ms": {
                            strategy: {k: round(v, 3) for k, v in fronts[(name, strategy)].items()}
                            for strategy in testbed.strategies
                        },
                    },
                    "think_ms": round(m.think_ms, 3),
                    "demand_scale": {k: round(v, 3) for k, v in m.demand_scale.items()},
                    "quota_binds": dict(m.quota_binds),
                    "quota_bound_work_from": list(m.work_servers),
                    "requests_per_phase": m.requests,
                }
                for name, m in models.items()
            },
            "deadline_s": testbed.deadline,
            "replications": testbed.replications,
            "notes": list(testbed.notes),
        },
        "cells": cells,
        "rank": ranks,
        "scales": scaled_out,
        "summary": _summary(cells, ranks),
    }
    path = out / TWIN_JSON
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
