"""Spot checks against live: a few of a sweep's cells, run as experiments on this machine.

``lblab sweep FILE --out DIR --live-check N`` picks N cells of the finished sweep near
the winner boundaries and runs each live, with the local testbed: the cell's simulated
best and runner-up, as one experiment (``lblab run --config``) of the cell's servers and
load. Then it simulates the very same settings again (the same request count as the
live run, the same seed) and writes both, measured and simulated, to
``DIR/live-check.parquet``; the sweep's report shows them beside the maps.

Which cells. Every cell (one setting of all the axes) gets its best and runner-up on
the report's metric, over the seeds (``analysis.sweep.map.winners``). Cells that this
machine can run live (``live_obstacle``) are ranked: first those on a boundary (a
neighbour along one axis has another best), then by the smallest lead of the best over
the runner-up: where the map is least sure, a live run says most.

What a cell becomes live (``experiment``): one ``lblab server`` per simulated server,
sleeping its service time (``--delay-ms`` the model's mean over the server's speed;
``--delay-dist exp`` for the ``exp:`` model), the group's workers, capacity and weight;
open arrivals at the point's rate, Poisson or constant, for ``min(requests, rate x
--live-seconds)`` requests; the smallest request shape (``sp+sr``: its JSON work is a
fraction of a millisecond beside the slept service). Settings the live testbed has no
counterpart for make a cell ineligible, with the reason, rather than run as something
else.

The folder: ``DIR/live-check/<cell>/`` holds the experiment file, the run and its log;
a cell's rows are written (``DIR/live-check/<cell>/rows.parquet``) the moment it is
done, so a killed check loses only the cell it was running and a rerun runs only the
missing ones.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lblab.analysis.load import ResultsError, parquet_errors
from lblab.analysis.sweep import metric_column, winners
from lblab.experiment.toml_writer import dumps_toml
from lblab.files import make_folder, write_bytes_atomically
from lblab.manifest import load
from lblab.procs import dies_with_this_process, lblab_command
from lblab.results import MANIFEST, SWEEP_LIVE_TABLE, write_table_atomically
from lblab.simulator.config import config_from_mapping
from lblab.simulator.service import Exponential, Fixed
from lblab.simulator.workload import OpenArrivals
from lblab.sweep.grid import Point, Sweep, canonical, point_key
from lblab.sweep.point import FIGURES, run_point, summarize
from lblab.sweep.run import cell_value

LIVE_MAX_SERVERS = 8
"""Most servers a live check starts (each is a process with its agent beside it)."""
LIVE_MAX_BALANCERS = 4
LIVE_MAX_RATE = 400.0
"""Requests per second a live check sends at most: the harness (balancer, Locust) costs
about 0.3 ms of CPU per request on this 2-core machine, and must stay well below the
machine it shares with the servers."""
LIVE_MIN_SERVICE_MS = 5.0
"""Shortest mean service a live server sleeps: below it the harness's own time per
request (about a millisecond through the balancer) is no longer small beside it."""
CHECK_FOLDER = "live-check"
ROWS = "rows.parquet"
SETTLE_S = 120.0
"""Time a live run gets past its sending time per strategy (start, drain, write)."""


class LiveCheckFailed(RuntimeError):
    """A live run did not finish or passed its deadline; the message names its log."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One setting of all the sweep's axes, with what the sweep found there."""

    values: Mapping[str, Any]
    best: str
    runner_up: str
    margin: float
    boundary: bool
    points: Mapping[str, Point]
    """strategy -> its point at the cell's first seed."""

    @property
    def key(self) -> str:
        return point_key(dict(self.values))


def live_obstacle(settings: Mapping[str, Any]) -> str | None:
    """Why the local testbed cannot run ``settings`` as they were simulated, or None."""
    config = config_from_mapping(settings)
    arrivals = config.arrivals
    if not isinstance(arrivals, OpenArrivals):
        return "its arrivals are not open at a rate (closed users and traces are not checked)"
    if arrivals.rate > LIVE_MAX_RATE:
        return f"rate {arrivals.rate:g}/s is over the {LIVE_MAX_RATE:g}/s a live check sends"
    if config.server_count > LIVE_MAX_SERVERS:
        return f"{config.server_count} servers; a live check starts at most {LIVE_MAX_SERVERS}"
    if config.balancers > LIVE_MAX_BALANCERS:
        return f"{config.balancers} balancers; a live check starts at most {LIVE_MAX_BALANCERS}"
    if config.routing_keys:
        return "routing keys are drawn by the simulator only"
    if config.client_delay or config.server_delay or config.report_delay:
        return "network and report delays are simulated only"
    for group in config.servers:
        if not isinstance(group.service, Fixed | Exponential):
            return f"service {group.service.spec()}: live servers sleep fixed or exp: times"
        if group.delay or group.cpu_quota is not None:
            return "a server group's delay or CPU quota is simulated only"
        if group.service.mean_s * 1000 / group.speed < LIVE_MIN_SERVICE_MS:
            return (
                f"service {group.service.spec()} at speed {group.speed:g} is under "
                f"{LIVE_MIN_SERVICE_MS:g} ms, within the harness's own time per request"
            )
    return None


def cells(frame: pd.DataFrame, sweep: Sweep, metric: str) -> list[Cell]:
    """Every cell of the sweep where two strategies or more ran without error. Rows
    are matched to the sweep's points by key, so a cell's values are the file's own."""
    column, higher = metric_column(metric)
    by_key = {p.key: p for p in sweep.points}
    good = frame[frame["error"].isna()] if "error" in frame else frame
    good = good[good["key"].isin(by_key)]
    if good.empty:
        return []
    axes = list(sweep.axes)
    labelled = good.assign(cell_label=[_label(by_key[k], axes) for k in good["key"]])
    found = winners(labelled, "cell_label", None, column, higher)
    found = found[found["runner_up"].notna()]
    firsts: dict[str, dict[str, Point]] = {}
    for point in sweep.points:  # the first seed of each strategy in each cell
        firsts.setdefault(_label(point, axes), {}).setdefault(point.strategy, point)
    steps = {a: sorted({_label_value(p, a) for p in sweep.points}, key=_sortable) for a in axes}
    best = dict(zip(found["cell_label"], found["best"], strict=True))
    out = []
    for r in found.itertuples(index=False):
        values = dict(zip(axes, json.loads(r.cell_label), strict=True))
        near = [best.get(n) for n in _neighbours(values, steps)]
        out.append(
            Cell(
                values=values,
                best=str(r.best),
                runner_up=str(r.runner_up),
                margin=float(r.margin),
                boundary=any(b is not None and b != r.best for b in near),
                points=firsts.get(r.cell_label, {}),
            )
        )
    return out


def pick(found: Sequence[Cell], n: int) -> tuple[list[Cell], dict[str, str]]:
    """The ``n`` cells to check (boundary first, then the smallest lead) and, for the
    cells left out because they cannot run live, why (cell key -> reason)."""
    runnable, skipped = [], {}
    for cell in found:
        points = [cell.points.get(cell.best), cell.points.get(cell.runner_up)]
        if None in points:
            skipped[cell.key] = "its points are not in the sweep file any more"
            continue
        why = next((w for p in points if p and (w := live_obstacle(p.settings))), None)
        if why:
            skipped[cell.key] = why
        else:
            runnable.append(cell)
    runnable.sort(key=lambda c: (not c.boundary, _finite(c.margin)))
    return runnable[:n], skipped


def experiment(cell: Cell, seconds: float) -> dict[str, Any]:
    """The experiment file (as a dict for ``lblab run --config``) of ``cell``: its best
    and runner-up on its servers and load, sending ``min(requests, rate x seconds)``."""
    config = config_from_mapping(cell.points[cell.best].settings)
    assert isinstance(config.arrivals, OpenArrivals)  # live_obstacle let it through
    count = max(1, min(config.requests, round(config.arrivals.rate * seconds)))
    servers: list[dict[str, Any]] = []
    weights: dict[str, float] = {}
    for group in config.servers:
        for _ in range(group.count):
            sid = f"s{len(servers) + 1}"
            servers.append(
                {
                    "id": sid,
                    "workers": group.workers,
                    "delay_ms": round(group.service.mean_s * 1000 / group.speed, 6),
                    "delay_dist": "fixed" if isinstance(group.service, Fixed) else "exp",
                    "max_inflight": max(group.capacity or 1_000_000, group.workers),
                }
            )
            weights[sid] = group.weight
    options = {
        name: dict(config_from_mapping(cell.points[name].settings).strategy_options)
        for name in (cell.best, cell.runner_up)
    }
    return {
        "run": {
            "name": "live-check",
            "strategies": [cell.best, cell.runner_up],
            "scenarios": ["point"],
            "duration": "0s",
            "warmup": "0s",
            "replications": 1,
            "max_replications": 1,
            "seed": config.seed,
            "request_timeout": f"{config.deadline or 300:g}s",
        },
        "load": {
            "model": "open",
            "rate": config.arrivals.rate,
            "arrival": "poisson" if config.arrivals.poisson else "constant",
        },
        "testbed": {"balancers": config.balancers},
        "scenario_defs": {"point": {"cells": ["sp+sr"], "count": count}},
        "servers": servers,
        "weights": weights,
        "strategy_options": {k: v for k, v in options.items() if v},
    }


def run_checks(
    out: Path,
    chosen: Sequence[Cell],
    seconds: float,
    echo: Callable[[str], None],
) -> Path:
    """Run every chosen cell not yet in ``out/live-check/`` and write ``SWEEP_LIVE_TABLE``."""
    for i, cell in enumerate(chosen, 1):
        folder = out / CHECK_FOLDER / cell.key
        shown = " ".join(f"{k}={v}" for k, v in cell.values.items())
        if _readable(folder / ROWS):
            echo(f"live check {i}/{len(chosen)} ({shown}): done before")
            continue
        echo(f"live check {i}/{len(chosen)} ({shown}): {cell.best} vs {cell.runner_up}, live")
        rows = check_cell(folder, cell, seconds)
        write_table_atomically(folder / ROWS, pa.Table.from_pylist(rows))
    return merge(out, chosen)


def check_cell(folder: Path, cell: Cell, seconds: float) -> list[dict[str, Any]]:
    """Run ``cell`` live in ``folder`` and simulate it again; its rows, measured and
    simulated, one per strategy each."""
    spec = experiment(cell, seconds)
    count = int(spec["scenario_defs"]["point"]["count"])
    run_dir = folder / "run"
    if run_dir.exists():  # a check killed mid-run: its run is redone whole
        shutil.rmtree(run_dir)
    make_folder(folder)
    config_path = folder / "experiment.toml"
    write_bytes_atomically(config_path, dumps_toml(spec).encode())
    sending = count / float(spec["load"]["rate"])
    _run_live(config_path, run_dir, folder / "run.log", 2 * (sending + SETTLE_S))
    requests = pq.read_table(run_dir / "requests.parquet")
    verdicts = {p.strategy: p.verdict for p in load(run_dir / MANIFEST).phases}
    servers = [s["id"] for s in spec["servers"]]
    rows = []
    for strategy in (cell.best, cell.runner_up):
        mine = requests.filter(pc.equal(requests["strategy"], strategy))
        settings = {**cell.points[strategy].settings, "requests": count}
        simulated = run_point(settings)
        if simulated["error"]:
            raise LiveCheckFailed(f"simulating the live check again: {simulated['error']}")
        base = {**cell.values, "strategy": strategy, "seed": settings.get("seed")}
        measured = summarize(mine, servers) | {"checks": verdicts.get(strategy)}
        rows.append(base | {"source": "measured", **measured})
        rows.append(base | {"source": "simulated", **{f: simulated[f] for f in FIGURES}})
    return [r | {"cell": cell.key, "boundary": cell.boundary} for r in rows]


def _run_live(config_path: Path, run_dir: Path, log_path: Path, deadline_s: float) -> None:
    argv = lblab_command("run", "--config", str(config_path), "--out", str(run_dir), "--no-report")
    with log_path.open("wb") as log:
        child = subprocess.Popen(  # its own group is this one: Ctrl-C reaches it too
            argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=dies_with_this_process()
        )
        try:
            code = child.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)  # the run stops its phase and its testbed
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=30)
            child.kill()
            child.wait()
            raise LiveCheckFailed(
                f"a live check passed its {deadline_s:.0f} s deadline; see {log_path}"
            ) from None
        except BaseException:
            child.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=30)
            child.kill()
            raise
    if code != 0 or not (run_dir / "requests.parquet").is_file():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise LiveCheckFailed(
            f"a live check's run exited {code}; its log ({log_path}) ends: " + " / ".join(tail)
        )


def merge(out: Path, chosen: Sequence[Cell]) -> Path:
    """Write ``out/SWEEP_LIVE_TABLE`` from the chosen cells' rows, in the order they were picked."""
    parts = [
        pq.read_table(path) for c in chosen if _readable(path := out / CHECK_FOLDER / c.key / ROWS)
    ]
    merged = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})
    write_table_atomically(out / SWEEP_LIVE_TABLE, merged)
    return out / SWEEP_LIVE_TABLE


def _readable(path: Path) -> bool:
    """A cell's rows file is there and whole (a damaged one: the cell runs again)."""
    try:
        with parquet_errors(path, "live check's rows", "its cell runs again"):
            pq.read_schema(path)
    except ResultsError:
        return False
    return True


def _label_value(point: Point, axis: str) -> Any:
    return cell_value(point.values.get(axis))


def _label(point: Point, axes: Sequence[str]) -> str:
    return canonical([_label_value(point, a) for a in axes])


def _finite(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _neighbours(values: Mapping[str, Any], steps: Mapping[str, Sequence[Any]]) -> list[str]:
    """Labels of the cells one step away along one axis (in the axis's sorted values)."""
    out = []
    for axis, order in steps.items():
        if values[axis] not in order:
            continue
        i = list(order).index(values[axis])
        for j in (i - 1, i + 1):
            if 0 <= j < len(order):
                moved = {**values, axis: order[j]}
                out.append(canonical([moved[a] for a in steps]))
    return out


def _sortable(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) else (1, str(value))
