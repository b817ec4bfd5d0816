"""Aperture in the simulator: K balancers, each pool over its subset only
(``SimConfig.aperture``, ``balancer/aperture.py``), recorded in the run's manifest."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from lblab.analysis.hard_cases import load_deviation
from lblab.balancer.aperture import ApertureConfig
from lblab.errors import ConfigError
from lblab.simulator.config import ServerEvent, config_from_mapping
from lblab.simulator.connections import connections
from lblab.simulator.output import write_run
from lblab.simulator.run import SimResult, simulate

K, N, SIZE = 32, 16, 12


def _config(**extra: object) -> dict[str, object]:
    return {"strategy": "p2c", "servers": N, "service": "exp:10ms", "rate": 0.7 * N * 100,
            "requests": 40_000, "balancers": K, "picks_every": 0, **extra}  # fmt: skip


def _deviation(result: SimResult) -> float:
    served = result.requests.column("server").to_pandas()
    return load_deviation(served, {name: 1.0 for name in result.servers})


def test_each_balancer_sends_only_to_its_subset_and_the_load_stays_even() -> None:
    aperture = simulate(config_from_mapping(_config(aperture="deterministic")))
    mesh = simulate(config_from_mapping(_config()))
    assert len(aperture.subsets) == K
    # K * aperture / N = 24 servers' worth of arc each; an odd balancer's window starts
    # and ends half-way through a server, so each server has 23 whole windows and 2 halves.
    assert set(connections(aperture).values()) == {K * SIZE // N + 1}
    assert set(connections(mesh).values()) == {K}
    rows = aperture.requests.select(["balancer", "server"]).to_pylist()
    for b, sub in enumerate(aperture.subsets):
        sent = {r["server"] for r in rows if r["balancer"] == f"b{b + 1}"}
        assert sent <= set(sub.ids), b
        assert len(sent) >= len(sub.ids) - 1, b  # it uses its subset (an edge may go unpicked)
    # The load is as even as the full mesh's (measured 0.006-0.008 both).
    assert _deviation(aperture) <= max(0.02, 1.5 * _deviation(mesh)), (
        _deviation(aperture),
        _deviation(mesh),
    )
    # The pool counters sum each server's picks over the balancers that have it.
    assert sum(c["picks"] for c in aperture.counters.values()) >= aperture.requests.num_rows


def test_a_random_aperture_draws_each_balancers_order_from_its_own_stream() -> None:
    cfg = config_from_mapping(_config(aperture="random", aperture_size=4, requests=2000))
    first, again = simulate(cfg), simulate(cfg)
    assert [s.ids for s in first.subsets] == [s.ids for s in again.subsets]
    assert all(len(s.ids) == 4 for s in first.subsets)
    assert len({s.ids for s in first.subsets}) > K // 2  # not one subset for all
    other = simulate(replace(cfg, seed=2))
    assert [s.ids for s in other.subsets] != [s.ids for s in first.subsets]


def test_a_load_banded_aperture_grows_with_its_balancers_load(tmp_path: Path) -> None:
    cfg = config_from_mapping(
        _config(aperture="random", aperture_load_band=True, balancers=4, requests=20_000)
    )
    result = simulate(cfg)
    assert len(result.bands) == 4
    # Each balancer carries 280 requests/s at about 20 ms: some 6 outstanding, so its
    # window, from 1 server, grows to several (its largest is what it connected to).
    for band, sub in zip(result.bands, result.subsets, strict=True):
        assert 3 <= band["mean"] <= band["largest"] == sub.aperture <= N, band
        assert sub.ids == tuple(sorted(sub.order[: sub.aperture], key=lambda i: int(i[1:])))
    rows = result.requests.select(["balancer", "server"]).to_pylist()
    for b, sub in enumerate(result.subsets):
        sent = {r["server"] for r in rows if r["balancer"] == f"b{b + 1}"}
        assert sent <= set(sub.ids), b
    write_run(tmp_path, [result])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    b1 = manifest["phases"][0]["apertures"]["b1"]
    assert b1["load_band"] == result.bands[0] and len(b1["order"]) == N
    assert manifest["config"][0]["aperture"] == {"mode": "random", "size": 1, "load_band": True}


def test_the_manifest_records_every_balancers_subset(tmp_path: Path) -> None:
    cfg = config_from_mapping(_config(aperture="deterministic", requests=500, balancers=4))
    result = simulate(cfg)
    write_run(tmp_path, [result])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    subsets = manifest["phases"][0]["apertures"]
    assert list(subsets) == ["b1", "b2", "b3", "b4"]
    # K = 4 over 16 with 12: width ceil(12/16 * 4) / 4 = 3/4, offsets 0, 1/4, 1/2, 3/4.
    assert subsets["b2"]["servers"] == {f"s{i}": 1.0 for i in range(5, 17)}
    assert subsets["b4"]["servers"] == {f"s{i}": 1.0 for i in [*range(13, 17), *range(1, 9)]}
    assert manifest["config"][0]["aperture"] == {
        "mode": "deterministic",
        "size": 12,
        "load_band": False,
    }


def test_the_done_when_case_k128_over_64_has_25_connections_a_server() -> None:
    # K = 128 over 64 with 12: width 24/128, offsets i/128 over arcs of 2/128: even
    # balancers hold 12 whole servers, odd ones 11 and two halves; 24 windows' worth each.
    subsets = ApertureConfig().subsets([f"s{i + 1}" for i in range(64)], [1.0] * 64, 128,
                                       lambda b: random.Random(b))  # fmt: skip
    held = Counter(m.id for sub in subsets for m in sub.members)
    assert set(held.values()) == {25}
    assert {len(s.members) for s in subsets} == {12, 13}
    shares = dict.fromkeys(held, 0.0)
    for sub in subsets:
        for m in sub.members:
            shares[m.id] += m.share
    assert set(shares.values()) == {24.0}


def test_bad_aperture_settings_are_refused_clearly() -> None:
    with pytest.raises(ConfigError, match="not one of deterministic, random"):
        config_from_mapping(_config(aperture="ring"))
    with pytest.raises(ConfigError, match="give aperture"):
        config_from_mapping(_config(aperture_size=4))
    with pytest.raises(ConfigError, match=r"1\.\.100000"):
        config_from_mapping(_config(aperture="random", aperture_size=0))
    cfg = config_from_mapping(_config(requests=100))
    with pytest.raises(ConfigError, match="joins_later"):
        replace(cfg, aperture=ApertureConfig(), joins_later=("s2",))
    with pytest.raises(ConfigError, match="give aperture"):
        config_from_mapping(_config(aperture_load_band=True))
    with pytest.raises(ConfigError, match="true or false"):
        config_from_mapping(_config(aperture="random", aperture_load_band="yes"))
    with pytest.raises(ConfigError, match="only a random aperture"):
        config_from_mapping(_config(aperture="deterministic", aperture_load_band=True))
    kill = ServerEvent(at=1.0, action="kill", server="s1")
    with pytest.raises(ConfigError, match="timeline"):
        replace(cfg, aperture=ApertureConfig("random", 1, True), timeline=(kill,))
