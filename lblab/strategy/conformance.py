"""``lblab strategy check SPEC``: does a strategy keep the contract the drivers rely on?

The strategy is driven through the real ``Pool`` on a simulated clock (as the simulator
drives it), and each check is one finding:

- ``eligible``: property tests (hypothesis) over arbitrary event sequences, with down,
  ejected, draining and excluded backends, pool changes (add, remove, reorder) and an
  empty pool: it never returns an unavailable or excluded backend, never raises, and
  returns None only when nothing is eligible (a lease strategy may refuse);
- ``deterministic``: one scripted run twice with the same seed, the module-level
  ``random`` reseeded differently between them, gives the same pick sequence;
- ``no clock``, ``no global random``, ``no sleep``, ``no I/O``: while any of its hooks
  runs, the wall and monotonic clocks, ``time.sleep`` and the module-level ``random``
  are watched, and an audit hook sees files, sockets and processes; its module's globals are
  also searched for those functions taken by name (``from time import time``);
- ``ties``: over equal idle backends at low load it spreads its picks, unless it
  declares that it breaks ties by list order (``takes_first_on_ties``);
- ``cost``: its pick cost at 3, 100 and 1,000 backends beside p2c's (a figure, not a
  verdict; measured on this machine's wall clock, outside the strategy).
"""

from __future__ import annotations

import datetime
import gc
import heapq
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lblab.balancer.health import HealthConfig
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView, eligible
from lblab.balancer.strategies.configured import ConfiguredStrategy
from lblab.balancer.strategies.registry import make_strategy, strategy_class
from lblab.errors import LocalProtocolError
from lblab.loadreport import LoadReport, ProbeAnswer

CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
          "process_time", "thread_time")  # fmt: skip
"""``time`` functions a strategy must not call: the driver's ``now`` is its clock."""
GLOBAL_RANDOM = ("random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
                 "uniform", "gauss", "expovariate", "getrandbits", "betavariate",
                 "triangular", "normalvariate", "lognormvariate", "paretovariate",
                 "weibullvariate", "vonmisesvariate", "gammavariate", "randbytes")  # fmt: skip
"""Module-level ``random`` functions: the strategy's draws must come from ``self.rng``."""
AUDITED = ("open", "socket.", "subprocess.", "os.system", "os.exec", "os.fork",
           "os.posix_spawn", "urllib.", "http.", "select.", "signal.")  # fmt: skip
"""Audit events (prefixes) that mean a sleep or I/O."""
HOOKS = ("pick", "on_dispatch", "on_complete", "on_report", "on_pool_change",
         "probe_targets", "on_probe")  # fmt: skip
TIE_SHARE = 0.5
"""Over four equal idle backends, more than this share on one is herding, not a spread."""
COST_SIZES = (3, 100, 1000)


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    ok: bool
    line: str


class Violation(Exception):
    """The strategy broke its contract; the message is the finding's line."""


class _Watch:
    """Records what a strategy's hooks did that they must not: clocks, global random,
    sleeps and I/O. Armed only while one of its hooks runs (``guard``)."""

    _hook_installed = False

    def __init__(self) -> None:
        self.armed = False
        self.seen: dict[str, str] = {}  # check -> first thing seen

    @contextmanager
    def watching(self) -> Iterator[None]:
        patched: list[tuple[Any, str, Any]] = []

        def spy(module: Any, name: str, check: str, what: str) -> None:
            real = getattr(module, name, None)
            if real is None:
                return

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if self.armed:
                    self.seen.setdefault(check, what)
                return real(*args, **kwargs)

            patched.append((module, name, real))
            setattr(module, name, wrapper)

        for name in CLOCKS:
            spy(time, name, "no clock", f"time.{name}()")
        spy(time, "sleep", "no sleep", "time.sleep()")
        for name in GLOBAL_RANDOM:
            spy(random, name, "no global random", f"random.{name}()")
        if not _Watch._hook_installed:  # an audit hook stays for the process's life
            sys.addaudithook(_audit)
            _Watch._hook_installed = True
        _WATCHES.append(self)
        try:
            yield
        finally:
            _WATCHES.remove(self)
            for module, name, real in reversed(patched):
                setattr(module, name, real)

    def audit(self, event: str) -> None:
        if self.armed and event.startswith(AUDITED):
            self.seen.setdefault("no I/O", event)


_WATCHES: list[_Watch] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    for watch in _WATCHES:
        watch.audit(event)


class _Guarded:
    """The strategy as the pool sees it: each hook runs with the watch armed, and an
    exception it raises is a violation naming the hook."""

    def __init__(self, strategy: ConfiguredStrategy, watch: _Watch) -> None:
        object.__setattr__(self, "_strategy", strategy)
        object.__setattr__(self, "_watch", watch)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._strategy, name)
        if name not in HOOKS:
            return value
        watch = self._watch

        def hook(*args: Any) -> Any:
            # No collection while armed: a gc callback (Hypothesis times collections with
            # perf_counter) would be taken for the strategy's own call.
            collecting = gc.isenabled()
            gc.disable()
            watch.armed = True
            try:
                return value(*args)
            except Violation:
                raise
            except Exception as exc:
                raise Violation(f"{name} raised {type(exc).__name__}: {exc}") from exc
            finally:
                watch.armed = False
                if collecting:
                    gc.enable()

        return hook


def check(spec: str, options: dict[str, str] | None = None, examples: int = 60) -> list[Finding]:
    """Every finding for the strategy ``spec`` (a name or a spec), in the order above."""
    cls = strategy_class(spec)
    name = str(cls.name)

    def make(seed: int) -> ConfiguredStrategy:
        return make_strategy(name, options, rng=random.Random(seed))

    findings = [_static(cls)]
    watch = _Watch()
    with watch.watching():
        findings.append(_run("eligible", lambda: _eligible(make, watch, examples)))
        findings.append(_run("deterministic", lambda: _deterministic(make, watch)))
        findings.append(_run("ties", lambda: _ties(make, watch)))
    for what in ("no clock", "no global random", "no sleep", "no I/O"):
        used = watch.seen.get(what)
        findings.append(
            Finding(what, used is None, f"its hooks called {used}" if used else "none seen")
        )
    findings.append(_cost(name, options))
    return findings


def _run(check_name: str, body: Callable[[], str]) -> Finding:
    try:
        return Finding(check_name, True, body())
    except Violation as exc:
        return Finding(check_name, False, str(exc))


def _static(cls: type[Any]) -> Finding:
    """Clock or global-random functions taken by name into the strategy's module."""
    module = sys.modules.get(cls.__module__)
    banned = {id(getattr(time, n)): f"time.{n}" for n in CLOCKS if hasattr(time, n)}
    banned |= {id(getattr(random, n)): f"random.{n}" for n in GLOBAL_RANDOM if hasattr(random, n)}
    banned[id(datetime.datetime.now)] = "datetime.now"
    found = sorted(
        f"{key} = {banned[id(value)]}"
        for key, value in vars(module or object).items()
        if id(value) in banned
    )
    if found:
        return Finding(
            "imports", False, f"its module holds {', '.join(found)}: use now and self.rng"
        )
    return Finding("imports", True, "no clock or module-level random taken by name")


# ---------------------------------------------------------------- the drives


def _pool(strategy: ConfiguredStrategy, watch: _Watch, n: int) -> Pool:
    specs = [BackendSpec(f"s{i}", 1 + i % 3) for i in range(n)]
    health = HealthConfig(eject_after=2, eject_base_s=0.5, slow_start_window_s=2.0)
    return Pool(specs, _Guarded(strategy, watch), health=health)  # type: ignore[arg-type]


def events() -> Any:
    """The event sequences the ``eligible`` check draws (a hypothesis strategy of
    ``(kind, k, arg)`` tuples; ``drive_events`` plays one)."""
    from hypothesis import strategies as st

    states = [Health.UP, Health.DOWN, Health.DRAINING, Health.EJECTED]
    return st.lists(
        st.one_of(
            st.tuples(st.just("send"), st.integers(0, 7), st.booleans()),
            st.tuples(st.just("finish"), st.integers(0, 63), st.booleans()),
            st.tuples(st.just("state"), st.integers(0, 7), st.sampled_from(states)),
            st.tuples(st.just("report"), st.integers(0, 7), st.floats(0, 1)),
            st.tuples(st.just("lease"), st.integers(0, 7), st.integers(0, 5)),
            st.tuples(st.just("probe"), st.integers(0, 7), st.integers(0, 20)),
            st.tuples(
                st.just("pool"), st.integers(0, 7), st.sampled_from(["add", "remove", "reorder"])
            ),
            st.tuples(st.just("wait"), st.integers(0, 7), st.floats(0, 3)),
        ),
        max_size=60,
    )


def drive_events(
    strategy: ConfiguredStrategy,
    n: int,
    ops: Sequence[tuple[str, int, Any]],
    watch: _Watch | None = None,
) -> None:
    """Play ``ops`` on a pool of ``n`` backends run by ``strategy``; a ``Violation`` when
    it picks an ineligible backend, refuses with one eligible (only a lease strategy
    may), raises, or the in-flight counts do not balance once every request is done."""
    pool = _pool(strategy, watch or _Watch(), n)
    now, rid, added = 0.0, 0, n
    open_requests: list[tuple[Any, RequestView]] = []
    for kind, k, arg in ops:
        views = pool.views
        backend = views[k % len(views)] if views else None
        if kind == "send":
            rid += 1
            exclude = frozenset({backend.id}) if arg and backend else frozenset()
            req = RequestView(request_id=rid, routing_key=b"%d" % (rid % 5),
                              client_address=f"10.0.0.{rid % 7}", exclude=exclude)  # fmt: skip
            try:
                view = pool.pick(req, now)
            except LocalProtocolError as exc:
                raise Violation(f"picked an ineligible backend: {exc}") from None
            if view is None:
                free = sum(eligible(b, req) for b in pool.views)
                if free and not strategy.uses_leases:
                    raise Violation(
                        f"pick returned None with {free} eligible backend(s) "
                        "(only a lease strategy may refuse)"
                    )
                continue
            pool.dispatch(view, req, now)
            open_requests.append((view, req))
        elif kind == "finish" and open_requests:
            view, req = open_requests.pop(k % len(open_requests))
            outcome = Outcome(ok=arg, latency_ms=1.0 + k, error_kind=None if arg else "timeout")
            pool.complete(view, req, outcome, now)
        elif kind == "state" and backend is not None:
            pool.set_state(backend.id, arg, now)
        elif kind == "report" and backend is not None:
            for source in ("agent", "response", "push"):
                pool.report(backend.id, LoadReport(
                    server=backend.id, source=source, t=now, cpu_util=arg, qps=10 * arg,
                    inflight=backend.inflight, queue_ms=arg * 5, service_ms=arg * 10,
                ), now)  # fmt: skip
        elif kind == "lease" and backend is not None:
            backend.lease_remaining = arg
            backend.lease_expires_at = now + 1.0
        elif kind == "probe" and strategy.uses_probes:
            for target in pool.probe_targets(now):
                pool.probe_sent(target.id)
                pool.probe_answer(target.id, ProbeAnswer(rif=arg, latency_ms=1.0 + arg), now)
        elif kind == "pool":
            if arg == "add":
                pool.add(BackendSpec(f"s{added}", 1.0), now)
                added += 1
            elif backend is not None:
                pool.remove(backend.id, now)
                if arg == "reorder":  # back in, at the end of the list order
                    pool.add(BackendSpec(backend.id, backend.weight), now)
        elif kind == "wait":
            now += arg
    for view, req in open_requests:
        pool.complete(view, req, Outcome(ok=True, latency_ms=1.0), now)
    if pool.outstanding or any(v.inflight for v in pool.views):
        raise Violation("in-flight counts do not balance once every request completed")


def _eligible(make: Callable[[int], ConfiguredStrategy], watch: _Watch, examples: int) -> str:
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st
    from hypothesis.reporting import with_reporter

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)  # fmt: skip
    @given(n=st.integers(0, 6), seed=st.integers(0, 2**16), ops=events())
    # Always tried: an empty pool; each unavailable state and an exclusion on every
    # backend in turn, the rest of the pool up.
    @example(n=0, seed=0, ops=[("send", 0, False)])
    @example(n=3, seed=1, ops=[
        *(op for k in range(3) for state in (Health.DOWN, Health.EJECTED, Health.DRAINING)
          for op in (("state", k, state), ("send", 0, False), ("send", 1, False),
                     ("state", k, Health.UP), ("send", k, True), ("finish", 0, True))),
    ])  # fmt: skip
    def drive(n: int, seed: int, ops: list[tuple[str, int, Any]]) -> None:
        drive_events(make(seed), n, ops, watch)

    with with_reporter(lambda _text: None):
        drive()
    return f"{examples} event sequences: never an unavailable or excluded backend"


def _script(make: Callable[[int], ConfiguredStrategy], watch: _Watch, seed: int) -> list[str]:
    """A fixed run of 2,000 requests over 5 backends with a health change and a pool
    change on the way; the ids picked, in order."""
    pool = _pool(make(seed), watch, 5)
    rng = random.Random(f"lblab-check-script-{seed}")
    now, picked = 0.0, []
    out: list[tuple[float, int, float, Any, RequestView]] = []
    """Requests in flight: (done, id, sent, view, request), a heap by when they end."""
    for rid in range(2000):
        now += rng.expovariate(500.0)
        if rid == 700:
            pool.set_state("s1", Health.DOWN, now)
        if rid == 1200:
            pool.set_state("s1", Health.UP, now)
            pool.add(BackendSpec("s5", 2.0), now)
        while out and out[0][0] <= now:
            done, _, sent, view, req = heapq.heappop(out)
            pool.complete(view, req, Outcome(ok=True, latency_ms=(done - sent) * 1000), done)
        req = RequestView(request_id=rid, routing_key=b"%d" % rng.randrange(64),
                          client_address=f"10.0.{rid % 3}.1")  # fmt: skip
        view = pool.pick(req, now)
        picked.append(view.id if view else "-")
        if view is not None:
            pool.dispatch(view, req, now)
            done = now + rng.expovariate(250.0 / (1 + view.index % 3))
            heapq.heappush(out, (done, rid, now, view, req))
        if _uses_reports(pool.strategy) and rid % 50 == 0:
            for v in pool.views:
                pool.report(v.id, LoadReport(server=v.id, source="agent", t=now,
                            cpu_util=min(1.0, v.inflight / 8), qps=100.0, inflight=v.inflight,
                            service_ms=4.0), now)  # fmt: skip
        if pool.strategy.uses_probes:
            for target in pool.probe_targets(now):
                pool.probe_sent(target.id)
                pool.probe_answer(target.id, ProbeAnswer(rif=target.inflight, latency_ms=4.0), now)
    return picked


def _uses_reports(s: Any) -> bool:
    return bool(s.uses_agent_reports or s.uses_response_reports or s.uses_push_reports)


def _deterministic(make: Callable[[int], ConfiguredStrategy], watch: _Watch) -> str:
    # The global random reseeded differently between the runs: the one place lblab
    # touches it, to expose a strategy that draws from it.
    state = random.getstate()
    try:
        random.seed(1)  # noqa: TID251
        first = _script(make, watch, 7)
        random.seed(2)  # noqa: TID251
        second = _script(make, watch, 7)
    finally:
        random.setstate(state)
    if first != second:
        at = next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)
        raise Violation(
            f"not deterministic for a seed: two runs with seed 7 differ from pick {at} "
            f"({first[at]} then {second[at]}); draw only from self.rng and read only now"
        )
    return f"the same {len(first)} picks twice for one seed"


def _ties(make: Callable[[int], ConfiguredStrategy], watch: _Watch) -> str:
    strategy = make(3)
    if strategy.takes_first_on_ties():
        return "breaks ties by list order, as it declares (takes_first_on_ties)"
    specs = [BackendSpec(f"s{i}") for i in range(4)]
    pool = Pool(specs, _Guarded(strategy, watch))  # type: ignore[arg-type]
    counts: Counter[str] = Counter()
    now, n = 0.0, 400
    for rid in range(n):
        req = RequestView(
            request_id=rid,
            routing_key=b"k%d" % rid,
            client_address=f"10.1.{rid % 250}.{rid // 250}",
        )
        view = pool.pick(req, now)
        if view is None:
            continue
        counts[view.id] += 1
        pool.dispatch(view, req, now)
        now += 0.010  # one request at a time: every backend idle and equal at each pick
        pool.complete(view, req, Outcome(ok=True, latency_ms=10.0), now)
        now += 0.040
    top, most = counts.most_common(1)[0] if counts else ("-", 0)
    share = most / max(1, sum(counts.values()))
    if share > TIE_SHARE:
        raise Violation(
            f"ties: {share:.0%} of {n} sequential requests went to {top} of 4 equal idle "
            "backends; break ties with self.rng, or define takes_first_on_ties() -> True "
            "if list order is the definition"
        )
    return f"spreads ties: at most {share:.0%} on one of 4 equal idle backends"


def _cost(name: str, options: dict[str, str] | None) -> Finding:
    """Microseconds per pick (with its dispatch and completion) at each size, beside p2c."""
    parts = []
    for size in COST_SIZES:
        mine = _pick_us(name, options, size)
        p2c = _pick_us("p2c", None, size)
        parts.append(f"{size}: {mine:.1f} us ({mine / p2c:.1f}x p2c's {p2c:.1f})")
    return Finding("cost", True, "per pick at " + ", ".join(parts))


def _pick_us(name: str, options: dict[str, str] | None, size: int) -> float:
    pool = Pool([BackendSpec(f"s{i}") for i in range(size)],
                make_strategy(name, options, rng=random.Random(1)))  # fmt: skip
    picks = max(200, 20_000 // size)
    requests = [RequestView(request_id=i, routing_key=b"%d" % i) for i in range(picks)]
    ok = Outcome(ok=True, latency_ms=1.0)
    started = time.perf_counter()
    for i, req in enumerate(requests):
        view = pool.pick(req, i * 0.001)
        if view is not None:
            pool.dispatch(view, req, i * 0.001)
            pool.complete(view, req, ok, i * 0.001)
    return (time.perf_counter() - started) / picks * 1e6


def report_lines(findings: Sequence[Finding]) -> list[str]:
    """One line a finding: ``ok`` or ``FAIL``, the check, what was seen."""
    return [f"{'ok  ' if f.ok else 'FAIL'} {f.check}: {f.line}" for f in findings]
