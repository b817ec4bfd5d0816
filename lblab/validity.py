"""Validity checks of a phase: can its numbers be trusted, and if not, why.

A ranking measured while the load generator, the balancer or the machine was the
bottleneck ranks the harness, not the algorithms. Every phase of a run is checked
against the facts the runner measured (``PhaseFacts``); each check gives ``pass``,
``warn`` or ``fail`` with its figure and a sentence saying what it means, or ``n/a``
when the run could not measure it (an external testbed, a closed load model, one
loader host). The runner writes them to the manifest (``phases[].verdicts``), the report
shows them first, and no winner is declared from a phase that failed a check.

==============  ===========================================================  =========
check           what is measured (inside the phase's measured window)        warns at
==============  ===========================================================  =========
generator       CPU of each Locust process, share of one core                > 85 %
open model      achieved / offered send rate; send lag p99 vs the            < 95 %;
                inter-arrival interval of one generator (wrk2's idea)        > 10 %
balancer        its CPU per request and as a share of one core               > 50 %
machine         generator + balancer + agents vs the harness's own CPUs      > 90 %
                (isolated), or what the servers' quotas leave
accounting      requests a writer counted without a row (fail if any);       > 1 %
                "no backend" answers and client-deadline errors (harness,
                not algorithm)
coverage        CPU samples per second per server vs the agent's rate;       < 80 %
                picks vs requests                                            < 90 %
steady state    ok req/s of the window's first vs second half                > 10 %
warm-up         ok req/s of the window's first fifth vs the rest             > 10 %
                (both only beyond 3 sigma of counting noise; the
                steady state also beyond 3 standard errors of the window's
                own swings, from its ten slices' successive differences)
clocks          each Locust worker's clock vs the runner's (distributed runs,    > 10 %
                ``loadtests.clocks``): |offset| + its bound, vs the p50 latency
disturbance     CPU on the servers' CPUs (all the run's CPUs without         > 5 %
                isolation) used outside the experiment's processes, plus the
                hypervisor's steal there (``loadtests.probe``), vs those CPUs
capacity        the open or trace model's offered rate vs what the servers   > 90 %
                can serve (the preflight's ``simulator/capacity.py``)
==============  ===========================================================  =========

A check ``fail``s where the figure is far past its line (generator > 95 % of a core,
balancer > 90 %, machine > 110 %, unaccounted rows, a halves gap > 30 %, a worker's clock
surely off by more than the p50 latency, beyond its bound, outside work and steal > 15 %
of the servers' CPUs, a load past what the servers can serve), because the phase's
numbers then measure the harness, another machine than the one described, or an
overload.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lblab.windows import INSIDE, WINDOW_COLUMN, Window, cpu_per_request_us

PASS, WARN, FAIL, NA = "pass", "warn", "fail", "n/a"
LEVELS = (PASS, WARN, FAIL, NA)
_RANK = {NA: 0, PASS: 1, WARN: 2, FAIL: 3}

GENERATOR_WARN, GENERATOR_FAIL = 0.85, 0.95
BALANCER_WARN, BALANCER_FAIL = 0.50, 0.90
MACHINE_WARN, MACHINE_FAIL = 0.90, 1.10
OFFERED_WARN = 0.95
LAG_WARN = 0.10
HARNESS_ERRORS_WARN = 0.01
COVERAGE_WARN = 0.80
PICKS_WARN = 0.90
HALVES_WARN, HALVES_FAIL = 0.10, 0.30
STEADY_BINS = 10
WARMUP_WARN = 0.10
CLOCK_WARN, CLOCK_FAIL = 0.10, 1.0
"""A worker's clock may differ from the runner's by this share of the phase's p50 latency."""
CLOCK_WARN_MS = 5.0
"""The line when the phase has no latency to compare with."""
DISTURBANCE_WARN, DISTURBANCE_FAIL = 0.05, 0.15
"""Share of the servers' CPUs that work outside the experiment and steal took. At their
quotas the servers lose capacity about one for one with it (isolation scales the quotas
to fill their CPUs), so 5 % is the run's equivalence margin (``run.equivalence``): a
change that could make two equal strategies look different. 15 %, three margins, is a
smaller testbed than the one described."""


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    level: str
    figure: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(slots=True, kw_only=True)
class PhaseFacts:
    """What the runner measured of one phase (None: not measured)."""

    window_s: float
    requests_in_window: int
    ok_in_window: int
    unaccounted: int = 0
    failures_by_origin: Mapping[str, int] = field(default_factory=dict)
    no_backend: int = 0
    """REJECTED answers the balancer gave itself (no backend eligible)."""
    ok_per_s_halves: tuple[float, float] | None = None
    ok_per_s_bins: tuple[float, ...] | None = None
    """The window's ok req/s in ``STEADY_BINS`` equal slices (the steady-state check's
    own noise)."""
    ok_per_s_first_fifth: tuple[float, float] | None = None
    """(first fifth, the rest) of the window."""
    generator_cores: list[float] | None = None
    """CPU of each Locust process, in cores."""
    balancer_cores: float | None = None
    agents_cores: float | None = None
    cores_left: float | None = None
    """The cores the harness may use without taking them from the servers: its own CPUs
    under isolation (``loadtests/isolation.py``), else the machine's cores less the
    servers' CPU quotas."""
    samples_per_s: Mapping[str, float] | None = None
    expected_samples_per_s: float | None = None
    picks_in_window: int | None = None
    offered_rps: float | None = None
    """Open model: the rate asked for (all generators together)."""
    sent_per_s: float | None = None
    send_lag_p99_ms: float | None = None
    interarrival_ms: float | None = None
    """Open model: the interval between two sends of one generator process."""
    loaders: int = 1
    clocks: Mapping[str, Any] | None = None
    """What the master measured of its workers' clocks (``loadtests.clocks``):
    ``workers`` (per worker ``loader``, ``offset_ms``, ``bound_ms``) and ``asked``."""
    latency_p50_ms: float | None = None
    server_cpus: Sequence[int] | None = None
    """The CPUs the servers ran on: their own under isolation, else every CPU the run
    used, shared with the harness (None: not measured, e.g. an external testbed)."""
    servers_isolated: bool = False
    outside_cores: float | None = None
    """CPU used on ``server_cpus`` by processes outside the experiment (the runner and
    its descendants): those CPUs' busy time less the experiment's processes that may run
    there (``loadtests.probe``), in cores."""
    steal_cores: float | None = None
    """Time the hypervisor gave to others while ``server_cpus`` wanted to run, in cores."""
    harness_cpus: Sequence[int] | None = None
    """Isolated runs: the harness's own CPUs (Locust, the balancer, the agents)."""
    harness_outside_cores: float | None = None
    """What ``outside_cores`` is for the servers' CPUs, on ``harness_cpus``."""
    harness_steal_cores: float | None = None
    offered_capacity: tuple[float, float] | None = None
    """Open and trace models: (requests/s offered, requests/s the servers can serve), by
    the preflight's estimate (None: a closed model, or no bound known)."""


def evaluate(f: PhaseFacts) -> list[Check]:
    """Every check of one phase, in the table's order."""
    return [
        _generator(f),
        _open_model(f),
        _balancer(f),
        _machine(f),
        _accounting(f),
        _coverage(f),
        _halves(f),
        _warmup(f),
        _clocks(f),
        _disturbance(f),
        _capacity(f),
    ]


def judge(facts: PhaseFacts) -> dict[str, Any]:
    """A phase's manifest entries: ``verdicts`` (one dict per check) and ``verdict``."""
    checks = [c.to_dict() for c in evaluate(facts)]
    return {"verdicts": checks, "verdict": worst(c["level"] for c in checks)}


def worst(levels: Iterable[str]) -> str:
    """The phase's verdict: its worst check (n/a when nothing could be checked)."""
    return max(levels, key=_RANK.__getitem__, default=NA)


def _judged(name: str, level: str, figure: str, fine: str, problem: str) -> Check:
    """A check whose sentence says what passing means, or what the problem is."""
    return Check(name, level, figure, fine if level == PASS else problem)


def _level(value: float, warn: float, fail: float | None = None) -> str:
    if fail is not None and value > fail:
        return FAIL
    return WARN if value > warn else PASS


def _generator(f: PhaseFacts) -> Check:
    if not f.generator_cores:
        return Check("generator", NA, "-", "the Locust processes' CPU was not measured")
    top = max(f.generator_cores)
    level = _level(top, GENERATOR_WARN, GENERATOR_FAIL)
    return _judged(
        "generator",
        level,
        f"{top:.0%} of a core (busiest Locust process)",
        "the load generator kept up",
        "a Locust process was near a full core: latencies include its own queueing and "
        "the load it offered fell short; use more --locust-workers or fewer users per process",
    )


def _open_model(f: PhaseFacts) -> Check:
    if f.offered_rps is None:
        return Check("open model", NA, "-", "closed load model: no offered rate to keep")
    achieved = (f.sent_per_s or 0.0) / f.offered_rps if f.offered_rps > 0 else 0.0
    lag = f.send_lag_p99_ms
    lag_share = lag / f.interarrival_ms if lag is not None and f.interarrival_ms else 0.0
    level = WARN if achieved < OFFERED_WARN or lag_share > LAG_WARN else PASS
    figure = f"sent {achieved:.0%} of the offered rate, send lag p99 " + (
        "-" if lag is None else f"{lag:.1f} ms ({lag_share:.0%} of the interval)"
    )
    return _judged(
        "open model",
        level,
        figure,
        "requests left on schedule",
        "the generator sent late or short of the rate asked for: the load was lighter "
        "and burstier than configured; add generator processes or lower the rate",
    )


def _balancer(f: PhaseFacts) -> Check:
    if f.balancer_cores is None:
        return Check("balancer", NA, "-", "the balancer's CPU was not measured (external)")
    per_req = cpu_per_request_us(f.balancer_cores, f.window_s, f.requests_in_window)
    level = _level(f.balancer_cores, BALANCER_WARN, BALANCER_FAIL)
    return _judged(
        "balancer",
        level,
        f"{f.balancer_cores:.0%} of a core, {per_req:.0f} us/request",
        "the balancer had CPU to spare",
        "the balancer used most of a core: its own queueing adds to every latency and "
        "can cap throughput for every algorithm alike",
    )


def _machine(f: PhaseFacts) -> Check:
    parts = [f.balancer_cores, f.agents_cores, *(f.generator_cores or [])]
    if f.cores_left is None or f.generator_cores is None or f.balancer_cores is None:
        return Check("machine", NA, "-", "the harness's CPU was not measured (external)")
    used = sum(p or 0.0 for p in parts)
    if f.cores_left <= 0:
        return Check(
            "machine",
            FAIL,
            f"{used:.2f} cores used, none left after the servers' quotas",
            "the servers' CPU quotas take every core: the harness competes with the servers",
        )
    share = used / f.cores_left
    level = _level(share, MACHINE_WARN, MACHINE_FAIL)
    return _judged(
        "machine",
        level,
        f"{used:.2f} of the {f.cores_left:.2f} cores the harness has ({share:.0%})",
        "the harness fit in the cores the servers leave",
        "generator, balancer and agents need more CPU than the servers' quotas leave: "
        "they take it from the servers, so capacity is not what the quotas say",
    )


def _accounting(f: PhaseFacts) -> Check:
    origins = ", ".join(f"{k} {v}" for k, v in sorted(f.failures_by_origin.items()) if v)
    figure = f"unaccounted {f.unaccounted}; failures by origin: {origins or 'none'}"
    if f.unaccounted:
        return Check(
            "accounting",
            FAIL,
            figure,
            "requests were counted without a row: the tables are incomplete",
        )
    harness = f.no_backend + f.failures_by_origin.get("client", 0)
    share = harness / f.requests_in_window if f.requests_in_window else 0.0
    if share > HARNESS_ERRORS_WARN:
        return Check(
            "accounting",
            WARN,
            figure,
            f"{share:.1%} of the requests failed in the harness (no backend available, or "
            "the client's own deadline), not at a server: the failure rate is the harness's",
        )
    return Check("accounting", PASS, figure, "every request has a row and a named origin")


def _coverage(f: PhaseFacts) -> Check:
    problems, figures = [], []
    if f.samples_per_s and f.expected_samples_per_s:
        low = min(f.samples_per_s.values()) / f.expected_samples_per_s
        figures.append(f"CPU samples {low:.0%} of the agent rate (sparsest server)")
        if low < COVERAGE_WARN:
            problems.append("CPU samples are missing: the CPU means rest on too few samples")
    if f.picks_in_window is not None and f.requests_in_window:
        ratio = f.picks_in_window / f.requests_in_window
        figures.append(f"picks {ratio:.2f} per request")
        if ratio < PICKS_WARN:
            problems.append("picks are missing: the per-server split is incomplete")
    if not figures:
        return Check("coverage", NA, "-", "no CPU samples or picks were collected")
    return Check(
        "coverage",
        WARN if problems else PASS,
        "; ".join(figures),
        "; ".join(problems) or "samples and picks cover the window",
    )


def _gap(pair: tuple[float, float] | None) -> float | None:
    if pair is None:
        return None
    a, b = pair
    return abs(a - b) / max(a, b) if max(a, b) > 0 else 0.0


def _noise(a: float, b: float, seconds_a: float, seconds_b: float) -> bool:
    """Are rates ``a`` and ``b`` (measured over these spans) within counting noise, 3
    sigma of Poisson counts? Then a short phase does not warn on chance alone."""
    if seconds_a <= 0 or seconds_b <= 0:
        return True
    return abs(a - b) <= 3.0 * math.sqrt(a / seconds_a + b / seconds_b)


def _batch_noise(a: float, b: float, bins: Sequence[float] | None) -> bool:
    """Are the halves' rates within 3 standard errors of the window's own fluctuation?
    The error comes from the slices' successive differences (von Neumann's estimate of
    their variance, which a smooth drift across the window hardly raises): a closed loop
    over unequal servers, or random picks, swings more than Poisson counts do, and a
    3 s window of ``r`` warned on that alone (issue 47, item 5)."""
    if not bins or len(bins) < 4:
        return False
    diffs = np.diff(np.asarray(bins, dtype=float))
    variance = float(np.sum(diffs**2)) / (2 * (len(bins) - 1))
    per_half = len(bins) // 2
    return abs(a - b) <= 3.0 * math.sqrt(variance * 2 / per_half)


def _halves(f: PhaseFacts) -> Check:
    gap = _gap(f.ok_per_s_halves)
    if gap is None or f.ok_per_s_halves is None:
        return Check("steady state", NA, "-", "too few requests to compare the halves")
    a, b = f.ok_per_s_halves
    half = f.window_s / 2
    within = _noise(a, b, half, half) or _batch_noise(a, b, f.ok_per_s_bins)
    level = PASS if within else _level(gap, HALVES_WARN, HALVES_FAIL)
    return _judged(
        "steady state",
        level,
        f"{a:.0f} vs {b:.0f} ok req/s ({gap:.0%} apart)",
        "throughput held steady through the window",
        "throughput changed within the window: the system was not in a steady state "
        "(a longer phase or warm-up, or a fault during it)",
    )


def _warmup(f: PhaseFacts) -> Check:
    gap = _gap(f.ok_per_s_first_fifth)
    if gap is None or f.ok_per_s_first_fifth is None:
        return Check("warm-up", NA, "-", "too few requests to judge the warm-up")
    a, b = f.ok_per_s_first_fifth
    noise = _noise(a, b, f.window_s / 5, f.window_s * 4 / 5)
    level = WARN if gap > WARMUP_WARN and not noise else PASS
    return _judged(
        "warm-up",
        level,
        f"first fifth {a:.0f} vs rest {b:.0f} ok req/s",
        "the window started after the start-up transient",
        "the window's start differs from the rest: the warm-up was too short",
    )


def _clocks(f: PhaseFacts) -> Check:
    if f.loaders <= 1:
        return Check("clocks", NA, "one loader host", "one clock: no offset to measure")
    workers = (f.clocks or {}).get("workers") or {}
    if not workers:
        return Check(
            "clocks",
            WARN,
            f"{f.loaders} loader hosts, offset not measured",
            "send times come from several clocks and the master measured none of them: "
            "sync them (NTP) before comparing rows",
        )
    # How far a worker's clock may be from the runner's (which cuts the window).
    name, w = max(workers.items(), key=lambda kv: abs(kv[1]["offset_ms"]) + kv[1]["bound_ms"])
    skew = abs(w["offset_ms"]) + w["bound_ms"]
    p50 = f.latency_p50_ms
    line = CLOCK_WARN * p50 if p50 else CLOCK_WARN_MS
    # Fail only on evidence: the offset is surely past the p50 (even at the near end of
    # its bound). An exchange that is merely imprecise warns: it cannot show a bad clock.
    surely = abs(w["offset_ms"]) - w["bound_ms"]
    level = FAIL if p50 and surely > CLOCK_FAIL * p50 else WARN if skew > line else PASS
    missing = int((f.clocks or {}).get("asked") or 0) - len(workers)
    figure = (
        f"worst worker ({w.get('loader', name)}) {w['offset_ms']:+.1f} +- {w['bound_ms']:.1f} ms "
        f"vs the runner's clock; p50 latency {p50:.1f} ms"
        if p50
        else f"worst worker ({w.get('loader', name)}) {w['offset_ms']:+.1f} "
        f"+- {w['bound_ms']:.1f} ms vs the runner's clock"
    )
    if missing > 0:
        figure += f"; {missing} worker(s) did not answer"
        level = worst([level, WARN])
    imprecise = w["bound_ms"] > abs(w["offset_ms"])
    why = (
        f"a loader's send times may be off by up to {skew:.1f} ms, more than "
        f"{line:.1f} ms ({'10 % of the p50 latency' if p50 else 'no latency to compare'})"
        + (
            ": the exchange itself was that imprecise (a busy master or link), measure on a "
            "quieter testbed"
            if imprecise
            else ": sync the loader hosts' clocks (NTP, chrony)"
        )
        + "; rows from different hosts are windowed and ordered only to that precision"
    )
    if missing > 0 and level == WARN and skew <= line:
        why = "some workers did not answer the clock exchange: their offset is unknown"
    return _judged("clocks", level, figure, "the loader hosts' clocks agree", why)


def _disturbance(f: PhaseFacts) -> Check:
    if f.outside_cores is None or f.steal_cores is None or not f.server_cpus:
        return Check(
            "disturbance",
            NA,
            "-",
            "CPU taken from outside the experiment was not measured (external testbed, or "
            "no /proc/stat)",
        )
    share = _taken(f.outside_cores, f.steal_cores, f.server_cpus)
    where = "the servers' CPUs" if f.servers_isolated else "the CPUs servers and harness shared"
    figure = (
        f"outside {f.outside_cores:.2f} cores, steal {f.steal_cores:.2f} cores on {where} "
        f"{','.join(map(str, f.server_cpus))} ({share:.0%} of them)"
    )
    problems = []
    if share > DISTURBANCE_WARN:
        problems.append(
            f"processes outside the experiment and the hypervisor (steal) took {share:.0%} "
            "of the CPUs the servers ran on: the servers had less CPU than their quotas "
            "say, and not alike for every strategy"
        )
    harness = 0.0
    if (
        f.servers_isolated
        and f.harness_cpus
        and f.harness_outside_cores is not None
        and f.harness_steal_cores is not None
    ):
        # A load generator or balancer slowed by others offers less load and adds
        # latency: a closed-loop phase then measures the machine, not the strategy.
        harness = _taken(f.harness_outside_cores, f.harness_steal_cores, f.harness_cpus)
        figure += (
            f"; outside {f.harness_outside_cores:.2f}, steal {f.harness_steal_cores:.2f} on "
            f"the harness's {','.join(map(str, f.harness_cpus))} ({harness:.0%})"
        )
        if harness > DISTURBANCE_WARN:
            problems.append(
                f"processes outside the experiment and the hypervisor took {harness:.0%} of "
                "the harness's CPUs: Locust and the balancer "
                "ran slower than the load asks, so the servers got less load and the "
                "answers more latency than the strategy alone explains"
            )
    return _judged(
        "disturbance",
        _level(max(share, harness), DISTURBANCE_WARN, DISTURBANCE_FAIL),
        figure,
        "nothing outside the experiment took CPU from the servers or the harness",
        "; ".join(problems)
        + "; stop other work on the machine (steal: other guests of the host), or rerun",
    )


CAPACITY_WARN, CAPACITY_FAIL = 0.90, 1.0


def _capacity(f: PhaseFacts) -> Check:
    if f.offered_capacity is None or not f.offered_capacity[1] > 0:
        return Check(
            "capacity", NA, "-", "closed load model (or no bound known): nothing offered to weigh"
        )
    offered, total = f.offered_capacity
    use = offered / total
    return _judged(
        "capacity",
        _level(use, CAPACITY_WARN, CAPACITY_FAIL),
        f"offered {offered:,.0f} req/s, {use:.0%} of the {total:,.0f} the servers can serve",
        "the servers can serve the load",
        "the load is past (or at the edge of) what the servers can serve: requests queue "
        "until they time out or are REJECTED, and the phase measures the overload more "
        "than the balancing; lower the rate or add servers",
    )


def _taken(outside: float, steal: float, cpus: Sequence[int]) -> float:
    """The share of ``cpus`` others took. Below zero ``outside`` is the counters'
    imprecision (the probe's limits), not a gift of CPU."""
    return (max(outside, 0.0) + steal) / len(cpus)


def _median(column: pa.ChunkedArray) -> float | None:
    values = column.drop_null().to_numpy(zero_copy_only=False)
    return float(np.median(values)) if len(values) else None


def _rate(ok_t: np.ndarray, lo: float, hi: float) -> float:
    return float(((ok_t >= lo) & (ok_t < hi)).sum() / (hi - lo)) if hi > lo else 0.0


def request_facts(table: pa.Table, window: Window) -> dict[str, Any]:
    """What the checks need from a phase's request rows (``window`` column present)."""
    inside = table.filter(pc.equal(table[WINDOW_COLUMN], INSIDE))
    t = inside["t_sent"].to_numpy(zero_copy_only=False)
    ok = inside["ok"].to_numpy(zero_copy_only=False).astype(bool)
    ok_t = t[ok]
    start, end = window.start, window.end
    mid, fifth = (start + end) / 2, start + (end - start) / 5
    failed = inside.filter(pc.invert(inside["ok"]))
    origins = pc.value_counts(failed["error_origin"].fill_null("unknown")).to_pylist()
    no_backend = pc.sum(
        pc.and_(
            pc.equal(failed["error_kind"], "rejected"), pc.equal(failed["error_origin"], "balancer")
        )
    ).as_py()
    facts: dict[str, Any] = {
        "requests_in_window": len(t),
        "ok_in_window": len(ok_t),
        "failures_by_origin": {o["values"]: o["counts"] for o in origins},
        "no_backend": no_backend or 0,
        # No request in the window: nothing to compare (the checks say n/a).
        "ok_per_s_halves": [_rate(ok_t, start, mid), _rate(ok_t, mid, end)] if len(t) else None,
        "ok_per_s_bins": [
            _rate(
                ok_t,
                start + (end - start) * i / STEADY_BINS,
                start + (end - start) * (i + 1) / STEADY_BINS,
            )
            for i in range(STEADY_BINS)
        ]
        if len(t)
        else None,
        "ok_per_s_first_fifth": [_rate(ok_t, start, fifth), _rate(ok_t, fifth, end)]
        if len(t)
        else None,
        "sent_per_s": len(t) / window.seconds if window.seconds > 0 else None,
        "latency_p50_ms": _median(inside["latency_ms"]),
    }
    if "send_lag_ms" in inside.column_names:
        lag = inside["send_lag_ms"].drop_null().to_numpy(zero_copy_only=False)
        facts["send_lag_p99_ms"] = float(np.quantile(lag, 0.99)) if len(lag) else None
    return facts | instrument_facts(inside)


INSTRUMENT_FACTS = (
    "harness_p50_ms", "harness_p99_ms", "outside_slot_p50_ms", "outside_slot_p99_ms",
    "send_lag_p50_ms",
)  # fmt: skip
"""What the instrument adds to a phase's requests (``instrument_facts``)."""


def instrument_facts(rows: pa.Table) -> dict[str, float | None]:
    """What the harness added to the successful requests of ``rows``, and what the servers
    spent outside their work slots, at p50 and p99 (ms; None without the columns):

    - ``harness``: ``latency_ms - server_ms``, the time a request spent outside its server
      (client, Locust, balancer, loopback; in the open model a late send's lag too, since
      its latency counts from the due time);
    - ``outside_slot``: ``server_ms - queue_ms - service_ms``, the server's own time
      around its work (its event loop, decoding, writing; a CPU quota's throttling);
    - ``send_lag_p50``: how late the open model's sends left (the p99 is ``send_lag_p99_ms``).

    A simulated server has no time outside its slot, so there ``outside_slot`` is 0 and
    ``harness`` the network delays the simulation was given."""
    out: dict[str, float | None] = dict.fromkeys(INSTRUMENT_FACTS)
    names = set(rows.column_names)
    if "send_lag_ms" in names:
        lag = rows["send_lag_ms"].drop_null().to_numpy(zero_copy_only=False)
        out["send_lag_p50_ms"] = float(np.quantile(lag, 0.5)) if len(lag) else None
    if not {"server_ms", "queue_ms", "service_ms"} <= names:
        return out
    ok = rows.filter(pc.and_(rows["ok"], pc.is_valid(rows["server_ms"])))
    if not len(ok):
        return out
    server = ok["server_ms"].to_numpy(zero_copy_only=False)
    latency = ok["latency_ms"].to_numpy(zero_copy_only=False)
    work = (ok["queue_ms"].fill_null(0.0).to_numpy(zero_copy_only=False)
            + ok["service_ms"].fill_null(0.0).to_numpy(zero_copy_only=False))  # fmt: skip
    for name, values in (("harness", latency - server), ("outside_slot", server - work)):
        p50, p99 = np.quantile(values, [0.5, 0.99])
        out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = float(p50), float(p99)
    return out


def phase_facts(window: Window, measured: Mapping[str, Any], **harness: Any) -> PhaseFacts:
    """The facts of a phase from its ``request_facts`` (as kept in the manifest) and
    what else its driver measured (``harness``: the ``PhaseFacts`` fields by name)."""
    halves, fifth = measured.get("ok_per_s_halves"), measured.get("ok_per_s_first_fifth")
    return PhaseFacts(
        window_s=window.seconds,
        requests_in_window=int(measured.get("requests_in_window") or 0),
        ok_in_window=int(measured.get("ok_in_window") or 0),
        failures_by_origin=measured.get("failures_by_origin") or {},
        no_backend=int(measured.get("no_backend") or 0),
        ok_per_s_halves=(halves[0], halves[1]) if halves else None,
        ok_per_s_bins=tuple(measured["ok_per_s_bins"]) if measured.get("ok_per_s_bins") else None,
        ok_per_s_first_fifth=(fifth[0], fifth[1]) if fifth else None,
        sent_per_s=measured.get("sent_per_s"),
        send_lag_p99_ms=measured.get("send_lag_p99_ms"),
        latency_p50_ms=measured.get("latency_p50_ms"),
        **harness,
    )


def summary_lines(phases: Iterable[tuple[str, Iterable[Check]]]) -> list[str]:
    """Plain words for the terminal and the report: which phases not to trust, and why;
    ``phases`` are (label, its checks)."""
    return [
        f"{label}: {c.name} {c.level}: {c.figure}. {c.why[:1].upper()}{c.why[1:]}."
        for label, checks in phases
        for c in checks
        if c.level in (WARN, FAIL)
    ]
