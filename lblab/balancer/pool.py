"""The backend pool: in-flight accounting, health and counters around one strategy.

Sans-I/O and shared by the balancer node and the simulator: the driver calls

    view = pool.pick(request, now)            # None: nothing eligible -> REJECTED
    pool.dispatch(view, request, now)         # the request was sent
    pool.complete(view, request, outcome, now)  # exactly once per dispatch, any outcome

plus ``report`` (load reports), ``set_state`` (connection up/down, draining), ``tick``
(timers), ``add``/``remove`` and ``set_strategy``. ``now`` is monotonic seconds.

Theory of operation:

- In-flight accounting: ``dispatch`` files the pair ``(request_id, backend id)`` as
  outstanding and increments ``inflight``; ``complete`` removes it and decrements. A
  second ``complete`` for the same pair, or one without a dispatch, raises
  ``LocalProtocolError`` (a driver bug that would otherwise leak or go negative).
- Availability is derived, never set twice: the driver's view of the connection (UP,
  DOWN, DRAINING) combined with passive ejection gives ``BackendView.state``: DOWN or
  DRAINING if the driver says so, else EJECTED while an ejection lasts, else UP. Every
  change of any backend's state calls ``strategy.on_pool_change``, as do add, remove,
  set_strategy and each slow-start step (weights change).
- Failure accounting: only an outcome the backend is responsible for
  (``Outcome.backend_fault``: timeout, connection lost or refused, an error it flagged
  as its own failure) counts toward ejection. Any answer the backend gave that is not
  its fault (REJECTED, an APPLICATION_ERROR about the request) proves it alive and
  resets its run of consecutive failures. REJECTED changes nothing else: not weight,
  not availability. It means "at my limit, safe to retry elsewhere": the driver
  replays the request, load-aware strategies already see the backend's in-flight
  count, and a cool-down of the balancer's own would layer a load-shedding policy on
  every algorithm, bending the comparison the harness exists for.
- Success-rate ejection (off by default; ``HealthConfig.success_rate_threshold``):
  every outcome counts in the backend's ``SuccessWindow``, a success unless it is a
  backend fault (the same split as above: REJECTED proves the backend alive), and a
  rate below the threshold over at least ``success_rate_min_requests`` outcomes ejects
  it like a failure run, counted in ``success_rate_ejections`` as well. Back from it,
  the backend is on probation: its first outcome decides (a fault ejects it again at
  once). Each ejection empties the window.
- Panic (Envoy's panic threshold): while fewer than ``panic_threshold`` of the
  connected backends are un-ejected, ejections are ignored and requests are balanced
  over every connected backend. Ejection timers and backoff keep running; ``panic``
  says whether it is in force.
- Health policy (ejection backoff, slow start, panic) is in ``balancer/health.py``.
- Latency: ``last_latency_ms`` and ``latency_ewma_ms`` (time EWMA, ``tau`` =
  ``ewma_tau_s``) are updated from successful outcomes only; failures are often fast
  (an instant REJECTED) and would make a failing backend look attractive.
- A backend removed with requests in flight: their completions still balance the
  bookkeeping of the removed view, but no strategy hook runs for it.
- Counters per backend id (``BackendCounters``): picks (and those made in panic), errors,
  faults, ejections and ties
  (picks where the strategy reported a tie on load), and the probes a probing strategy
  cost: sent, answered, timed out and failed (an ERROR, a malformed answer, the
  connection lost); sent = answered + timed out + failed + those still out.
- Probes (``Strategy.uses_probes``): the driver asks ``probe_targets`` after each pick,
  counts each probe it sends (``probe_sent``) and hands back each answer
  (``probe_answer``, to the strategy's ``on_probe``) or loss (``probe_lost``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final

from mypy_extensions import mypyc_attr

from lblab.config import check_weight
from lblab.errors import ConfigError, LocalProtocolError
from lblab.loadreport import LoadReport, ProbeAnswer

from .health import (
    HealthConfig,
    SuccessWindow,
    ejection_duration,
    slow_start_factor,
    slow_start_fast,
)
from .strategies.base import BackendView, Health, Outcome, RequestView, Strategy, eligible
from .strategies.ewma import decay

__all__ = [
    "COUNTER_NAMES",
    "BackendCounters",
    "BackendSpec",
    "HealthConfig",
    "Pool",
]


def _counter(help_text: str) -> Any:
    """A counter field; its help text is what ``/metrics`` says of it."""
    return field(default=0, metadata={"help": help_text})


@dataclass(slots=True)
class BackendCounters:
    """Per-backend counters. Each field is one ``lblab_balancer_<name>_total`` family of
    ``/metrics`` (``admin.metrics_text`` walks the fields), so none can be left out."""

    picks: int = _counter("Times the strategy picked the backend.")
    errors: int = _counter("Failed outcomes of any kind (timeouts, errors, connection loss).")
    faults: int = _counter(
        "Failed outcomes the backend is responsible for (they count toward ejection)."
    )
    ejections: int = _counter("Passive ejections.")
    success_rate_ejections: int = _counter(
        "Passive ejections for a success rate below the threshold (counted in ejections too)."
    )
    outlier_ejections: int = _counter(
        "Passive ejections for a success rate below the backends' mean less "
        "success_rate_stdev_factor standard deviations (counted in ejections too)."
    )
    ties: int = _counter("Picks where candidates tied on load.")
    panic_picks: int = _counter(
        "Picks made while the pool was in panic (ejection ignored: too few un-ejected)."
    )
    probes_sent: int = _counter("Probes sent (prequal).")
    probes_answered: int = _counter("Probes answered.")
    probes_timed_out: int = _counter("Probes given up unanswered after their timeout.")
    probes_failed: int = _counter(
        "Probes answered with an error or garbage, or lost with the connection."
    )


COUNTER_NAMES: Final = tuple(f.name for f in fields(BackendCounters))
COUNTER_HELP: Final = {f.name: str(f.metadata["help"]) for f in fields(BackendCounters)}


@dataclass(frozen=True, slots=True)
class BackendSpec:
    id: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.id:
            raise ConfigError("backend: the id is empty; give each backend a name like s1")
        if not isinstance(self.weight, int | float):
            raise ConfigError(f"backend {self.id}: weight {self.weight!r} is not a number")
        check_weight(self.weight, f"backend {self.id}")


@dataclass(slots=True)
class _Health:
    """Per-backend health facts the pool combines into ``BackendView.state``."""

    told: Health = Health.UP
    """What the driver last said: UP, DOWN or DRAINING."""
    ejected_until: float | None = None
    ejections: int = 0
    """Earlier ejections (the ``n`` of ``base * 2**n``)."""
    back_at: float | None = None
    """When the backend last became available again (for the backoff reset)."""
    slow_since: float | None = None
    slow_answers: int = 0
    """Successful answers since it came, while in slow start (``slow_start_fast``)."""
    slow_sum_ms: float = 0.0
    """Their latencies' sum."""
    ewma_at: float = 0.0
    window: SuccessWindow | None = None
    """Outcomes over the success-rate window (None while success-rate ejection is off)."""
    probation: bool = False
    """Back from a success-rate ejection: its first outcome decides."""


@mypyc_attr(allow_interpreted_subclasses=True)
class Pool:
    def __init__(
        self,
        specs: Iterable[BackendSpec],
        strategy: Strategy,
        health: HealthConfig | None = None,
        now: float = 0.0,
    ) -> None:
        self.health = health if health is not None else HealthConfig()
        self.strategy = strategy
        self.views: list[BackendView] = []
        self.counters: dict[str, BackendCounters] = {}
        self._by_id: dict[str, BackendView] = {}
        self._health: dict[str, _Health] = {}
        self._outstanding: dict[tuple[int, str], BackendView] = {}
        self._ejected: dict[str, float] = {}
        """Backend id -> end of its current ejection."""
        self._slow: set[str] = set()
        self.panic = False
        """Ejections are ignored: too few connected backends are un-ejected."""
        self._slow_stepped = -math.inf
        self._next_tick = math.inf
        self._tallies: dict[str, list[int]] = {}
        """Backend id -> [successes, outcomes] in the current interval of the statistical
        success-rate ejection (``_outliers``)."""
        self._interval_start = now
        for spec in specs:
            self._insert(spec)
        strategy.on_pool_change(self.views, now)

    # -- lookup ----------------------------------------------------------------------

    def get(self, backend_id: str) -> BackendView:
        try:
            return self._by_id[backend_id]
        except KeyError:
            known = ", ".join(self._by_id) or "none"
            raise ConfigError(f"no backend {backend_id!r} in the pool (known: {known})") from None

    def __contains__(self, backend_id: object) -> bool:
        return backend_id in self._by_id

    @property
    def outstanding(self) -> int:
        """Dispatches not yet completed, over all backends (including removed ones)."""
        return len(self._outstanding)

    # -- the request path ------------------------------------------------------------

    def pick(self, request: RequestView, now: float) -> BackendView | None:
        """The strategy's choice for ``request``, or None when no backend is eligible."""
        if now >= self._next_tick:
            self.tick(now)
        strategy = self.strategy
        ties_before = strategy.ties
        view = strategy.pick(self.views, request, now)
        if view is None:
            return None
        if self._by_id.get(view.id) is not view or not eligible(view, request):
            raise LocalProtocolError(
                f"strategy {strategy.name!r} picked {view.id} ({view.state}), which is not "
                "eligible for this request: a bug in the strategy"
            )
        counters = self.counters[view.id]
        counters.picks += 1
        if self.panic:
            counters.panic_picks += 1
        if strategy.ties != ties_before:
            counters.ties += 1
        return view

    def dispatch(self, view: BackendView, request: RequestView, now: float) -> None:
        key = (request.request_id, view.id)
        if key in self._outstanding:
            raise LocalProtocolError(
                f"request {request.request_id} is already in flight on {view.id}"
            )
        self._outstanding[key] = view
        view.inflight += 1
        if view.lease_remaining is not None and view.lease_remaining > 0:
            view.lease_remaining -= 1
        if self._by_id.get(view.id) is view:
            self.strategy.on_dispatch(view, request, now)

    def complete(
        self, view: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        """Account one outcome of a dispatch; exactly once per dispatch."""
        key = (request.request_id, view.id)
        outstanding = self._outstanding
        if outstanding.get(key) is not view:  # not .pop(key, None): generic when compiled
            raise LocalProtocolError(
                f"request {request.request_id} on {view.id} completed without a matching "
                "dispatch (completed twice?)"
            )
        del outstanding[key]
        view.inflight -= 1
        view.completed += 1
        if self._by_id.get(view.id) is not view:
            return  # removed from the pool while in flight: bookkeeping only
        record = self._health[view.id]
        ejected = False
        fast = False
        if outcome.ok:
            view.consecutive_failures = 0
            self._observe_latency(view, record, outcome.latency_ms, now)
            if self.health.slow_start_fast_after and view.id in self._slow:
                fast = self._slow_answer(view, record, outcome.latency_ms)
            if record.back_at is not None and now - record.back_at >= self.health.eject_max_s:
                record.ejections = 0
                record.back_at = None
        elif outcome.backend_fault:
            view.consecutive_failures += 1
            counters = self.counters[view.id]
            counters.errors += 1
            counters.faults += 1
            after = self.health.eject_after
            if after and view.consecutive_failures >= after and record.ejected_until is None:
                self._eject(view, record, now)
                ejected = True
        else:  # an answer that is not the backend's fault: it is alive
            view.consecutive_failures = 0
            self.counters[view.id].errors += 1
        health = self.health
        if health.success_rate_threshold > 0.0 and not ejected:
            ejected = self._success_rate(view, record, outcome.ok or not outcome.backend_fault, now)
        if health.success_rate_stdev_factor > 0.0:
            success = outcome.ok or not outcome.backend_fault
            ejected = self._tally(view, record, success, now) or ejected
        self.strategy.on_complete(view, request, outcome, now)
        if ejected or fast:
            self.strategy.on_pool_change(self.views, now)

    def _slow_answer(self, view: BackendView, record: _Health, latency_ms: float) -> bool:
        """Count a success of a backend in slow start; end its slow start if that makes
        it as fast as its peers (``health.slow_start_fast``). True if it ended."""
        record.slow_answers += 1
        record.slow_sum_ms += latency_ms
        answers = record.slow_answers
        if answers < self.health.slow_start_fast_after:
            return False
        slow = self._slow
        peers = [
            v.latency_ewma_ms
            for v in self.views
            if v.state is Health.UP and v.latency_ewma_ms is not None and v.id not in slow
        ]
        if not slow_start_fast(self.health, answers, record.slow_sum_ms / answers, peers):
            return False
        slow.discard(view.id)
        view.slow_start = 1.0
        return True

    def _success_rate(self, view: BackendView, record: _Health, success: bool, now: float) -> bool:
        """Count one outcome toward success-rate ejection (``balancer/health.py``); True
        if it ejected the backend. Outcomes while it is ejected do not count."""
        if record.ejected_until is not None:
            return False
        health = self.health
        if record.probation:
            record.probation = False
            if success:
                return False
        else:
            window = record.window
            if window is None:
                window = record.window = SuccessWindow(health.success_rate_window_s, now)
            window.record(success, now)
            if not window.trips(health.success_rate_min_requests, health.success_rate_threshold):
                return False
        record.probation = True
        self.counters[view.id].success_rate_ejections += 1
        self._eject(view, record, now)
        return True

    def _tally(self, view: BackendView, record: _Health, success: bool, now: float) -> bool:
        """Count one outcome toward the statistical success-rate ejection (not while the
        backend is ejected), and end the interval once it has lasted; True if that
        ejected any backend."""
        if record.ejected_until is None:
            tally = self._tallies.get(view.id)
            if tally is None:
                tally = self._tallies[view.id] = [0, 0]
            tally[0] += int(success)
            tally[1] += 1
        if now - self._interval_start < self.health.success_rate_window_s:
            return False
        return self._outliers(now)

    def _outliers(self, now: float) -> bool:
        """The end of an interval of Envoy's statistical success-rate ejection
        (``balancer/health.py``): over the backends still in the pool, un-ejected, with
        ``success_rate_min_requests`` outcomes in it, if there are
        ``success_rate_minimum_hosts`` of them, eject each whose success rate is below
        their mean less ``success_rate_stdev_factor`` population standard deviations
        (Envoy's ``successRateEjectionThreshold``). A new interval starts. True if it
        ejected any."""
        health = self.health
        tallies, self._tallies, self._interval_start = self._tallies, {}, now
        rates: dict[str, float] = {}
        for backend_id, (successes, outcomes) in tallies.items():
            record = self._health.get(backend_id)
            if (
                record is not None
                and backend_id in self._by_id
                and record.ejected_until is None
                and outcomes >= health.success_rate_min_requests
            ):
                rates[backend_id] = successes / outcomes
        if len(rates) < health.success_rate_minimum_hosts:
            return False
        mean = sum(rates.values()) / len(rates)
        spread = math.sqrt(sum((rate - mean) ** 2 for rate in rates.values()) / len(rates))
        floor = mean - health.success_rate_stdev_factor * spread
        ejected = False
        for backend_id, rate in rates.items():
            if rate < floor:
                self.counters[backend_id].outlier_ejections += 1
                self._eject(self._by_id[backend_id], self._health[backend_id], now)
                ejected = True
        return ejected

    def _observe_latency(
        self, view: BackendView, record: _Health, latency_ms: float, now: float
    ) -> None:
        view.last_latency_ms = latency_ms
        if view.latency_ewma_ms is None:
            view.latency_ewma_ms = latency_ms
        else:
            w = decay(now - record.ewma_at, self.health.ewma_tau_s)
            view.latency_ewma_ms = w * view.latency_ewma_ms + (1.0 - w) * latency_ms
        record.ewma_at = now

    def report(self, backend_id: str, report: LoadReport, now: float) -> bool:
        """Hand a load report to the strategy; False if no such backend is in the pool."""
        view = self._by_id.get(backend_id)
        if view is None:
            return False
        view.last_report = report
        view.report_at = now
        self.strategy.on_report(view, report, now)
        return True

    # -- probes ----------------------------------------------------------------------

    def probe_targets(self, now: float) -> Sequence[BackendView]:
        """The backends the strategy wants probed now (call after a pick)."""
        return self.strategy.probe_targets(self.views, now)

    def probe_sent(self, backend_id: str) -> None:
        self.counters[backend_id].probes_sent += 1

    def probe_answer(self, backend_id: str, answer: ProbeAnswer, now: float) -> None:
        """A probe's answer: counted, and handed to the strategy if the backend is still
        in the pool."""
        self.counters[backend_id].probes_answered += 1
        view = self._by_id.get(backend_id)
        if view is not None:
            self.strategy.on_probe(view, answer.rif, answer.latency_ms, now)

    def probe_lost(self, backend_id: str, *, timed_out: bool) -> None:
        """A probe that got no usable answer: it timed out, or it failed."""
        counters = self.counters[backend_id]
        if timed_out:
            counters.probes_timed_out += 1
        else:
            counters.probes_failed += 1

    # -- health ----------------------------------------------------------------------

    def set_state(self, backend_id: str, state: Health, now: float) -> None:
        """The driver's news about a backend: UP (connected), DOWN (lost) or DRAINING.

        EJECTED ejects it now, as ``eject_after`` failures would.
        """
        view = self.get(backend_id)
        record = self._health[backend_id]
        if state is Health.EJECTED:
            if record.ejected_until is None:
                self._eject(view, record, now)
                self.strategy.on_pool_change(self.views, now)
            return
        record.told = state
        changed = self._apply(view, record, now)
        if self._refresh_panic(now) or changed:
            self.strategy.on_pool_change(self.views, now)

    def _eject(self, view: BackendView, record: _Health, now: float) -> None:
        until = now + ejection_duration(self.health, record.ejections)
        record.ejections += 1
        if record.window is not None:
            record.window.reset(now)
        record.ejected_until = until
        self._ejected[view.id] = until
        self._next_tick = min(self._next_tick, until)
        self.counters[view.id].ejections += 1
        if not self._refresh_panic(now):
            self._apply(view, record, now)

    def _refresh_panic(self, now: float) -> bool:
        """Enter or leave panic (``health.panic_threshold``); True if states changed."""
        threshold = self.health.panic_threshold
        panic = False
        if threshold > 0:
            connected = ejected = 0
            for record in self._health.values():
                if record.told is Health.UP:
                    connected += 1
                    ejected += record.ejected_until is not None
            panic = connected > 0 and connected - ejected < threshold * connected
        if panic is self.panic:
            return False
        self.panic = panic
        changed = False
        for view in self.views:
            changed |= self._apply(view, self._health[view.id], now)
        return changed

    def _apply(self, view: BackendView, record: _Health, now: float) -> bool:
        """Derive ``view.state``; start slow start on recovery. True if it changed."""
        state: Health
        if record.told is not Health.UP:
            state = record.told
        elif record.ejected_until is not None and not self.panic:
            state = Health.EJECTED
        else:
            state = Health.UP
        if state is view.state:
            return False
        view.state = state
        if state is Health.UP:
            view.consecutive_failures = 0
            record.back_at = now
            self._start_slow(view, record, now)
        return True

    def _start_slow(self, view: BackendView, record: _Health, now: float) -> None:
        factor = slow_start_factor(self.health, 0.0)
        if factor >= 1.0:
            return
        record.slow_since = now
        record.slow_answers = 0
        record.slow_sum_ms = 0.0
        view.slow_start = factor
        self._slow.add(view.id)
        self._slow_stepped = now
        self._next_tick = min(self._next_tick, now + self.health.slow_start_step_s)

    def lease(self, backend_id: str, count: int, expires_at: float) -> None:
        """A LEASE from the backend: it takes ``count`` requests until ``expires_at``."""
        view = self.get(backend_id)
        view.lease_remaining = count
        view.lease_expires_at = expires_at

    def tick(self, now: float) -> bool:
        """End ejections that are over and advance slow start; True if availability changed."""
        changed = False
        for backend_id, until in list(self._ejected.items()):
            if until <= now:
                del self._ejected[backend_id]
                record = self._health[backend_id]
                record.ejected_until = None
                changed |= self._apply(self._by_id[backend_id], record, now)
                changed |= self._refresh_panic(now)
        reweighted = False
        if self._slow and now - self._slow_stepped >= self.health.slow_start_step_s:
            self._slow_stepped = now
            for backend_id in list(self._slow):
                view = self._by_id[backend_id]
                since = self._health[backend_id].slow_since
                factor = 1.0 if since is None else slow_start_factor(self.health, now - since)
                if factor >= 1.0:
                    self._slow.discard(backend_id)
                    factor = 1.0
                reweighted |= factor != view.slow_start
                view.slow_start = factor
        self._next_tick = min(
            min(self._ejected.values(), default=math.inf),
            self._slow_stepped + self.health.slow_start_step_s if self._slow else math.inf,
        )
        if changed or reweighted:
            self.strategy.on_pool_change(self.views, now)
        return changed

    # -- membership ------------------------------------------------------------------

    def _insert(self, spec: BackendSpec) -> BackendView:
        if spec.id in self._by_id:
            raise ConfigError(f"backend {spec.id!r} is given twice; backend ids must be unique")
        view = BackendView(id=spec.id, index=len(self.views), weight=float(spec.weight))
        self.views = [*self.views, view]  # a new list: strategies notice the identity change
        self._by_id[spec.id] = view
        self._health[spec.id] = _Health()
        self.counters.setdefault(spec.id, BackendCounters())
        return view

    def add(self, spec: BackendSpec, now: float) -> BackendView:
        """Add a backend (at the end of the list order); it starts UP, in slow start."""
        view = self._insert(spec)
        record = self._health[spec.id]
        record.back_at = now
        self._start_slow(view, record, now)
        self.strategy.on_pool_change(self.views, now)
        return view

    def remove(self, backend_id: str, now: float) -> BackendView:
        """Take a backend out; its in-flight requests finish (see the module docstring)."""
        view = self.get(backend_id)
        views = [v for v in self.views if v is not view]
        for index, v in enumerate(views):
            v.index = index
        self.views = views
        del self._by_id[backend_id]
        del self._health[backend_id]
        self._ejected.pop(backend_id, None)
        self._slow.discard(backend_id)
        self._refresh_panic(now)
        self.strategy.on_pool_change(self.views, now)
        return view

    def set_strategy(self, strategy: Strategy, now: float) -> None:
        """Swap the strategy; the new one starts with fresh state."""
        self.strategy = strategy
        strategy.on_pool_change(self.views, now)

    def status(self) -> list[dict[str, object]]:
        """One JSON-ready row per backend: state, load and counters (for ``GET /status``)."""
        return [
            {
                "id": v.id,
                "weight": v.weight,
                "state": str(v.state),
                "available": v.available,
                "inflight": v.inflight,
                "completed": v.completed,
                "latency_ewma_ms": v.latency_ewma_ms,
                "slow_start": v.slow_start,
                **asdict(self.counters[v.id]),
            }
            for v in self.views
        ]
