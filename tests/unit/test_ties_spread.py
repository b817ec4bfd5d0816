"""Ties never favour the first backend (issue 43): equal idle servers at low load get an
even share from every built-in that breaks its ties, and the few that follow a paper's
"first in list order" say so (``takes_first_on_ties``) and are exactly the ones listed.

The load: 4 equal servers (one worker, exponential 10 ms), Poisson at 20 requests/s, 5 %
of their capacity, so nearly every pick finds several idle servers tied at the least
load. An even spread is 25 % each; the bound of 30 % leaves 2,000 requests' multinomial
noise (about 1 point) and catches the measured bias (lc with ``tie = "first"`` sent 84 %
to one server, lrt 71 %, least-time 42 %).
"""

from __future__ import annotations

from collections import Counter

import pytest

from lblab.balancer.strategies.registry import make_strategy, strategy_names
from lblab.simulator.config import config_from_mapping
from lblab.simulator.run import simulate

REQUESTS = 2_000
MOST = 0.30
TAKE_FIRST = {"first", "dynamic", "dynamic-immediate", "dynamic-hybrid"}
"""The built-ins whose definition breaks ties by list order (docs/ALGORITHMS.md); this set
may only shrink."""
NOT_BY_LOAD = {"ip-hash", "ring-hash", "maglev", "lease"}
"""The hashes route by the request's key, which this load does not give; lease sends only
where a server granted a lease, and these servers grant none."""
UNEVEN = {
    "dwrr": "s4 3.7 %, s1 37.7 %: its CPU-derived weights drift apart over equal idle servers",
    "rsocket-weighted": "17-32 %: its latency predictor keeps apart servers that are equal",
    "prequal": "s2 0.3 %, s4 37.6 %: at low load every probe is cold, the pick is the least "
    "latency, and an idle server's latency estimate never refreshes",
    "lrt": "s2 0.05 %, s4 52 %: not ties (it breaks those at random) but its signal: the "
    "least mean service time among idle servers wins, and a server that measured slow "
    "early is never tried again to correct it",
    "least-time": "19-37 %: the least latency EWMA among idle servers wins, as for lrt",
    "c3": "s3 8.4 %, s4 34 %: equal ranks go at random now, but its EWMAs of latency and "
    "service time rank idle servers apart, as for lrt",
    "gmsr": "s3 39 %, s1 18 %: its signal, not ties (those go at random): at an idle server "
    "the marginal is its measured one-at-a-time rate mu(1), so the fastest-looking idle "
    "server wins beyond the tolerance band, and an idle server's estimate does not refresh",
}
"""Known to spread unevenly here (seed 3), not by ties to the first: open in issue 43."""


def _spread(strategy: str, seed: int = 3, **options: str) -> dict[str, float]:
    config = config_from_mapping(
        {"strategy": strategy, "strategy_options": options, "servers": 4,
         "requests": REQUESTS, "rate": 20, "service": "exp:10ms", "seed": seed}
    )  # fmt: skip
    served = Counter(simulate(config).requests.column("server").to_pylist())
    return {s: n / REQUESTS for s, n in sorted(served.items())}


SPREADING = [
    pytest.param(s, marks=pytest.mark.xfail(strict=False, reason=UNEVEN[s])) if s in UNEVEN else s
    for s in strategy_names()
    if s not in TAKE_FIRST | NOT_BY_LOAD
]


@pytest.mark.parametrize("strategy", SPREADING)
def test_equal_idle_servers_get_an_even_share(strategy: str) -> None:
    shares = _spread(strategy)
    assert len(shares) == 4 and max(shares.values()) <= MOST, shares


SEEDS = 16


@pytest.mark.parametrize("strategy", sorted(UNEVEN))
def test_the_uneven_ones_do_not_favour_the_first_either(strategy: str) -> None:
    """Their spread is uneven by their signal, not by list order: over seeds, the first
    backend's mean share is an even one (measured 0.20-0.26 over 32 seeds; the ones that
    take the first on ties give it 0.6-0.84). 16 seeds of lock-ins of 0-65 % each leave a
    standard error of about 0.04."""
    first = [_spread(strategy, seed).get("s1", 0.0) for seed in range(1, SEEDS + 1)]
    assert sum(first) / SEEDS <= 0.34, first


@pytest.mark.parametrize(("strategy", "most"), [("lc", 0.6), ("lrt", 0.5), ("least-time", 0.35)])
def test_the_first_on_ties_only_when_asked(strategy: str, most: float) -> None:
    assert max(_spread(strategy, tie="first").values()) > most
    assert make_strategy(strategy, {"tie": "first"}).takes_first_on_ties()
    assert not make_strategy(strategy).takes_first_on_ties()


def test_only_the_listed_built_ins_take_the_first_on_ties() -> None:
    declared = {s for s in strategy_names() if make_strategy(s).takes_first_on_ties()}
    assert declared == TAKE_FIRST
    # c3 ranks by EWMAs, so exact ties are rare here; its first-on-ties rule is an option
    assert make_strategy("c3", {"tie": "first"}).takes_first_on_ties()
