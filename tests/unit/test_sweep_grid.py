"""Sweep files: grid expansion, point identity, a clear line for each bad file; the
folder's rules (another file refused, failed points rerun); the winners of a cell."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lblab.analysis.sweep import winners
from lblab.errors import ConfigError
from lblab.sweep.grid import load_sweep, parse_sweep
from lblab.sweep.point import run_point
from lblab.sweep.run import POINTS, finished, sweep_folder, write_point

BASE: dict[str, Any] = {
    "requests": 200,
    "rate": 100,
    "servers": [{"count": 3}, {"count": 1, "speed": 1}],
}


def sweep(**parts: Any) -> Any:
    return parse_sweep({"base": BASE, **parts})


def test_the_grid_is_the_cartesian_product_times_the_seeds() -> None:
    s = sweep(
        grid={"strategy": ["p2c", "rr", "lc"], "rate": [50, 100], "servers.1.speed": [1, 4]},
        seeds=2,
    )
    assert s.axes == ("rate", "servers.1.speed")
    assert len(s.points) == 3 * 2 * 2 * 2
    values = [dict(p.values) for p in s.points]
    assert values[0] == {"strategy": "p2c", "rate": 50, "servers.1.speed": 1, "seed": 1}
    assert {v["seed"] for v in values} == {1, 2}
    point = s.points[-1]
    assert point.settings["servers"][1] == {"count": 1, "speed": 4}  # the dotted key, set
    assert point.settings["strategy"] == "lc" and point.settings["rate"] == 100
    assert BASE["servers"][1]["speed"] == 1  # the base is not changed
    assert len({p.key for p in s.points}) == len(s.points)


def test_explicit_points_a_seed_axis_and_nested_tables() -> None:
    s = sweep(
        grid={"strategy": ["lc"], "seed": [7, 9], "strategy_options.tie": ["random"]},
        points=[
            {"strategy": "rr", "rate": 80},
            {"strategy": "lc", "strategy_options.tie": "random"},
        ],
    )
    # 1 grid combination x 2 seeds, the first explicit point x 2, the second is the grid's
    assert len(s.points) == 4
    assert s.axes == ("strategy_options.tie", "rate")
    assert {p.values["seed"] for p in s.points} == {7, 9}
    assert s.points[0].settings["strategy_options"] == {"tie": "random"}


def test_no_grid_is_the_base_alone_with_its_seed() -> None:
    s = parse_sweep({"base": {**BASE, "seed": 5}})
    assert [p.values for p in s.points] == [{"seed": 5}]


def test_a_point_is_known_by_its_settings_not_by_where_it_sits() -> None:
    a = sweep(grid={"strategy": ["p2c", "rr"], "rate": [50, 100]})
    b = sweep(grid={"rate": [100, 50, 70], "strategy": ["rr", "p2c"]})
    keys_a = {tuple(sorted(p.values.items())): p.key for p in a.points}
    keys_b = {tuple(sorted(p.values.items())): p.key for p in b.points}
    assert all(keys_b[v] == k for v, k in keys_a.items())  # same settings, same key
    other_base = parse_sweep({"base": {**BASE, "requests": 300}, "grid": {"rate": [50]}})
    assert other_base.points[0].key not in set(keys_a.values())
    assert a.digest != b.digest  # but the files differ


def test_the_file_digest_ignores_layout(tmp_path: Path) -> None:
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    one.write_text('[base]\nrequests = 200\nrate = 100\n[grid]\nstrategy = ["p2c", "rr"]\n')
    two.write_text(
        '# a comment\n[grid]\nstrategy = [ "p2c","rr" ]\n[base]\nrate = 100\nrequests = 200\n'
    )
    assert load_sweep(one).digest == load_sweep(two).digest


@pytest.mark.parametrize(
    ("parts", "words"),
    [
        ({"grid": {"rat": [1, 2]}}, ["grid.rat", "'rat' is not a simulate setting", "rate"]),
        ({"grid": {"rate": []}}, ["grid.rate", "empty list", "give at least one value"]),
        ({"grid": {"rate": 1000}}, ["grid.rate", "1000 is not a list", "rate = [1000]"]),
        ({"grid": {"strategy": "p2c"}}, ["grid.strategy", 'strategy = ["p2c"]']),
        ({"points": [{"speed": 2}]}, ["points[0].speed", "not a simulate setting"]),
        ({"grids": {}}, ["unknown key 'grids'", "base, grid, points, seeds"]),
        ({"grid": {"servers.5.speed": [1]}}, ["grid.servers.5.speed", "list of 2", "0..1"]),
        ({"grid": {"rate": [100, -5]}}, ["rate=-5", "rate"]),
        ({"grid": {"strategy": ["p2c", "nope"]}}, ["strategy='nope'", "unknown strategy"]),
        ({"grid": {"seed": [1]}, "seeds": 2}, ["seeds = N or a grid.seed axis"]),
    ],
)
def test_a_bad_file_is_one_clear_line(parts: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        sweep(**parts)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def frame(rows: list[tuple[str, int, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["strategy", "rate", "seed", "p99_ms"])


def test_winners_best_margin_and_unresolved() -> None:
    rows = [
        # rate 1: p2c wins clearly on both seeds
        ("p2c", 1, 1, 10.0), ("p2c", 1, 2, 11.0), ("rr", 1, 1, 20.0), ("rr", 1, 2, 21.0),
        # rate 2: p2c best on the mean, rr on seed 2: the seeds disagree
        ("p2c", 2, 1, 10.0), ("p2c", 2, 2, 30.0), ("rr", 2, 1, 25.0), ("rr", 2, 2, 26.0),
        # rate 3: p2c best on both seeds, but the ranges overlap
        ("p2c", 3, 1, 10.0), ("p2c", 3, 2, 14.0), ("rr", 3, 1, 11.0), ("rr", 3, 2, 15.0),
    ]  # fmt: skip
    cells = winners(frame(rows), "rate", None, "p99_ms", higher=False).set_index("rate")
    assert list(cells["best"]) == ["p2c", "p2c", "p2c"]
    assert cells.loc[1, "margin"] == pytest.approx(1 - 10.5 / 20.5)
    assert not cells.loc[1, "unresolved"]
    assert cells.loc[2, "why"] == "seeds disagree on the best"
    assert cells.loc[3, "why"] == "runner-up's seed range overlaps"
    higher = winners(frame(rows), "rate", None, "p99_ms", higher=True).set_index("rate")
    assert higher.loc[1, "best"] == "rr"  # throughput-like: the highest wins


def test_a_folder_refuses_another_file_unless_forced(tmp_path: Path) -> None:
    source = tmp_path / "sweep.toml"
    source.write_text('[base]\nrequests = 200\nrate = 100\n[grid]\nstrategy = ["p2c", "rr"]\n')
    out = tmp_path / "out"
    sweep_folder(out, load_sweep(source), source, force=False)
    sweep_folder(out, load_sweep(source), source, force=False)  # the same file: fine
    source.write_text('[base]\nrequests = 200\nrate = 100\n[grid]\nstrategy = ["p2c", "lc"]\n')
    changed = load_sweep(source)
    with pytest.raises(ConfigError, match=r"holds a sweep of a different file.*--force"):
        sweep_folder(out, changed, source, force=False)
    sweep_folder(out, changed, source, force=True)
    assert json.loads((out / "sweep.json").read_text())["digest"] == changed.digest


def test_a_point_with_an_error_is_not_finished(tmp_path: Path) -> None:
    s = sweep(grid={"strategy": ["p2c", "rr"]})
    ok, failed = s.points
    (tmp_path / POINTS).mkdir()
    write_point(tmp_path, s, ok, {"p99_ms": 1.0, "error": None})
    write_point(tmp_path, s, failed, {"p99_ms": None, "error": "ValueError: boom"})
    assert finished(tmp_path) == {ok.key}


def test_a_point_that_raises_is_a_row_with_its_error() -> None:
    row = run_point({**BASE, "servers": "many"})
    assert row["error"].startswith("ConfigError: servers")
    assert math.isnan(row["p99_ms"]) and row["wall_s"] >= 0 and row["worker"]
