"""``gmsr``: Greatest Marginal Service Rate, each backend's rate learned per in-flight level.

The rule (Zhang, Balseiro, Kleinberg, Mirrokni, Sivan, Wydrowski, *Distributed Load
Balancing with Workload-Dependent Service Rates*, arXiv 2411.17103): backend j serves
at a rate ``mu_j(w)`` that depends on its workload ``w`` (concave, increasing), and each
frontend, without talking to the others, routes a job to the connected backend where it
"has the largest marginal impact on service rate". The paper's body (its exact discrete
rule, how a frontend knows ``mu_j`` and ``w``) could not be read from public material
here; this module implements the abstract's rule with lblab's estimate of ``mu_j``,
stated in full below and in docs/ALGORITHMS.md.

Workload. ``n_j`` is this balancer's requests in flight to j (``BackendView.inflight``):
what a frontend knows locally. With one balancer it is the server's whole workload.

Rate per level. For each backend and each level ``k`` in ``1..max_level`` the strategy
keeps three sums over the time j spent at level k (k of this balancer's requests in
flight to it): ``T_k`` the seconds spent there, ``C_k`` the successful responses that
arrived there, ``E_k`` the outcomes of any kind that arrived there (a failure ends the
interval without a completion: a backend that fails fast earns a rate near 0, not an
unknown one). All three decay together, ``x = x * exp(-dt / window_s) + new``, ``dt``
the time since that level's last update, so ``mu_j(k) = C_k / T_k`` is the completion
rate at level k over about the last ``window_s``: the state-dependent service rate of a
birth-death queue, measured. The interval under way counts too: at its current level
``n_j``, read at ``now``, ``T`` includes ``now - since`` (the time since its level last
changed), so a backend that stops answering loses rate at once. A level has an estimate
when its decayed outcomes ``E_k * exp(-age / window_s)`` are at least ``min_samples``;
``mu_j(0) = 0``. Levels above ``max_level`` are counted in ``max_level`` (so the
marginal there is at most 0).

The rate curve and its marginal. The known levels ``k_1 < k_2 < ...`` with ``(0, 0)``
before them give a piecewise-linear ``mu_j``; above the highest known level it is flat
(no gain is assumed where none was seen). Concavity is imposed: the marginal at ``n``
is the least slope of that curve from 0 to ``n + 1``,
``g_j(n) = min(slope of each segment [k_(i-1), k_i] with k_(i-1) <= n, and 0 if
n >= the highest known level)``, so a noisy rise at a high level never makes a
saturated backend look better than its lower levels said. A backend with no level
known has ``g = +inf`` while nothing of this balancer's is in flight to it (it is
learned one request at a time) and ``-inf`` otherwise. Levels above the ones known are
reached through ties (below): where every backend looks saturated (``g`` near 0), the
soonest done wins, and the level reached is then measured.

Pick. ``g_j`` at ``n_j`` for each eligible backend; ``best = max g``. Tied with the best
are those with ``g_j >= best - tolerance * ref``, ``ref`` the largest ``mu_j(1)`` among
the candidates (the fastest one-at-a-time rate, on the curve; 0 when none is known), or
with ``g_j == best`` when ``best`` is infinite. Among the tied, the soonest done by
Little's law: the least ``wait_j = (n_j + 1) / mu_j(n_j + 1)`` (``inf`` for a rate of 0),
those within ``(1 + tolerance)`` of the least counting as equal; when ``best`` is
infinite (nothing known of any of the tied), the fewest in flight instead. Among those,
``tie``: uniform from the strategy's rng (``random``, the default) or the first in list
order (``first``). A pick whose tied set had more than one backend counts in ``ties``.
``tolerance = 0``: the bare argmax, then the bare least wait.

Edge cases: no eligible backend gives None. A backend that stops being available (down,
draining, ejected) or leaves the pool loses its estimates: back, it is learned again.
Cost: O(n * L) per pick, L the highest level a backend has been timed at (at most
``max_level``), O(1) per dispatch and completion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from .base import BackendView, Outcome, RequestView
from .configured import ConfiguredStrategy
from .ewma import decay
from .least_load import LeastTieRule
from .options import check

MAX_LEVELS: Final = 4096
"""A bound on ``max_level``: each backend keeps four numbers a level."""
_INF: Final = math.inf


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class GmsrConfig:
    window_s: float = 10.0
    """Time constant of the decay of each level's time, responses and outcomes."""
    min_samples: float = 8.0
    """Decayed outcomes a level needs before its rate is used."""
    max_level: int = 64
    """Highest in-flight level estimated on its own; those above count in it."""
    tolerance: float = 0.1
    """Marginals within ``tolerance * ref`` of the best tie (``ref``: the fastest
    one-at-a-time rate among the candidates)."""
    tie: "LeastTieRule" = "random"
    """The tied and equally soon done: one drawn at random, or the first in list order."""

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.window_s) and self.window_s > 0,
            f"window_s={self.window_s}: must be > 0 seconds",
        )
        check(
            math.isfinite(self.min_samples) and self.min_samples > 0,
            f"min_samples={self.min_samples}: must be > 0",
        )
        check(
            1 <= self.max_level <= MAX_LEVELS,
            f"max_level={self.max_level}: must be in 1..{MAX_LEVELS}",
        )
        check(
            math.isfinite(self.tolerance) and 0 <= self.tolerance <= 1,
            f"tolerance={self.tolerance}: must be in [0, 1]",
        )


class LevelRates:
    """One backend's completion rate per in-flight level (index 0 is never used)."""

    __slots__ = ("count", "ends", "high", "since", "stamp", "time")

    def __init__(self, levels: int, now: float) -> None:
        self.count = [0.0] * (levels + 1)
        """Successful responses at each level (decayed)."""
        self.ends = [0.0] * (levels + 1)
        """Outcomes of any kind at each level (decayed): what makes a level known."""
        self.time = [0.0] * (levels + 1)
        self.stamp = [now] * (levels + 1)
        self.since = now
        """When the backend's level last changed (the interval being timed began)."""
        self.high = 0
        """The highest level timed so far (none above it can be known)."""

    def advance(self, level: int, now: float, tau: float, ended: bool, ok: bool) -> None:
        """The backend was at ``level`` from ``since`` to ``now``; an outcome ended it if
        ``ended`` (a successful response if ``ok``), else a dispatch."""
        if level > 0:
            k = min(level, len(self.count) - 1)
            w = decay(now - self.stamp[k], tau)
            self.count[k] = self.count[k] * w + (1.0 if ok else 0.0)
            self.ends[k] = self.ends[k] * w + (1.0 if ended else 0.0)
            self.time[k] = self.time[k] * w + (now - self.since)
            self.stamp[k] = now
            if k > self.high:
                self.high = k
        self.since = now

    def known(self, n: int, now: float, tau: float, min_samples: float) -> list[tuple[int, float]]:
        """``(k, mu(k))`` for each level with an estimate, ascending, the backend being at
        level ``n`` since ``since``: that open interval counts in level n's time (a
        backend that stops answering loses rate at once, not at its next outcome)."""
        count, ends, time, stamp = self.count, self.ends, self.time, self.stamp
        top = len(count) - 1
        current = min(n, top)
        found = []
        for k in range(1, self.high + 1):
            w = decay(now - stamp[k], tau)
            if time[k] > 0.0 and ends[k] * w >= min_samples:
                spent = time[k] * w + (now - self.since if k == current else 0.0)
                found.append((k, count[k] * w / spent))
        return found

    def rate(self, m: int, n: int, now: float, tau: float, min_samples: float) -> float:
        """``mu(m)`` on the estimated curve at level ``n`` (``known``): the line between
        the known levels around ``m`` (``(0, 0)`` first), flat above the highest; 0 with
        none known."""
        prev_k, prev_mu = 0, 0.0
        for k, mu in self.known(n, now, tau, min_samples):
            if k >= m:
                return prev_mu + (mu - prev_mu) * (m - prev_k) / (k - prev_k)
            prev_k, prev_mu = k, mu
        return prev_mu

    def marginal(self, n: int, now: float, tau: float, min_samples: float) -> float:
        """The least slope of the estimated ``mu`` from 0 to ``n + 1`` at level ``n``:
        ``+inf``/``-inf`` with no level known (at ``n = 0``/above)."""
        known = self.known(n, now, tau, min_samples)
        if not known:
            return _INF if n == 0 else -_INF
        least = _INF
        prev_k, prev_mu = 0, 0.0
        for k, mu in known:
            if prev_k > n:
                return least
            least = min(least, (mu - prev_mu) / (k - prev_k))
            prev_k, prev_mu = k, mu
        return least if prev_k > n else min(least, 0.0)


@mypyc_attr(allow_interpreted_subclasses=True)
class Gmsr(ConfiguredStrategy[GmsrConfig]):
    name = "gmsr"
    listed = (2, 9)
    summary = "GMSR: greatest marginal service rate mu(n+1) - mu(n), mu learned per in-flight level"

    Config = GmsrConfig
    full_scan = True

    def takes_first_on_ties(self) -> bool:
        return self.config.tie == "first"

    def _setup(self) -> None:
        self.levels: dict[str, LevelRates] = {}

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        keep = {b.id for b in backends if b.available}
        for gone in [i for i in self.levels if i not in keep]:
            del self.levels[gone]

    def _rates(self, backend: BackendView, now: float) -> LevelRates:
        rates = self.levels.get(backend.id)
        if rates is None:
            rates = self.levels[backend.id] = LevelRates(self.config.max_level, now)
        return rates

    def on_dispatch(self, backend: BackendView, request: RequestView, now: float) -> None:
        if backend.available:  # the pool counted it: it was at inflight - 1 until now
            self._rates(backend, now).advance(
                backend.inflight - 1, now, self.config.window_s, ended=False, ok=False
            )

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        rates = self.levels.get(backend.id)
        if rates is not None:  # the pool uncounted it: it was at inflight + 1 until now
            rates.advance(
                backend.inflight + 1, now, self.config.window_s, ended=True, ok=outcome.ok
            )

    def marginal(self, backend: BackendView, now: float) -> float:
        """``g``, the least slope of the estimated ``mu`` up to ``n + 1``, at this
        balancer's ``n`` in flight (requests/s per request)."""
        rates = self.levels.get(backend.id)
        if rates is None:
            return _INF if backend.inflight == 0 else -_INF
        cfg = self.config
        return rates.marginal(backend.inflight, now, cfg.window_s, cfg.min_samples)

    def rate(self, backend: BackendView, level: int, now: float) -> float:
        """``mu(level)`` on the backend's estimated curve (requests/s; 0 with none known)."""
        rates = self.levels.get(backend.id)
        if rates is None:
            return 0.0
        cfg = self.config
        return rates.rate(level, backend.inflight, now, cfg.window_s, cfg.min_samples)

    def wait(self, backend: BackendView, now: float) -> float:
        """``(n + 1) / mu(n + 1)``: a request's time there by Little's law, if sent now."""
        mu = self.rate(backend, backend.inflight + 1, now)
        return (backend.inflight + 1) / mu if mu > 0.0 else _INF

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        candidates = self.avail.eligible_items(request)
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        gains = [self.marginal(b, now) for b in candidates]
        best = max(gains)
        if math.isinf(best):
            tied = [b for b, g in zip(candidates, gains, strict=True) if g == best]
        else:
            ref = max(self.rate(b, 1, now) for b in candidates)
            floor = best - self.config.tolerance * ref
            tied = [b for b, g in zip(candidates, gains, strict=True) if g >= floor]
        if len(tied) == 1:
            return tied[0]
        self.ties += 1
        if math.isinf(best):  # nothing known of any of them: the fewest in flight
            keys = [float(b.inflight) for b in tied]
            limit = min(keys)
        else:  # the soonest done by Little's law, within the tolerance
            keys = [self.wait(b, now) for b in tied]
            limit = min(keys) * (1.0 + self.config.tolerance)
        least = [b for b, key in zip(tied, keys, strict=True) if key <= limit]
        if len(least) == 1 or self.config.tie == "first":
            return least[0]
        return least[self.rng.randrange(len(least))]
