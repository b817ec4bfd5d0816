"""Slow start on a cold new node, live and simulated: the new server's share over time and
the latency while it warms up, with the pool's slow start off and on.

``uv run python benchmarks/slow_start.py [--testbeds simulated,local] [--strategies
wrr,least-request] [--replications 1] [--markdown]``

The case is the scorecard's "a cold new node" (``lblab/scorecard/scenarios/cold-node.toml``:
four servers of one worker sleeping an exponential 10 ms, open Poisson 240 requests/s; a
fifth joins 3.5 s into the phase ten times slower, easing to normal over 3 s), run with
``lblab run`` for each health policy of ``POLICIES`` (the ``[health]`` table), in phases
of ``SECONDS``. Per phase, from its requests: the steady p99 (requests sent in the 2.5 s
before the join), the p99 of the requests sent in the 3 s the node is cold, the new
node's share of the requests sent in each second after the join, and how long after the
join its share first reached 90 % of an even one (1/5) in a 0.5 s bin. Medians over
replications. The local testbed's servers only sleep, so the figures hold on a busy
machine too (the steady p99 then moves less than the cold one). docs/FIELD-NOTES.md,
"Slow start", has the table and what it says.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.experiment.toml_writer import dumps_toml
from lblab.pages import table, this_script
from lblab.procs import lblab_command

SCENARIOS = Path(__file__).resolve().parents[1] / "lblab/scorecard/scenarios"
CASES = {
    # name -> (case file, the server that comes in, when, the servers after, steady from)
    "cold node": ("cold-node.toml", "s5", 3.5, 5, 1.0),
    "recovered node": ("dies-and-returns.toml", "s1", 4.5, 4, 0.5),
}
"""The recovered node is killed at 2.5 s: its steady window is the 2 s before that."""
WARM_S, SECONDS = 3.0, 17.0
POLICIES = {
    "off": {"slow_start_window": "0s"},
    "default (10 s, linear, 10 %)": {},
    "3 s, aggression 0.5, 1 %": {
        "slow_start_window": "3s",
        "slow_start_aggression": 0.5,
        "slow_start_min_weight": 1,
    },
}
"""Name -> the run's [health] table (none: lblab's defaults)."""


def config_text(
    case: str, strategies: list[str], replications: int, health: dict[str, object]
) -> str:
    """The case file with this study's [run] and [health] over it (the case has none)."""
    config = tomllib.loads((SCENARIOS / CASES[case][0]).read_text())
    config["run"] = {"strategies": strategies, "duration": f"{SECONDS:g}s",
                     "replications": replications, "max_replications": replications}  # fmt: skip
    config["health"] = health
    return dumps_toml(config)


def run(testbed: str, case: str, strategies: list[str], replications: int,
        health: dict[str, object], folder: Path) -> Path:  # fmt: skip
    config = folder / "case.toml"
    config.write_text(config_text(case, strategies, replications, health))
    out = folder / "run"
    proc = subprocess.run(
        lblab_command("run", "--config", str(config), "--testbed", testbed, "--out", str(out),
                      "--no-report"),
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # 1: a phase's checks failed; its rows still count
        raise SystemExit(f"lblab run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return out


def figures(out: Path, case: str) -> dict[str, list[dict[str, float]]]:
    """strategy -> one dict of figures per phase."""
    _, new, join, servers, steady_from = CASES[case]
    requests = pq.read_table(out / "requests.parquet").to_pandas()
    per: dict[str, list[dict[str, float]]] = {}
    for (strategy, _), phase in requests.groupby(["strategy", "replication"]):
        t = phase["t_sent"] - phase["t_sent"].min()
        steady = phase[(t >= steady_from) & (t < steady_from + 2.0)]
        warming = phase[(t >= join) & (t < join + WARM_S)]
        row = {
            "steady_p99": float(np.quantile(steady["latency_ms"], 0.99)),
            "warm_p99": float(np.quantile(warming["latency_ms"], 0.99)),
            "reached_s": float("nan"),
        }
        for second in range(6):
            sent = phase[(t >= join + second) & (t < join + second + 1)]
            row[f"share_{second}"] = float((sent["server"] == new).mean()) if len(sent) else 0.0
        for start in np.arange(join, SECONDS, 0.5):
            sent = phase[(t >= start) & (t < start + 0.5)]
            if len(sent) and (sent["server"] == new).mean() >= 0.9 / servers:
                row["reached_s"] = float(start + 0.5 - join)
                break
        per.setdefault(str(strategy), []).append(row)
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbeds", default="simulated,local")
    parser.add_argument("--strategies", default="wrr,least-request")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--replications", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    rows = []
    for testbed, case, name in (
        (t, c, n) for t in args.testbeds.split(",") for c in args.cases.split(",") for n in POLICIES
    ):
        with tempfile.TemporaryDirectory() as tmp:
            out = run(testbed, case, strategies, args.replications, POLICIES[name], Path(tmp))
            per = figures(out, case)
        for strategy in strategies:
            phases = per.get(strategy, [])
            med = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
            shares = " ".join(f"{med[f'share_{s}']:.0%}" for s in range(6))
            reached = "never" if med["reached_s"] != med["reached_s"] else f"{med['reached_s']:g} s"
            rows.append([testbed, case, strategy, name, f"{med['steady_p99']:.1f}",
                         f"{med['warm_p99']:.1f}", shares, reached])  # fmt: skip
            print(rows[-1], file=sys.stderr, flush=True)
    head = ["testbed", "case", "strategy", "slow start", "steady p99 ms",
            "p99 ms, 3 s after it came", "its share, seconds 0-5 after",
            "90 % of an even share after"]  # fmt: skip
    text = "\n".join(table(head, rows))
    print(f"    {this_script()}\n\n{text}" if args.markdown else text)


if __name__ == "__main__":
    main()
