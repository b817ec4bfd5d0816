"""``ip-hash``: nginx ``ip_hash``, exactly.

The key is the client address: the first 3 octets of an IPv4 address, all 16 bytes of
an IPv6 one, and 3 zero bytes when there is none (nginx's pseudo address for non-IP
clients, e.g. unix sockets). Then, from ``h = 89``:

    repeat:  for each key byte: h = (h * 113 + byte) % 6271
             w = h % total_weight; walk the backends in list order, subtracting
             each one's weight while w >= weight: that backend is the peer
             if it is eligible: done; else try again (the hash keeps evolving)
             after 20 failed tries: smooth weighted round robin over the eligible

The walk covers every backend in the pool (down ones too), so the mapping of a client
does not move when another backend goes down. Weights are nginx's integers:
``max(1, round(w))``. The walk is a bisect over prefix sums: O(log n) per try.
A replay (``exclude``) restarts from ``h = 89`` and skips the excluded backends as
nginx skips tried peers. Source: nginx ``ngx_http_upstream_ip_hash_module.c``.
"""

from __future__ import annotations

import ipaddress
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import Final

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .smooth import SmoothWeights

PSEUDO_ADDRESS: Final = b"\x00\x00\x00"
MAX_TRIES: Final = 20


def key_bytes(address: str | None) -> bytes:
    """The bytes nginx hashes for a client address."""
    if not address:
        return PSEUDO_ADDRESS
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return PSEUDO_ADDRESS
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return ip.packed
    v4 = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip
    return v4.packed[:3]  # type: ignore[union-attr]


@mypyc_attr(allow_interpreted_subclasses=True)
class IpHash(ConfiguredStrategy):
    name = "ip-hash"
    listed = (3, 3)
    summary = "nginx ip_hash: h = (h * 113 + octet) % 6271 over 3 octets, h % total weight"

    def _setup(self) -> None:
        self._members: list[BackendView] = []
        self._ends: list[int] = []
        """Cumulative integer weights over the whole pool, in list order."""
        self._fallback = SmoothWeights()
        self._keys: dict[str, bytes] = {}

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        self._members = list(backends)
        self._ends = list(accumulate(max(1, round(self.weight(b))) for b in backends))
        items = self.avail.items
        self._fallback.reset(items, [max(1, round(self.weight(b))) for b in items])

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if not self.avail.items or not self._ends:
            return None
        address = request.client_address or ""
        key = self._keys.get(address)
        if key is None:
            if len(self._keys) > 65536:  # bound the cache of parsed addresses
                self._keys.clear()
            key = self._keys[address] = key_bytes(address)
        total = self._ends[-1]
        h = 89
        for _ in range(MAX_TRIES + 1):
            for byte in key:
                h = (h * 113 + byte) % 6271
            peer = self._members[bisect_right(self._ends, h % total)]
            if eligible(peer, request):
                return peer
        return self._fallback.pick(request)
