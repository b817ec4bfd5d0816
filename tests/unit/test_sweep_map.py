"""The winner map's pure parts (``analysis/sweep/map.py``), the notebook's view of a sweep
folder (``analysis/sweep/view.py``) on a hand-written ``sweep.parquet``, and which
notebooks ``lblab notebooks`` offers for which folder (``analysis/nbrun.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lblab.analysis import nbrun
from lblab.analysis.sweep import map as sweep_map
from lblab.analysis.sweep import view as sweep_view
from lblab.errors import ConfigError
from lblab.results import SWEEP_LIVE_TABLE, SWEEP_META, SWEEP_TABLE

# (rate, speed, strategy, seed, p99_ms): at rate 1 p2c wins on both seeds; at rate 2 the
# seeds disagree (p2c on seed 1, rr on seed 2).
ROWS = [
    (1, 1, "p2c", 1, 10.0), (1, 1, "p2c", 2, 11.0), (1, 1, "rr", 1, 20.0), (1, 1, "rr", 2, 21.0),
    (2, 1, "p2c", 1, 10.0), (2, 1, "p2c", 2, 30.0), (2, 1, "rr", 1, 25.0), (2, 1, "rr", 2, 26.0),
]  # fmt: skip


def sweep_table(rows: list[tuple[int, int, str, int, float]] = ROWS) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["rate", "speed", "strategy", "seed", "p99_ms"])
    return frame.assign(throughput_rps=100.0, error=None, key=[f"k{i}" for i in range(len(rows))])


def write_sweep(folder: Path, frame: pd.DataFrame, axes: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(folder / SWEEP_TABLE)
    if axes is not None:
        meta = {"file": "s.toml", "digest": "x", "axes": axes}
        (folder / SWEEP_META).write_text(json.dumps(meta))
    return folder


def test_the_axes_are_the_columns_before_strategy_when_there_is_no_record() -> None:
    assert sweep_map.axes_of(sweep_table()) == ("rate", "speed")
    assert sweep_map.axes_of(pd.DataFrame({"x": [1]})) == ()


def test_axes_are_read_as_the_command_line_writes_them() -> None:
    assert sweep_map.parse_axes("rate, servers.1.speed") == ("rate", "servers.1.speed")
    assert sweep_map.parse_axes("rate") == ("rate",)
    sweep_map.check_pair(("rate", "speed"), ["rate", "speed"])
    with pytest.raises(ConfigError, match=r"--axes rate,nope: give one or two .*\(rate, speed\)"):
        sweep_map.check_pair(("rate", "nope"), ["rate", "speed"])
    with pytest.raises(ConfigError, match="one or two"):
        sweep_map.check_pair(("rate", "speed", "rate"), ["rate", "speed"])
    with pytest.raises(ConfigError, match="--metric 'p42': give one of throughput"):
        sweep_map.metric_column("p42")


def test_seed_winners_name_each_seeds_best() -> None:
    best = sweep_map.seed_winners(sweep_table(), "rate", None, "p99_ms", higher=False)
    assert [tuple(r) for r in best[["rate", "seed", "best"]].itertuples(index=False)] == [
        (1, 1, "p2c"),
        (1, 2, "p2c"),
        (2, 1, "p2c"),
        (2, 2, "rr"),
    ]
    most = sweep_map.seed_winners(sweep_table(), "rate", None, "p99_ms", higher=True)
    assert list(most["best"]) == ["rr", "rr", "rr", "p2c"]


def test_one_map_per_facet_and_none_without_two_strategies() -> None:
    frame = sweep_table([*ROWS, *((r, 2, s, e, v) for r, _, s, e, v in ROWS)])
    maps = sweep_map.all_maps(frame, ["rate", "speed"], [("rate",)], "p99")
    assert [m.facet for m in maps] == [{"speed": 1}, {"speed": 2}]
    assert maps[0].slug == "map-rate-1" and "(speed=1)" in maps[0].title
    assert maps[0].png().startswith(b"\x89PNG")
    (default,) = sweep_map.all_maps(frame, ["rate", "speed"], None, "p99")
    assert default.facet == {} and len(default.cells) == 4  # rate x speed, no facet
    only_p2c = frame[frame["strategy"] == "p2c"]
    assert sweep_map.all_maps(only_p2c, ["rate", "speed"], None, "p99") == []


def test_the_view_of_a_sweep_folder(tmp_path: Path) -> None:
    frame = sweep_table()
    frame.loc[3, ["p99_ms", "error"]] = [None, "ValueError: servers"]
    view = sweep_view.open_sweep(write_sweep(tmp_path / "s", frame, ["rate", "speed"]))
    assert view.axes == ("rate", "speed")
    assert view.swept().loc["strategy", "values"] == "p2c, rr"
    assert view.facts().loc["failed points", "value"] == 1
    failed = view.failed()
    assert isinstance(failed, pd.DataFrame) and list(failed["error"]) == ["ValueError: servers"]
    cells = view.cells("rate")
    assert list(cells.columns[:3]) == ["speed", "rate", "best"]  # the facet first
    assert list(cells["best"]) == ["p2c", "p2c"]
    disagree = view.disagreements("rate")
    assert isinstance(disagree, pd.DataFrame)
    assert list(disagree["rate"]) == [2]
    assert disagree.loc[0, "best by seed"] == "1: p2c, 2: rr"
    assert disagree.loc[0, "best's range"] == "10 to 30"
    assert view.margins()._repr_png_().startswith(b"\x89PNG")
    assert "key" not in view.table()
    with pytest.raises(ConfigError, match="--axes nope"):
        view.winner_map("nope")
    # Drawn once per pair and metric: the notebook's calls share the figures.
    assert view.maps("rate")[0].figure is view.maps(("rate",))[0].figure
    assert view.maps("rate", "throughput")[0].figure is not view.maps("rate")[0].figure
    assert "No live check" in repr(view.live())


def test_the_view_shows_the_live_checks_and_names_a_damaged_table(tmp_path: Path) -> None:
    folder = write_sweep(tmp_path / "s", sweep_table(), ["rate", "speed"])
    rows = []
    for strategy, sim, meas in (("p2c", 10.0, 14.0), ("rr", 20.0, 12.0)):
        base = {"rate": 1, "speed": 1, "strategy": strategy, "seed": 1, "cell": "c"}
        rows.append(base | {"source": "simulated", "p99_ms": sim, "checks": None})
        rows.append(base | {"source": "measured", "p99_ms": meas, "checks": "pass"})
    pd.DataFrame(rows).to_parquet(folder / SWEEP_LIVE_TABLE)
    live = sweep_view.open_sweep(folder).live()
    assert isinstance(live, pd.DataFrame)
    assert live[["best", "measured_best", "agrees"]].values.tolist() == [["p2c", "rr", False]]
    (folder / SWEEP_LIVE_TABLE).write_bytes(b"garbage")
    with pytest.raises(ConfigError, match=r"live-check\.parquet is not a readable live check"):
        sweep_view.open_sweep(folder).live()


def test_a_sweep_of_strategies_alone_says_why_there_is_no_map(tmp_path: Path) -> None:
    frame = sweep_table().drop(columns=["rate", "speed"])
    view = sweep_view.open_sweep(write_sweep(tmp_path / "s", frame))
    assert view.axes == ()
    assert "varies only strategy and seed" in repr(view.winner_map())


def test_which_notebooks_a_folder_offers(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "sweep", sweep_table(), ["rate", "speed"])
    assert nbrun.notebooks_for(sweep) == nbrun.SWEEP_NOTEBOOKS == ("sweep",)
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    (run / SWEEP_TABLE).write_text("")  # a run's manifest wins over a stray table
    assert nbrun.notebooks_for(run) == nbrun.NOTEBOOKS
    (tmp_path / "parts_only" / "parts").mkdir(parents=True)
    assert nbrun.notebooks_for(tmp_path / "parts_only") == nbrun.NOTEBOOKS
    half = tmp_path / "half"
    half.mkdir()
    (half / SWEEP_META).write_text("{}")
    with pytest.raises(ConfigError, match=r"has not finished.*rerun its `lblab sweep FILE"):
        nbrun.notebooks_for(half)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"neither a run .* nor a sweep"):
        nbrun.notebooks_for(tmp_path / "empty")


def test_only_is_checked_against_the_folders_notebooks() -> None:
    assert nbrun.pick_notebooks(nbrun.SWEEP_NOTEBOOKS, None) == ("sweep",)
    assert nbrun.pick_notebooks(nbrun.NOTEBOOKS, ["cpu", "cpu"]) == ("cpu",)
    with pytest.raises(ConfigError, match=r"--only cpu: .*sweep folder; choose from sweep"):
        nbrun.pick_notebooks(nbrun.SWEEP_NOTEBOOKS, ["cpu"])
    with pytest.raises(ConfigError, match=r"--only sweep: .*run folder.*opens a sweep's --out"):
        nbrun.pick_notebooks(nbrun.NOTEBOOKS, ["sweep"])
    with pytest.raises(ConfigError, match="--only nope: no such notebook"):
        nbrun.pick_notebooks(nbrun.NOTEBOOKS, ["nope"])
