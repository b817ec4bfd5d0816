"""``ring-hash``: consistent hashing on a Ketama ring.

Each backend puts ``160 * weight`` points on a 32-bit ring (rounded to a multiple of 4,
at least 4): for ``j`` in ``0 .. points/4 - 1``, ``md5(f"{id}-{j}")`` gives 4 points,
the little-endian 32-bit words of the digest (libketama). A ring that would pass
``MAX_RING_POINTS`` has every backend's points scaled down by the same factor (Envoy's
``maximum_ring_size``): weights up to 10^6 are valid, and 160 * 10^6 points would take
minutes and gigabytes to build. A request's key is its routing key (else its client
address, else its request id, which spreads keyless requests like random); its point
is the first 4 bytes of ``md5(key)``, little-endian.
The request goes to the owner of the first ring point at or clockwise after it,
skipping points of backends that are not eligible (the next eligible point).

The ring holds every backend in the pool, available or not, and is rebuilt only when
the membership or a weight changes, so an ejection moves only the ejected backend's
keys, and a backend leaving the pool moves about 1/N of them. Pick: O(log(160 n))
bisect plus the skip. Source: R. Jones, libketama (2007); Karger et al., 1997.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .options import check


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class RingHashConfig:
    points_per_weight: int = 160

    def __post_init__(self) -> None:
        check(
            4 <= self.points_per_weight <= 10_000,
            f"points_per_weight={self.points_per_weight}: must be in 4..10000",
        )


MAX_RING_POINTS: Final = 1_000_000
"""Most points on the ring (250 000 md5 digests, under a second to build)."""


def request_key(request: RequestView) -> bytes:
    """The bytes a hash strategy hashes for a request (see the module docstring)."""
    if request.routing_key is not None:
        return request.routing_key
    if request.client_address:
        return request.client_address.encode()
    return request.request_id.to_bytes(8, "little", signed=True)


def ketama_points(backend_id: str, count: int) -> list[int]:
    points: list[int] = []
    for j in range(max(1, round(count / 4))):
        d = hashlib.md5(f"{backend_id}-{j}".encode(), usedforsecurity=False).digest()
        points.extend(int.from_bytes(d[k : k + 4], "little") for k in (0, 4, 8, 12))
    return points


def key_point(key: bytes) -> int:
    return int.from_bytes(hashlib.md5(key, usedforsecurity=False).digest()[:4], "little")


@mypyc_attr(allow_interpreted_subclasses=True)
class RingHash(ConfiguredStrategy[RingHashConfig]):
    name = "ring-hash"
    listed = (3, 4)
    summary = "consistent hash (Ketama): 160 * weight points per backend, next point clockwise"
    Config = RingHashConfig
    uses_routing_key = True

    def _setup(self) -> None:
        self._signature: tuple[tuple[BackendView, float], ...] = ()
        self._points: list[int] = []
        self._owners: list[BackendView] = []

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        # Views compare by identity: a new view with an old id is a new member.
        signature = tuple((b, self.weight(b)) for b in backends)
        if signature == self._signature:
            return
        self._signature = signature
        points: list[int] = []
        owners: list[int] = []
        wanted = [self.config.points_per_weight * w for _, w in signature]
        scale = min(1.0, MAX_RING_POINTS / sum(wanted, 0.0)) if wanted else 1.0
        for b, count in zip(backends, wanted, strict=True):
            mine = ketama_points(b.id, round(count * scale))
            points.extend(mine)
            owners.extend([b.index] * len(mine))
        point_array = np.array(points, dtype=np.uint64)
        owner_array = np.array(owners, dtype=np.int64)
        order = np.lexsort((owner_array, point_array))  # by point, then list order
        self._points = point_array[order].tolist()
        self._owners = [self.by_index[i] for i in owner_array[order].tolist()]

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if not self.avail.items:
            return None
        points, owners = self._points, self._owners
        n = len(points)
        start = bisect_left(points, key_point(request_key(request)))
        for step in range(n):
            owner = owners[(start + step) % n]
            if eligible(owner, request):
                return owner
        return None
