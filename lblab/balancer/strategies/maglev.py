"""``maglev``: Maglev consistent hashing with a lookup table of prime size M.

Each backend has a preference permutation of the M slots: ``offset = h1(id) % M``,
``skip = h2(id) % (M - 1) + 1``, the j-th preference ``(offset + j * skip) % M``.
Backends take turns, in list order, each filling its next preferred slot that is still
empty, until all M are taken (Maglev paper, Pseudocode 1); each backend ends up with
M/N slots give or take one. A request's key (routing key, else client address, else
request id: see ``ring_hash.request_key``) hashes to slot ``h(key) % M``; if that
slot's backend is not eligible, the next slots in the table are tried in turn.

``h1``/``h2`` are the two 64-bit halves of ``blake2b(id)`` and ``h`` is an 8-byte
``blake2b`` of the key. The table covers every backend in the pool, available or not,
and is rebuilt only when the membership changes: an ejection moves only the ejected
backend's keys; a backend leaving the pool moves about 1/N of them plus a small
disruption. M (option ``table_size``) must be a prime larger than the pool; the
default 65537 is the paper's small table (section 3.4). Build: O(M log M) expected,
about 0.1-0.3 s in Python at 65537; pick: O(1).

Source: D. Eisenbud et al., *Maglev: A Fast and Reliable Software Network Load
Balancer*, NSDI 2016, section 3.4.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.errors import ConfigError

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .options import check
from .ring_hash import request_key

DEFAULT_TABLE_SIZE: Final = 65537


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class MaglevConfig:
    table_size: int = DEFAULT_TABLE_SIZE

    def __post_init__(self) -> None:
        check(
            3 <= self.table_size <= 10_000_019 and is_prime(self.table_size),
            f"table_size={self.table_size}: must be a prime between 3 and 10000019 "
            "(e.g. 251, 65537)",
        )


def preferences(backend_id: str, m: int) -> tuple[int, int]:
    """``(offset, skip)`` of a backend's permutation of the M slots."""
    d = hashlib.blake2b(backend_id.encode(), digest_size=16).digest()
    return int.from_bytes(d[:8], "little") % m, int.from_bytes(d[8:], "little") % (m - 1) + 1


def populate(ids: Sequence[str], m: int) -> list[int]:
    """The lookup table: slot -> position in ``ids`` (Maglev Pseudocode 1)."""
    n = len(ids)
    if n == 0:
        return []
    prefs = [preferences(i, m) for i in ids]
    nexts = [0] * n
    table = [-1] * m
    filled = 0
    while True:
        for i in range(n):
            offset, skip = prefs[i]
            j = nexts[i]
            c = (offset + j * skip) % m
            while table[c] >= 0:
                j += 1
                c = (offset + j * skip) % m
            table[c] = i
            nexts[i] = j + 1
            filled += 1
            if filled == m:
                return table


def key_slot(key: bytes, m: int) -> int:
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % m


@mypyc_attr(allow_interpreted_subclasses=True)
class Maglev(ConfiguredStrategy[MaglevConfig]):
    name = "maglev"
    listed = (3, 5)
    summary = "Maglev table of prime size M (65537): backends take turns filling preferred slots"
    Config = MaglevConfig
    uses_routing_key = True

    def _setup(self) -> None:
        self._signature: tuple[BackendView, ...] = ()
        self._table: list[BackendView] = []

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        signature = tuple(backends)
        if signature == self._signature:
            return
        m = self.config.table_size
        if len(backends) >= m:
            raise ConfigError(
                f"maglev: table_size={m} must exceed the pool size {len(backends)}; "
                "choose a larger prime (e.g. 65537 or 655373)"
            )
        self._signature = signature
        self._table = [backends[i] for i in populate([b.id for b in backends], m)]

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if not self.avail.items:
            return None
        table = self._table
        m = len(table)
        slot = key_slot(request_key(request), m)
        for step in range(m):
            b = table[(slot + step) % m]
            if eligible(b, request):
                return b
        return None
