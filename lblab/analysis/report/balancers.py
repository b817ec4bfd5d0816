"""How the load split over several balancers: one row per scenario, strategy and balancer.

A run with ``[testbed] balancers = K`` (or a simulation with ``balancers = K``) sends each
request through one of K independent balancers, each seeing only its own traffic. The
split says how many requests each balancer carried, how they fared, and where each one
sent them: balancers that agree send the same shares to each server; balancers that
herd or hold stale information do not.
"""

from __future__ import annotations

import pandas as pd

from lblab.analysis.load import Results
from lblab.analysis.ordering import order_scenarios, order_strategies

CELL = ["scenario", "strategy"]


def balancer_split(results: Results) -> pd.DataFrame:
    """Measured requests per (scenario, strategy, balancer), all replications together:
    their count, share of the cell, ok %, p95 latency of the ok ones, and the share each
    server got from that balancer (``to s1 %`` ...). Empty with fewer than 2 balancers."""
    req = results.table("requests", ["balancer", "server", "ok", "latency_ms"])
    if req.empty or req["balancer"].nunique() < 2:
        return pd.DataFrame()
    by = [*CELL, "balancer"]
    groups = req.groupby(by, observed=True)
    out = pd.DataFrame(
        {
            "requests": groups.size(),
            "ok %": groups["ok"].mean() * 100.0,
            "p95 ms": req[req["ok"]].groupby(by, observed=True)["latency_ms"].quantile(0.95),
        }
    )
    cell_total = out.groupby(level=CELL, observed=True)["requests"].transform("sum")
    out.insert(1, "share %", out["requests"] / cell_total * 100.0)
    to = req.groupby([*by, "server"], observed=True).size().unstack("server", fill_value=0)
    to = to.div(to.sum(axis=1), axis=0) * 100.0
    to = to[sorted(to.columns, key=_natural)]
    out = out.join(to.rename(columns=lambda s: f"to {s} %"))
    rows = out.index.to_frame(index=False)
    rows["scenario"] = pd.Categorical(rows["scenario"], order_scenarios(rows["scenario"].unique()))
    rows["strategy"] = pd.Categorical(rows["strategy"], order_strategies(rows["strategy"].unique()))
    rows["balancer"] = rows["balancer"].astype(str).map(_natural)
    return out.iloc[rows.sort_values(["scenario", "strategy", "balancer"]).index]


def _natural(name: object) -> tuple[int, str]:
    """``b2`` before ``b10``, ``s2`` before ``s10``: shorter names first, then by name."""
    text = str(name)
    return len(text), text
