"""Aperture: each of K balancers connects to, and picks within, a subset of the N servers.

Finagle's aperture balancers (``finagle-core/.../loadbalancer/aperture/``, docs/ALGORITHMS.md,
"Aperture"), as pure functions of a balancer instance's place among its peers: no I/O,
no clock, randomness passed in. The balancer node (``lblab balancer --aperture``) and
the simulator (``aperture`` in a simulated run's config) both build their pool from
``subset``'s members, so each connects to its subset only and the run's strategy picks
within it.

- **Deterministic** (``DeterministicAperture.scala``, ``WeightedAperture.scala``,
  ``ProcessCoordinate.scala``): balancer ``i`` of ``K`` sits at ``offset = i / K`` on a
  ring ``[0, 1)`` with ``unit_width = 1 / K``; the servers lie on the same ring in their
  configured order, each an arc as long as its normalised weight. The window is
  ``[offset, offset + width)``, ``width = min(1, ceil(L * (1/N) / (1/K)) / K)`` for the
  logical aperture ``L = min(size, N)`` (Finagle's ``minDeterministicAperture``, 12), so
  the K windows tile the ring a whole number of times. A server's weight in the window
  is the length of its arc inside it: the edges count in part.
- **Random** (``RandomAperture.scala``): the servers in the order of a random token per
  server (Finagle draws one per node, per process); the window is ``[0, L / N)`` of that
  ring, so the first ``L`` servers of equal weight.
- **Load band** (``LoadBand.scala``): random aperture's size follows the balancer's
  load; ``LoadBand`` is the controller.

The walk is done in exact fractions (``Fraction`` of each float), so that no
floating-point residue makes a server a member by 1e-17 of its arc, as a walk in
doubles can.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Literal

from lblab.errors import ConfigError

Mode = Literal["deterministic", "random"]
MODES: Final = ("deterministic", "random")
MIN_DETERMINISTIC_APERTURE: Final = 12
"""Finagle's ``minDeterministicAperture`` flag: the servers a deterministic window spans
at least (``DeterministicAperture.MinDeterministicAperture``; 12 so that an aperture
rarely holds no healthy server)."""
LOW_LOAD: Final = 0.875
HIGH_LOAD: Final = 1.125
SMOOTH_WINDOW_S: Final = 15.0
MIN_APERTURE: Final = 1
"""``Balancers.aperture``'s defaults: the load band and its smoothing, the least size."""
MAX_APERTURE: Final = 100_000
"""The largest size lblab takes (the simulator's most servers)."""


@dataclass(frozen=True, slots=True)
class Coord:
    """A balancer's place on the ring (``ProcessCoordinate.FromInstanceId``)."""

    offset: Fraction
    """``instance / instances``, in [0, 1)."""
    unit_width: Fraction
    """``1 / instances``, in (0, 1]."""


def coordinate(instance: int, instances: int) -> Coord:
    """Instance ``instance`` (0-based) of ``instances``: ``offset = (i * (1/K)) % 1``."""
    if instances < 1:
        raise ConfigError(f"aperture: instances must be at least 1, not {instances}")
    if not 0 <= instance < instances:
        raise ConfigError(
            f"aperture: instance {instance} is not in 0..{instances - 1} (one per balancer)"
        )
    unit = Fraction(1, instances)
    return Coord(offset=(instance * unit) % 1, unit_width=unit)


def aperture_width(local_unit: Fraction, remote_unit: Fraction, logical: int) -> Fraction:
    """``DeterministicAperture.dApertureWidth``: the smallest whole number of balancer
    units that holds ``logical`` servers' arcs, at most the whole ring."""
    laps = math.ceil(logical * remote_unit / local_unit)
    return min(Fraction(1), laps * local_unit)


def _normalized(weights: Sequence[float]) -> list[Fraction]:
    """``WeightedAperture.normalize``: weights over their sum (all zero: equal)."""
    exact = [Fraction(w) for w in weights]
    if any(w < 0 for w in exact):
        raise ConfigError("aperture: a server's weight is negative")
    total = sum(exact, Fraction(0))
    if total == 0:
        return [Fraction(1, len(exact))] * len(exact)
    return [w / total for w in exact]


def ring_weights(weights: Sequence[float], offset: Fraction, width: Fraction) -> list[Fraction]:
    """``WeightedAperture.adjustWeights``: each server's length of arc inside
    ``[offset, offset + width)``, walking the ring from 0 (and round again past 1).

    The first server whose arc reaches ``offset`` gets ``min(width, w + position -
    offset)``, the one whose arc passes the end gets ``end - position``, those between
    their whole ``w``; the rest 0. The result sums to ``width`` (all nonzero arcs)."""
    norm = _normalized(weights)
    n = len(norm)
    start, end = offset, offset + width
    out = [Fraction(0)] * n
    position = Fraction(0)
    idx = 0
    while position < end:
        w = norm[idx]
        if position < start:
            if position + w >= start:
                out[idx] += min(width, w + position - start)
        elif position + w > end:
            out[idx] += end - position
        else:
            out[idx] += w
        position += w
        idx = (idx + 1) % n
    return out


@dataclass(frozen=True, slots=True)
class Member:
    """A server in a balancer's window."""

    id: str
    index: int
    """Its position in the configured server list."""
    share: float
    """The part of its arc inside the window, in (0, 1]: 1 inside, less on an edge."""
    weight: float
    """The weight its balancer's pool gives it: its static weight times ``share``."""


@dataclass(frozen=True, slots=True)
class Subset:
    """One balancer's aperture: where it sits and the servers it connects to."""

    mode: Mode
    instance: int
    instances: int
    aperture: int
    """The logical aperture ``L`` (servers' worth of arc in the window)."""
    offset: float
    width: float
    members: tuple[Member, ...]
    order: tuple[str, ...] = ()
    """Every server in ring order (a random aperture's token order; its window is the
    first ``aperture`` of them)."""

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.members)

    def describe(self) -> dict[str, Any]:
        """As JSON data, for a run's manifest and the balancer's ``/status``."""
        return {
            "mode": self.mode,
            "instance": self.instance,
            "instances": self.instances,
            "aperture": self.aperture,
            "offset": self.offset,
            "width": self.width,
            "servers": {m.id: round(m.share, 6) for m in self.members},
            **({"order": list(self.order)} if self.mode == "random" else {}),
        }


def check_size(mode: str, size: int, servers: int) -> int:
    """The logical aperture of ``size`` over ``servers``: ``min(size, N)``, once
    ``check_mode`` takes them."""
    check_mode(mode, size)
    if servers < 1:
        raise ConfigError("aperture: there are no servers to take a subset of")
    return min(size, servers)


def check_mode(
    mode: str, size: int, mode_setting: str = "aperture", size_setting: str = "aperture_size"
) -> None:
    """A clear error, naming the setting as the person gave it, for a mode lblab does
    not know or a size out of range (a deterministic one of 1 Finagle refuses too)."""
    if mode not in MODES:
        raise ConfigError(f"{mode_setting}: {mode!r} is not one of {', '.join(MODES)}")
    least = 2 if mode == "deterministic" else 1
    if isinstance(size, bool) or not isinstance(size, int) or not least <= size <= MAX_APERTURE:
        raise ConfigError(
            f"{size_setting}: {size!r} is not a whole number of servers in "
            f"{least}..{MAX_APERTURE}"
            + (
                " (a deterministic aperture spans at least 2: Finagle's "
                "minDeterministicAperture must be above 1; its default is 12)"
                if least == 2
                else ""
            )
        )


def subset(
    mode: Mode,
    servers: Sequence[str],
    weights: Sequence[float],
    instance: int,
    instances: int,
    size: int = MIN_DETERMINISTIC_APERTURE,
    rng: random.Random | None = None,
) -> Subset:
    """Balancer ``instance`` of ``instances``'s window over ``servers`` (their static
    ``weights``, in order): deterministic from its coordinate, or random from ``rng``'s
    tokens (needed then)."""
    n = len(servers)
    if len(weights) != n:
        raise ConfigError(f"aperture: {len(weights)} weights for {n} servers")
    logical = check_size(mode, size, n)
    coord = coordinate(instance, instances)
    if mode == "deterministic":
        order = list(range(n))
        offset = coord.offset
        width = aperture_width(coord.unit_width, Fraction(1, n), logical)
    else:
        if rng is None:
            raise ConfigError("aperture: a random aperture needs a random stream")
        tokens = [rng.getrandbits(32) for _ in range(n)]  # ApertureNode.token, one per node
        order = sorted(range(n), key=lambda i: tokens[i])  # stable: sortBy(token)
        offset = Fraction(0)
        width = Fraction(logical, n)  # RandomApertureProbabilityDist.scaledAperture
    arcs = ring_weights([weights[i] for i in order], offset, width)
    norm = _normalized(weights)
    total = sum((Fraction(w) for w in weights), Fraction(0)) or Fraction(n)
    members = []
    for pos, arc in enumerate(arcs):
        if arc > 0:
            i = order[pos]
            share = arc / norm[i] if norm[i] else Fraction(1)
            members.append(Member(servers[i], i, float(share), float(arc * total)))
    members.sort(key=lambda m: m.index)
    return Subset(
        mode=mode,
        instance=instance,
        instances=instances,
        aperture=logical,
        offset=float(offset),
        width=float(width),
        members=tuple(members),
        order=tuple(servers[i] for i in order),
    )


@dataclass(frozen=True, slots=True)
class ApertureConfig:
    """How K balancers take their subsets: ``mode`` and the logical aperture ``size``."""

    mode: Mode = "deterministic"
    size: int = MIN_DETERMINISTIC_APERTURE
    """The logical aperture; with ``load_band``, the least one (Finagle's ``minAperture``)."""
    load_band: bool = False
    """A random aperture sized by its ``LoadBand`` (the simulator's ``BandedWindow``)."""

    def __post_init__(self) -> None:
        if self.load_band and self.mode == "deterministic":
            raise ConfigError(
                "aperture_load_band: Finagle sizes only a random aperture by load (its "
                "deterministic one is fixed); give aperture = 'random'"
            )
        check_mode(self.mode, self.size)

    def subsets(
        self,
        servers: Sequence[str],
        weights: Sequence[float],
        instances: int,
        rng_of: Callable[[int], random.Random],
    ) -> list[Subset]:
        """Every balancer's subset, ``b1`` first; ``rng_of(i)`` is instance i's stream
        (drawn from only by a random aperture)."""
        random_mode = self.mode == "random"
        return [
            subset(self.mode, servers, weights, i, instances, self.size,
                   rng_of(i) if random_mode else None)
            for i in range(instances)
        ]  # fmt: skip


def banded_windows(
    config: ApertureConfig,
    servers: Sequence[str],
    weights: Sequence[float],
    instances: int,
    rng_of: Callable[[int], random.Random],
    now: float = 0.0,
) -> list[BandedWindow]:
    """Every balancer's load-banded random window (``config.load_band``), ``b1`` first:
    its ring is the random aperture's token order from ``rng_of(i)`` (the order
    ``config.subsets`` would draw), its least size ``config.size``."""
    n = len(servers)
    return [
        BandedWindow(
            subset("random", servers, weights, i, instances, n, rng_of(i)).order,
            LoadBand(n, min_aperture=config.size),
            now,
        )
        for i in range(instances)
    ]


class LoadBand:
    """Finagle's ``LoadBand`` controller of a random aperture's size, sans-I/O.

    Each request's start (``+1``) and end (``-1``) updates an EMA of the balancer's
    outstanding requests over ``smooth_window_s`` (``util/Ema.scala``: the first
    observation is the average, then ``w = exp(-dt / window)``, ``ema = x (1 - w) + ema
    w``); then ``avg = ema / aperture``: at or above ``high`` (and below ``N``) the
    aperture widens by one server, at or below ``low`` (and above ``min(min_aperture,
    N)``) it narrows by one."""

    __slots__ = (
        "_ema",
        "_outstanding",
        "_time",
        "aperture",
        "high",
        "low",
        "maximum",
        "minimum",
        "window",
    )

    def __init__(
        self,
        servers: int,
        *,
        min_aperture: int = MIN_APERTURE,
        low: float = LOW_LOAD,
        high: float = HIGH_LOAD,
        smooth_window_s: float = SMOOTH_WINDOW_S,
        initial: int = 1,
    ) -> None:
        if not 0 <= low < high:
            raise ConfigError(f"aperture load band: low {low} must be >= 0 and below high {high}")
        if not 0 <= smooth_window_s <= 3600:
            raise ConfigError(
                f"aperture load band: smooth window {smooth_window_s} s is not in [0, 3600]"
            )
        if min_aperture < 1 or servers < 1:
            raise ConfigError("aperture load band: min aperture and servers must be >= 1")
        self.low = low
        self.high = high
        self.window = smooth_window_s
        self.maximum = servers  # BaseDist.max: vector.size
        self.minimum = min(min_aperture, servers)  # BaseDist.min
        self.aperture = max(self.minimum, min(self.maximum, initial))  # adjust(0)
        self._ema = 0.0
        self._time: float | None = None
        self._outstanding = 0

    def update(self, delta: int, now: float) -> int:
        """A request started (``delta`` 1) or ended (-1) at ``now``; the new aperture."""
        return self.observe(self._outstanding + delta, now)

    def observe(self, outstanding: int, now: float) -> int:
        """The balancer's outstanding requests are ``outstanding`` at ``now`` (one call
        per change, as Finagle's ``adjustTotalLoad``); the new aperture."""
        self._outstanding = outstanding
        x = float(outstanding)
        if self._time is None:
            self._ema = x
        else:
            dt = now - self._time
            if dt < 0:
                raise ValueError(f"LoadBand: time went back by {-dt} s")
            w = 0.0 if self.window == 0 else math.exp(-dt / self.window)
            self._ema = x * (1 - w) + self._ema * w
        self._time = now
        avg = self._ema / self.aperture
        if avg >= self.high and self.aperture < self.maximum:
            self.aperture += 1
        elif avg <= self.low and self.aperture > self.minimum:
            self.aperture -= 1
        return self.aperture


class BandedWindow:
    """A random aperture sized by its load band: the first ``band.aperture`` servers of
    its ring ``order``. ``observe`` returns the server that joins the window or leaves
    it (Finagle narrows the window the pick draws from; the driver takes the server out
    of the pool, its requests in flight finishing there)."""

    __slots__ = ("_area", "_at", "_start", "band", "largest", "order", "size")

    def __init__(self, order: Sequence[str], band: LoadBand, now: float = 0.0) -> None:
        if len(order) != band.maximum:
            raise ConfigError(f"aperture: an order of {len(order)} for {band.maximum} servers")
        self.order = tuple(order)
        self.band = band
        self.size = band.aperture
        self.largest = self.size
        self._area = 0.0
        self._start = self._at = now

    @property
    def members(self) -> tuple[str, ...]:
        return self.order[: self.size]

    def observe(self, outstanding: int, now: float) -> tuple[str | None, str | None]:
        """``(joined, left)`` after the balancer's outstanding count changed at ``now``."""
        self._area += self.size * (now - self._at)
        self._at = now
        before, after = self.size, self.band.observe(outstanding, now)
        self.size = after
        self.largest = max(self.largest, after)
        if after > before:
            return self.order[after - 1], None
        if after < before:
            return None, self.order[before - 1]
        return None, None

    def mean_size(self, now: float) -> float:
        """The window's time-weighted mean size from its start to ``now``."""
        span = now - self._start
        area = self._area + self.size * (now - self._at)
        return area / span if span > 0 else float(self.size)
