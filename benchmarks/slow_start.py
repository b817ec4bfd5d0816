"""Slow start on a cold new node and on a recovered one, live and simulated: the node's
share over time, and the p99 while it comes in against the steady p99 of the same load.

``uv run python benchmarks/slow_start.py [--testbeds simulated,local] [--strategies
wrr,least-request] [--cases "cold node,recovered node"] [--sim-replications 20]
[--live-replications 3] [--markdown]``

The cases are the scorecard's (four servers of one worker sleeping an exponential 10 ms,
open Poisson 240 requests/s): "a cold new node" (``lblab/scorecard/scenarios/
cold-node.toml``: a fifth server joins 3.5 s into the phase ten times slower, easing to
normal over 3 s) and "a node that dies and comes back" (``dies-and-returns.toml``: s1
killed at 2.5 s, started again at 4.5 s, warm). Each is run with ``lblab run`` for each
health policy of ``POLICIES`` (the run's ``[health]`` table), phases of ``SECONDS``.

What is measured, pooled over the replications (their requests put together):

- **p99 in the window**: the p99 latency of the requests sent in the ``WINDOW_S`` (3 s)
  after the node came (the join, or the restart).
- **steady p99**: the p99 of the requests sent in the same 3 s of a control run: the same
  case, load, servers, replications and seeds with the case's timeline taken out (the
  cold node never joins, the recovered node never dies) and slow start off. It is the
  latency the same clients see over the same pool without the event, so the ratio of the
  two is what the node's coming in costs. (The old reference, the seconds before the
  event, had another number of servers for the cold node and 480-600 requests, where
  the p99 is the 5th-6th largest.)
- **ratio**, with a 90 % interval from ``BOOTSTRAP`` resamples of the replications
  (paired: replication i of both runs has the same seed), and **spike**: "no" when the
  ratio is at most 1, "within noise" when it is above 1 but the interval holds 1, "yes"
  when the whole interval is above 1.
- **ratio 3-6 s after**: the same ratio for the next 3 s (what a slow start still under
  way costs once the node is warm).
- **its share**: the node's share of the requests sent in each second after it came, and
  **share reached**: the end of the first 0.5 s bin after it came in which its share was
  at least 90 % of an even one (1/5, 1/4).

The local testbed's servers only sleep, so its figures hold on a busy machine too (its
steady p99 moves with the machine's load, the same in both runs). docs/FIELD-NOTES.md,
"Slow start", has the table and what it says.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.experiment.toml_writer import dumps_toml
from lblab.pages import table, this_script
from lblab.procs import lblab_command

SCENARIOS = Path(__file__).resolve().parents[1] / "lblab/scorecard/scenarios"
CASES = {
    # name -> (case file, the server that comes in, when, the servers after)
    "cold node": ("cold-node.toml", "s5", 3.5, 5),
    "recovered node": ("dies-and-returns.toml", "s1", 4.5, 4),
}
WINDOW_S, SECONDS, BOOTSTRAP = 3.0, 17.0, 2000
CONTROL = "control"
LEGEND = (
    "Steady p99: the p99 of the requests sent in the same 3 s of a control run (the same "
    "case, load, servers, replications and seeds, the timeline taken out: the cold node "
    "never joins, the recovered node never dies; slow start off). p99s are over the "
    f"replications' requests put together; the interval is over {BOOTSTRAP} resamples of the "
    "replications. Spike: no (ratio <= 1), within noise (above 1, the interval holds 1), "
    "yes (the whole interval above 1)."
)
POLICIES: dict[str, dict[str, object]] = {
    "off": {"slow_start_window": "0s"},
    "Envoy's (10 s, linear, 10 %, no early end)": {
        "slow_start_window": "10s",
        "slow_start_aggression": 1.0,
        "slow_start_min_weight": 10,
        "slow_start_fast_after": 0,
    },
    "lblab's default": {},
}
"""Name -> the run's [health] table (none: lblab's defaults, docs/ALGORITHMS.md)."""


def config_text(
    case: str, strategies: list[str], replications: int, health: dict[str, object], control: bool
) -> str:
    """The case file with this study's [run] and [health] over it (the case has none);
    the control without its timeline."""
    config = tomllib.loads((SCENARIOS / CASES[case][0]).read_text())
    if control:
        config.pop("timeline")
    config["run"] = {"strategies": strategies, "duration": f"{SECONDS:g}s",
                     "replications": replications, "max_replications": replications}  # fmt: skip
    config["health"] = health
    return dumps_toml(config)


def run(testbed: str, case: str, strategies: list[str], replications: int,
        policy: str, folder: Path) -> pd.DataFrame:  # fmt: skip
    control = policy == CONTROL
    health = POLICIES["off"] if control else POLICIES[policy]
    config = folder / "case.toml"
    config.write_text(config_text(case, strategies, replications, health, control))
    out = folder / "run"
    proc = subprocess.run(
        lblab_command("run", "--config", str(config), "--testbed", testbed, "--out", str(out),
                      "--no-report"),
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # 1: a phase's checks failed; its rows still count
        raise SystemExit(f"lblab run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    requests = pq.read_table(out / "requests.parquet").to_pandas()
    start = requests.groupby(["strategy", "replication"])["t_sent"].transform("min")
    requests["t"] = requests["t_sent"] - start
    return requests[["strategy", "replication", "t", "latency_ms", "server"]]


def _window(requests: pd.DataFrame, came: float) -> dict[object, np.ndarray]:
    """Replication -> latencies (ms) of the requests sent in the ``WINDOW_S`` from ``came``."""
    sent = requests[(requests["t"] >= came) & (requests["t"] < came + WINDOW_S)]
    return {r: g["latency_ms"].to_numpy() for r, g in sent.groupby("replication")}


def _p99(parts: list[np.ndarray]) -> float:
    return float(np.quantile(np.concatenate(parts), 0.99))


def figures(requests: pd.DataFrame, control: pd.DataFrame, case: str) -> dict[str, object]:
    """One strategy's figures (the module docstring), pooled over its replications."""
    _, new, came, servers = CASES[case]
    event, steady = _window(requests, came), _window(control, came)
    seeds = sorted(set(event) & set(steady), key=str)
    ratio = _p99([event[s] for s in seeds]) / _p99([steady[s] for s in seeds])
    rng = np.random.default_rng(43)
    draws = []
    for _ in range(BOOTSTRAP):
        pick = [seeds[i] for i in rng.integers(0, len(seeds), len(seeds))]
        draws.append(_p99([event[s] for s in pick]) / _p99([steady[s] for s in pick]))
    low, high = (float(x) for x in np.quantile(draws, [0.05, 0.95]))
    later, later_steady = _window(requests, came + WINDOW_S), _window(control, came + WINDOW_S)
    after = _p99([later[s] for s in seeds]) / _p99([later_steady[s] for s in seeds])
    spike = "no" if ratio <= 1.0 else ("yes" if low > 1.0 else "within noise")
    t, server = requests["t"], requests["server"]
    shares = [float((server[(t >= came + s) & (t < came + s + 1)] == new).mean()) for s in range(6)]
    reached = float("nan")
    for start in np.arange(came, SECONDS, 0.5):
        sent = server[(t >= start) & (t < start + 0.5)]
        if len(sent) and (sent == new).mean() >= 0.9 / servers:
            reached = float(start + 0.5 - came)
            break
    return {"steady": _p99([steady[s] for s in seeds]), "p99": _p99([event[s] for s in seeds]),
            "ratio": ratio, "low": low, "high": high, "spike": spike, "shares": shares,
            "reached": reached, "phases": len(seeds), "after": after}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testbeds", default="simulated,local")
    parser.add_argument("--strategies", default="wrr,least-request")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--sim-replications", type=int, default=20)
    parser.add_argument("--live-replications", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    strategies = args.strategies.split(",")
    rows = []
    for testbed in args.testbeds.split(","):
        reps = args.sim_replications if testbed == "simulated" else args.live_replications
        for case in args.cases.split(","):
            runs = {}
            for policy in (CONTROL, *POLICIES):
                with tempfile.TemporaryDirectory() as tmp:
                    runs[policy] = run(testbed, case, strategies, reps, policy, Path(tmp))
            for policy in POLICIES:
                for strategy in strategies:
                    mine = runs[policy][runs[policy]["strategy"] == strategy]
                    base = runs[CONTROL][runs[CONTROL]["strategy"] == strategy]
                    f = figures(mine, base, case)
                    shares = " ".join(f"{s:.0%}" for s in f["shares"])  # type: ignore[attr-defined]
                    reached = f["reached"]
                    when = "never" if reached != reached else f"{reached:g} s"
                    rows.append([testbed, case, strategy, policy, f["phases"],
                                 f"{f['steady']:.1f}", f"{f['p99']:.1f}",
                                 f"{f['ratio']:.2f} ({f['low']:.2f}-{f['high']:.2f})",
                                 f["spike"], f"{f['after']:.2f}", shares, when])  # fmt: skip
                    print(rows[-1], file=sys.stderr, flush=True)
    head = ["testbed", "case", "strategy", "slow start", "phases",
            "steady p99 ms (same 3 s, no event)", "p99 ms, 3 s after it came",
            "ratio (90 % interval)", "spike", "ratio 3-6 s after", "its share, seconds 0-5 after",
            "90 % of an even share after"]  # fmt: skip
    text = "\n".join(table(head, rows)) + "\n\n" + LEGEND
    print(f"    {this_script()}\n\n{text}" if args.markdown else text)


if __name__ == "__main__":
    main()
