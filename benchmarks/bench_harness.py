"""What the harness costs per request at the ``quick`` preset's sp+sr load, from the run's
own ``harness_cpu`` figures.

``uv run python benchmarks/bench_harness.py [--rounds 2] [--strategies r,rr,wrr,lc,dwrr]
[--baseline REV] [--markdown]``

Each round is a real ``lblab run --preset quick`` cut to the sp+sr scenario and one
replication of each strategy (no adaptive blocks, no report): the load, the servers,
the isolation and the CPU probe of the README's main command. Per phase, the probe's
cores for each group of the harness's processes (the balancer, the Locust process, the
agents; ``loadtests/probe.py``) times the measured window, over the requests in that
window, is the group's CPU per request in microseconds.
With ``--baseline REV`` each round also runs the same command from git revision REV's
tree (this environment's dependencies), so before and after come from the same rounds.
Medians over every phase of the rounds, and per strategy: a phase's cost per request
falls as its throughput rises, and the strategies' throughputs differ by 2x at this load.
With a baseline, also the paired ratio: the median over (round, strategy) of this tree's
figure over the baseline's, so the host's drift between rounds cancels. Figures on a
shared 2-core VM move between runs (the same code 100-154 us in one day): compare within
one run. ``--markdown`` prints a stamped section of
``docs/results/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_balancer import export_revision

from lblab.manifest import load
from lblab.pages import table, this_script
from lblab.procs import lblab_command
from lblab.stamp import Stamp, take

GROUPS = ("balancer", "locust", "agents")
"""The harness's process groups in the probe's ``harness_cpu``."""
RUN_FILE = """
[run]
scenarios = ["sp+sr"]
replications = 1
max_replications = 1
strategies = {strategies}
"""
TIMEOUT_S = 900


@dataclass(frozen=True)
class Phase:
    """One phase's figures: us per request by group, and ``ok_per_s``."""

    round: int
    strategy: str
    figures: dict[str, float]


@dataclass
class Tree:
    """One tree's phases."""

    name: str
    phases: list[Phase] = field(default_factory=list)

    def median(self, key: str, strategy: str | None = None) -> float:
        values = [
            p.figures[key]
            for p in self.phases
            if key in p.figures and strategy in (None, p.strategy)
        ]
        return statistics.median(values) if values else float("nan")

    def strategies(self) -> list[str]:
        return list(dict.fromkeys(p.strategy for p in self.phases))


def paired_ratio(now: Tree, then: Tree, key: str) -> float:
    """The median over (round, strategy) of ``now``'s figure over ``then``'s: each pair
    ran in the same round on the same load, so the machine's drift between rounds (the
    harness's cost follows the phases' throughput, which follows the host) cancels."""
    before = {(p.round, p.strategy): p.figures[key] for p in then.phases if key in p.figures}
    ratios = [
        p.figures[key] / before[(p.round, p.strategy)]
        for p in now.phases
        if key in p.figures and before.get((p.round, p.strategy))
    ]
    return statistics.median(ratios) if ratios else float("nan")


def run_once(workdir: Path, strategies: list[str], env: dict[str, str] | None) -> Path:
    """One ``lblab run`` of the cut-down quick preset; its run folder."""
    config = workdir / "harness.toml"
    config.write_text(RUN_FILE.format(strategies=strategies).replace("'", '"'))
    out = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    argv = lblab_command(
        "run", "--preset", "quick", "--config", str(config), "--out", str(out), "--no-report"
    )
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode not in (0, 1):  # 1: a phase failed a check; its figures still count
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return out


def phase_figures(run: Path, round_: int) -> list[Phase]:
    """Per done phase: each harness group's CPU per request (us), and the ok rate."""
    manifest = load(run / "manifest.json")
    rows = []
    for p in manifest.phases:
        n = p.requests_in_window or 0
        if p.status != "done" or p.window is None or n == 0:
            continue
        seconds = p.window.seconds
        row = {"ok_per_s": float(p.ok_per_s_window or 0.0)}
        for group in GROUPS:
            cores = p.harness_cpu.get(group)
            if cores:
                row[group] = 1e6 * sum(cores) * seconds / n
        row["harness"] = sum(row.get(g, 0.0) for g in GROUPS)
        rows.append(Phase(round_, p.strategy, row))
    return rows


def measure(args: argparse.Namespace) -> list[Tree]:
    strategies = [s for s in args.strategies.split(",") if s]
    workdir = Path(tempfile.mkdtemp(prefix="bench-harness-"))
    trees = [Tree("this tree")]
    envs: list[dict[str, str] | None] = [None]
    if args.baseline:
        baseline = export_revision(args.baseline, workdir / "baseline-tree", args.plain_baseline)
        trees.append(Tree(f"`{baseline.label}`"))
        envs.append(baseline.env)
    for r in range(args.rounds):
        for tree_figures, env in zip(trees, envs, strict=True):
            run = run_once(workdir, strategies, env)
            rows = phase_figures(run, r + 1)
            if not rows:
                raise SystemExit(f"{run}: no phase was done with requests in its window")
            tree_figures.phases += rows
            print(
                f"round {r + 1} {tree_figures.name}: {len(rows)} phases, harness "
                f"{statistics.median(x.figures['harness'] for x in rows):.0f} us/request",
                file=sys.stderr,
            )
    return trees


COLUMNS = ("balancer", "locust", "agents", "harness", "ok_per_s")


def _figures(t: Tree, strategy: str | None = None) -> dict[str, str]:
    return {
        ("ok req/s" if k == "ok_per_s" else f"{k} us/req"): f"{t.median(k, strategy):,.0f}"
        if k == "ok_per_s"
        else f"{t.median(k, strategy):.1f}"
        for k in COLUMNS
    }


def rows_of(trees: list[Tree]) -> list[dict[str, object]]:
    return [{"tree": t.name, "phases": len(t.phases), **_figures(t)} for t in trees]


def strategy_rows(trees: list[Tree]) -> list[dict[str, object]]:
    """Per tree and strategy: the strategies load the harness differently (their
    throughput differs), so the overall median depends on the mix."""
    return [
        {
            "tree": t.name,
            "strategy": name,
            "phases": sum(p.strategy == name for p in t.phases),
            **_figures(t, name),
        }
        for t in trees
        for name in t.strategies()
    ]


def markdown(trees: list[Tree], stamp: Stamp, command: str, strategies: str) -> str:
    rows = rows_of(trees)
    by_strategy = strategy_rows(trees)
    lines = [
        "## The harness's cost per request",
        "",
        stamp.markdown(command),
        "",
        "`lblab run --preset quick` cut to the sp+sr scenario and one replication of "
        f"{strategies.replace(',', ', ')} (no adaptive blocks, no report), per phase: each "
        "group of the harness's processes' CPU (the run's own `harness_cpu`, user + system) "
        "over the requests in the measured window. Medians over the phases.",
        "",
        *table(list(rows[0]), rows),
        "",
        "By strategy (a phase's cost per request falls as its throughput rises):",
        "",
        *table(list(by_strategy[0]), by_strategy),
    ]
    if len(trees) == 2:
        now, then = trees
        ratios = {k: paired_ratio(now, then, k) for k in ("harness", "balancer", "locust")}
        lines += [
            "",
            f"Paired by round and strategy, the harness's CPU per request is "
            f"{ratios['harness']:.2f}x {then.name}'s (the balancer's {ratios['balancer']:.2f}x, "
            f"Locust's {ratios['locust']:.2f}x); the ratio of the medians above is "
            f"{now.median('harness') / then.median('harness'):.2f}x.",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--strategies", default="r,rr,wrr,lc,dwrr")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run git revision REV's tree, compiled as setup would",
    )
    parser.add_argument(
        "--plain-baseline", action="store_true", help="run the baseline as plain Python"
    )
    parser.add_argument("--markdown", action="store_true", help="print a stamped section")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds: give 1 or more")
    command = this_script()
    stamp = take() if args.markdown else None
    trees = measure(args)
    if stamp is not None:
        print(markdown(trees, stamp, command, args.strategies))
        return
    for row in rows_of(trees) + strategy_rows(trees):
        print("  ".join(f"{k} {v}" for k, v in row.items()))
    if len(trees) == 2:
        ratio = paired_ratio(trees[0], trees[1], "harness")
        print(f"paired by round and strategy: harness {ratio:.2f}x {trees[1].name}'s")


if __name__ == "__main__":
    main()
