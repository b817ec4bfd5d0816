"""The aperture's ring math (``balancer/aperture.py``) against Finagle's definitions,
worked by hand, and Finagle's own test vectors (``WeightedApertureTest.scala``)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.balancer.aperture import (
    ApertureConfig,
    BandedWindow,
    LoadBand,
    aperture_width,
    banded_windows,
    coordinate,
    ring_weights,
    subset,
)
from lblab.errors import ConfigError

F = Fraction


def _ids(n: int) -> list[str]:
    return [f"s{i + 1}" for i in range(n)]


def test_coordinate_is_finagles_from_instance_id() -> None:
    # FromInstanceId(2, 10): unitWidth 1/10, offset (2 * 1/10) % 1.
    assert coordinate(2, 10).offset == F(1, 5)
    assert coordinate(2, 10).unit_width == F(1, 10)
    assert coordinate(0, 1).offset == 0 and coordinate(0, 1).unit_width == 1
    for bad in ((0, 0), (3, 3), (-1, 4)):
        with pytest.raises(ConfigError, match="aperture"):
            coordinate(*bad)


def test_width_is_a_whole_number_of_balancer_units() -> None:
    # dApertureWidth(1/K, 1/N, L) = min(1, ceil(L (1/N) / (1/K)) / K).
    assert aperture_width(F(1, 128), F(1, 64), 12) == F(24, 128)  # exactly 12 servers
    assert aperture_width(F(1, 8), F(1, 64), 12) == F(2, 8)  # ceil(1.5) = 2 units: 16 servers
    assert aperture_width(F(1, 5), F(1, 16), 12) == F(4, 5)  # ceil(3.75) = 4 units
    assert aperture_width(F(1, 4), F(1, 10), 10) == 1  # ceil(2.5) = 3 units: capped at the ring
    assert aperture_width(F(1, 1), F(1, 3), 3) == 1


def test_ring_weights_count_the_edges_in_part() -> None:
    # 16 equal servers (arcs of 1/16), balancer 1 of 32: [1/32, 1/32 + 24/32).
    arcs = ring_weights([1.0] * 16, F(1, 32), F(24, 32))
    assert arcs[0] == F(1, 32)  # half of s1's arc
    assert arcs[1:12] == [F(1, 16)] * 11
    assert arcs[12] == F(1, 32)  # half of s13's
    assert arcs[13:] == [0, 0, 0]
    assert sum(arcs) == F(24, 32)


def test_ring_weights_wrap_round_the_ring() -> None:
    # 4 equal servers, offset 3/5, width 4/5: [0.6, 1.4) is s3's last 0.15, s4, s1, s2's 0.15.
    arcs = ring_weights([1.0] * 4, F(3, 5), F(4, 5))
    assert arcs == [F(1, 4), F(3, 20), F(3, 20), F(1, 4)]
    # A window wider than every arc but one: a heavy server holds the whole window.
    assert ring_weights([1.0, 8.0, 1.0], F(1, 5), F(1, 5)) == [0, F(1, 5), 0]


# WeightedApertureTest.scala's raw weights (Rng(123), 0.1 * nextDouble()).
TEN = [0.08754127852514175, 0.07160485112997249, 0.007191702249367171, 0.07962609718390336,
       0.05787169373422368, 0.09081256181340881, 0.014891457880475457, 0.0975219897302887,
       0.006559603048899776, 0.0069517882499888]  # fmt: skip
FIFTEEN = [0.06818127601781632, 0.02676535334991952, 0.024259669941850928,
           0.060227644665411986, 0.021662557088166313, 0.04581934074401264,
           0.008902600511190118, 0.012225295738506748, 0.03381119880745816,
           0.09320068787692642, 0.06778865989313106, 1.8821268751749722e-4,
           0.04998637327300792, 0.09808325343250059, 0.08018058428232361]  # fmt: skip


def _members(weights: list[float], instance: int, instances: int) -> list[int]:
    return [m.index for m in subset("deterministic", _ids(len(weights)), weights,
                                    instance, instances).members]  # fmt: skip


def test_finagles_own_vectors() -> None:
    # "adjustWeightsWithCoord can wrap around": 10 nodes, FromInstanceId(1, 4): all of them.
    assert _members(TEN, 1, 4) == list(range(10))
    # "creates reasonable subsets": 15 nodes, (1, 5): indices 3..14; (0, 5): 0..13.
    assert _members(FIFTEEN, 1, 5) == list(range(3, 15))
    assert _members(FIFTEEN, 0, 5) == list(range(14))
    s = subset("deterministic", _ids(15), FIFTEEN, 0, 5)
    assert s.width == 0.8
    total = sum(FIFTEEN)
    assert sum(m.weight for m in s.members) == pytest.approx(0.8 * total)


def test_a_subset_gives_its_members_their_share_of_weight() -> None:
    s = subset("deterministic", _ids(16), [2.0] * 16, 1, 32)
    assert s.ids == tuple(f"s{i}" for i in range(1, 14))
    assert [m.share for m in s.members] == [0.5] + [1.0] * 11 + [0.5]
    assert [m.weight for m in s.members] == [1.0] + [2.0] * 11 + [1.0]
    assert s.describe()["servers"]["s13"] == 0.5
    assert (s.offset, s.width, s.aperture) == (1 / 32, 0.75, 12)


def test_sizes_finagle_refuses_are_refused() -> None:
    with pytest.raises(ConfigError, match="above 1"):
        subset("deterministic", _ids(4), [1.0] * 4, 0, 2, size=1)
    with pytest.raises(ConfigError, match="not one of"):
        subset("ring", _ids(4), [1.0] * 4, 0, 2)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="random stream"):
        subset("random", _ids(4), [1.0] * 4, 0, 2, size=2)
    # A size above the servers is the servers (min(size, N)).
    assert subset("deterministic", _ids(4), [1.0] * 4, 0, 2, size=12).aperture == 4


def test_random_aperture_is_the_first_servers_in_token_order() -> None:
    # One 32-bit token per server from the stream (ApertureNode.token), sorted by token.
    s = subset("random", _ids(8), [1.0] * 8, 0, 4, size=3, rng=random.Random(7))
    tokens = _tokens(7, 8)
    order = sorted(range(8), key=lambda i: tokens[i])
    assert [m.index for m in s.members] == sorted(order[:3])
    assert all(m.share == 1.0 for m in s.members)
    assert (s.offset, s.width) == (0.0, 3 / 8)
    # Another instance, another stream: another subset (the instance does not place it).
    other = subset("random", _ids(8), [1.0] * 8, 1, 4, size=3, rng=random.Random(8))
    assert other.ids != s.ids


def _tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(32) for _ in range(n)]


# No wall-clock deadline: up to 140 instances' windows over 70 servers take 0.2-0.3 s on
# this 2-core VM, near Hypothesis's 200 ms default; the property, not the time, is checked
# here (speed is the benchmarks' job).
@settings(deadline=None)
@given(
    servers=st.integers(1, 70),
    instances=st.integers(1, 140),
    size=st.integers(2, 20),
    weights=st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=70, max_size=70),
)
def test_the_windows_cover_every_server_evenly(
    servers: int, instances: int, size: int, weights: list[float]
) -> None:
    w = weights[:servers]
    subsets = [subset("deterministic", _ids(servers), w, i, instances, size=size)
               for i in range(instances)]  # fmt: skip
    logical = min(size, servers)
    for s in subsets:  # each window holds at least L servers' worth of arc, sums to its width
        assert s.width >= logical / servers - 1e-12
        arcs = sum(m.weight for m in s.members) / sum(w)
        assert arcs == pytest.approx(s.width)
    if instances * logical >= servers:  # every server is covered, all equally
        covered: dict[str, float] = {}
        for s in subsets:
            for m in s.members:
                covered[m.id] = covered.get(m.id, 0.0) + m.share
        assert set(covered) == set(_ids(servers))
        laps = instances * subsets[0].width  # the windows tile the ring this many times
        assert all(c == pytest.approx(laps) for c in covered.values()), covered


def test_load_band_follows_finagles_rule() -> None:
    band = LoadBand(4, smooth_window_s=0.0)
    steps = [band.update(d, t) for t, d in enumerate([1, 1, 1, 1, -1, -1, -1, -1])]
    # outstanding 1: 1/1 = 1.0 in the band; 2: 2/1 >= 1.125, widen to 2; 3: 1.5, widen to
    # 3; 4: 1.33, widen to 4; 3: 0.75 <= 0.875, narrow to 3; 2: 0.67, 2; 1: 0.5, 1; 0: 1.
    assert steps == [1, 2, 3, 4, 3, 2, 1, 1]


def test_load_band_smooths_over_its_window() -> None:
    band = LoadBand(8, smooth_window_s=10.0)
    band.update(1, 0.0)  # the first observation is the average: 1.0, in the band
    assert band.update(1, 10.0) == 2  # ema = 2 (1 - e^-1) + 1 e^-1 = 1.632 >= 1.125
    assert band._ema == pytest.approx(2 - 1 / 2.718281828459045)
    with pytest.raises(ValueError, match="back"):
        band.update(-1, 5.0)
    with pytest.raises(ConfigError, match="band"):
        LoadBand(4, low=1.2, high=1.1)


def test_a_banded_window_takes_the_next_server_in_its_order_and_gives_back_the_last() -> None:
    window = BandedWindow(["s3", "s1", "s4", "s2"], LoadBand(4, smooth_window_s=0.0))
    assert window.members == ("s3",)
    # Outstanding 1, 2, 3, 2, 1 at t = 0..4 (no smoothing): sizes 1, 2, 3, 2, 1 (as in
    # test_load_band_follows_finagles_rule): s1 joins, s4 joins, s4 leaves, s1 leaves.
    moves = [window.observe(n, float(t)) for t, n in enumerate([1, 2, 3, 2, 1])]
    assert moves == [(None, None), ("s1", None), ("s4", None), (None, "s4"), (None, "s1")]
    assert (window.size, window.largest) == (1, 3)
    # Sizes 1 over [0, 1), 2 over [1, 2), 3 over [2, 3), 2 over [3, 4), 1 from 4 to 6.
    assert window.mean_size(6.0) == pytest.approx((1 + 2 + 3 + 2 + 1 + 1) / 6)


def test_banded_windows_draw_the_random_apertures_order() -> None:
    config = ApertureConfig(mode="random", size=2, load_band=True)
    windows = banded_windows(config, _ids(8), [1.0] * 8, 3, random.Random)
    fixed = ApertureConfig(mode="random", size=8).subsets(_ids(8), [1.0] * 8, 3, random.Random)
    assert [w.order for w in windows] == [s.order for s in fixed]
    assert all(w.members == w.order[:2] for w in windows)  # from minAperture (2 here)
    with pytest.raises(ConfigError, match="only a random aperture"):
        ApertureConfig(mode="deterministic", load_band=True)
