"""The part of the twin measured from the run, per scenario: front end, think time, quotas.

What is fitted here are measured quantities (time outside the slot, CPU per answer),
never the figures the twin is compared on:

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
  own simulation gives the server (``solve.solve_fronts``). A throttled server's event
  loop waits out its stalls instead, which its CPU per answer under its quota prices.
- **Think time** of the closed model: the loop's measured time outside the request
  (``users / sent-rate - mean latency``, Little's law: the configured think time plus
  the generator's own time between a response and the next send), median over the
  scenario's phases. The users, or the open model's rate, are the testbed's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lblab.errors import ConfigError
from lblab.simulator.twin.measure import Measured, utilisation
from lblab.simulator.twin.measured_service import MeasuredService, fit_service
from lblab.simulator.twin.testbed import Testbed

MIN_REQUESTS = 2000


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
    each strategy gives (``solve.solve_fronts``).
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
    """Requests a phase of the scenario sent in the run (median, warm-up included): the
    count of a phase the twin builds itself (``solve.configs_for``)."""
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
