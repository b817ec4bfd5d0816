"""Martins et al.'s storage-cluster experiment, re-run in the simulator.

Source: E. Martins, H. Nguyen, Y. Evans, *An Overview of Server Load-Balancing*,
CSC 466 report, 2025; ../shared/papers/000_8ee1799ae44a5da5.txt, Sect. 4-6.

Setup as published: 10 data nodes x 5 worker threads (FIFO queue when all are busy),
25 ms network delay, open arrivals at 10, 50, 100, 150 and 200 requests/s for 20 s,
objects of 66 KB, 1 MB and 17 MB, a 3-minute request timeout; homogeneous nodes, or
heterogeneous ones that sleep 10 ms (nodes 0-2), 500 ms (3-5) or 900 ms (6-9) before
serving. Algorithms: round robin (``rr``), least connections (``lc``; the node's
completion message decrements the count, so it is 25 ms stale) and least response
time (``lrt``: fewest connections, ties by the node-reported mean response time).

What the paper leaves open, and our choice: the transfer speed of a worker (we take
40 MB/s, so a homogeneous cluster runs at 60 % load at 200 req/s; the authors' laptop
saturated earlier, hence their tens-of-seconds service times) and the delay on each
hop (25 ms each way on both client<->balancer and balancer<->node links). The figure
compared is the direction of Fig. 15 and Fig. 18: with homogeneous nodes the three
are alike; with heterogeneous nodes LC and LRT beat RR, by more as the rate grows.

Every row also carries what the paper's other figures show: the requests each node
served (Fig. 13 homogeneous, Fig. 16 heterogeneous, both at 150 req/s: equal under RR;
under LC and LRT the 10 ms nodes 0-2 take the most, then nodes 3-5) and the
distribution of the user service time (Fig. 14 / Fig. 17, at 200 req/s: alike when
homogeneous; heterogeneous, RR has fewer fast requests and a longer tail than LC and
LRT, 2072 vs > 2600 of 4000 under 20 s). Our service times are shorter than the
authors' (see above), so the shape and the order compare, not the seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from lblab.analysis.paper_claims import Missing, PaperClaim, Verdict, judge_all
from lblab.simulator.config import ServerGroup, SimConfig
from lblab.simulator.reproduce import paper_options
from lblab.simulator.run import simulate
from lblab.simulator.service import JsonCost
from lblab.simulator.workload import OpenArrivals

RATES = (10, 50, 100, 150, 200)
ALGORITHMS = ("rr", "lc", "lrt")
OBJECT_BYTES = (66_000, 1_000_000, 17_000_000)
HETEROGENEOUS_SLEEP_S = ((3, 0.010), (3, 0.500), (4, 0.900))
NODES, WORKERS = 10, 5
DELAY_S = 0.025
TIMEOUT_S = 180.0
BANDWIDTH = 40e6
"""Bytes per second one worker transfers (our assumption; see the module docstring)."""


QUANTILES = (10, 50, 90, 99, 100)
HISTOGRAM_BINS = 20
NODES_RATE, SERVICE_RATE = 150, 200
"""The rates of the paper's per-node (Fig. 13/16) and distribution (Fig. 14/17) figures."""
FAST_S = 20.0
"""Fig. 17's threshold: 2072 of RR's 4000 requests under 20 s, > 2600 for LC and LRT."""
PAPER_UNDER_20S_PCT = {"rr": "51.8", "lc": "> 65", "lrt": "> 65"}
"""Fig. 17 (heterogeneous, 200 req/s) as shares of 4000: 2072 and "> 2600"."""


@dataclass(frozen=True, slots=True, eq=False)
class MartinsRow:
    heterogeneous: bool
    rate: float
    algorithm: str
    requests: int
    mean_service_ms: float
    p95_service_ms: float
    ok_pct: float
    node_requests: tuple[int, ...]
    """Requests each node (0-9, as the paper numbers them) served, over all seeds."""
    unserved: int
    """Requests no node took (no backend eligible); with ``node_requests``, all of them."""
    service_ms: np.ndarray
    """User service time of every served request, all seeds (the Fig. 14/17 histograms)."""
    seed_mean_ms: tuple[float, ...]
    """Each seed's mean service time of its served requests (the claims' figures)."""
    seed_node_requests: tuple[tuple[int, ...], ...]
    """Each seed's requests per node."""

    def quantiles_ms(self) -> dict[str, float]:
        values = np.percentile(self.service_ms, QUANTILES) if len(self.service_ms) else []
        return {
            ("max" if q == 100 else f"p{q}"): round(float(v), 1)
            for q, v in zip(QUANTILES, values, strict=False)
        }

    def under_pct(self, seconds: float) -> float:
        """Share of all requests served in under ``seconds``."""
        fast = int((self.service_ms < seconds * 1000.0).sum())
        return 100.0 * fast / self.requests if self.requests else 0.0

    def histogram(self) -> dict[str, list[float] | list[int]]:
        """``HISTOGRAM_BINS`` equal bins from 0 to the slowest request, in seconds."""
        top = float(self.service_ms.max()) / 1000.0 if len(self.service_ms) else 1.0
        counts, edges = np.histogram(self.service_ms / 1000.0, HISTOGRAM_BINS, (0.0, top))
        return {"edges_s": [round(float(e), 3) for e in edges], "counts": counts.tolist()}

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": "heterogeneous" if self.heterogeneous else "homogeneous",
            "rate": self.rate,
            "algorithm": self.algorithm,
            "requests": self.requests,
            "mean_service_ms": round(self.mean_service_ms, 1),
            "p95_service_ms": round(self.p95_service_ms, 1),
            "ok_pct": round(self.ok_pct, 2),
            "node_requests": list(self.node_requests),
            "unserved": self.unserved,
            "under_20s_pct": round(self.under_pct(FAST_S), 1),
            "paper_under_20s_pct": PAPER_UNDER_20S_PCT.get(self.algorithm)
            if self.heterogeneous and self.rate == SERVICE_RATE
            else None,
            "service_ms_quantiles": self.quantiles_ms(),
            "service_histogram": self.histogram(),
        }

    def table_dict(self) -> dict[str, object]:
        """The printed row: the JSON one with the lists written out short."""
        row = self.as_dict()
        del row["service_histogram"], row["service_ms_quantiles"]
        row["node_requests"] = " ".join(str(n) for n in self.node_requests)
        quantiles = self.quantiles_ms()
        for name in ("p50", "p99", "max"):
            row[f"{name}_ms"] = quantiles.get(name)
        row["under_20s_pct"] = row.pop("under_20s_pct")
        row["paper_under_20s_pct"] = row.pop("paper_under_20s_pct")
        return row


def martins_config(
    algorithm: str, rate: float, heterogeneous: bool, seconds: float = 20.0, seed: int = 1
) -> SimConfig:
    b = 1.0 / BANDWIDTH
    if heterogeneous:
        groups = tuple(
            ServerGroup(count=n, service=JsonCost(sleep, b, 0.0), workers=WORKERS)
            for n, sleep in HETEROGENEOUS_SLEEP_S
        )
    else:
        groups = (ServerGroup(count=NODES, service=JsonCost(0.0, b, 0.0), workers=WORKERS),)
    return SimConfig(
        strategy=algorithm,
        strategy_options=paper_options(algorithm),
        servers=groups,
        requests=max(1, round(rate * seconds)),
        arrivals=OpenArrivals(rate=rate, poisson=True),
        scenario="martins-" + ("het" if heterogeneous else "hom"),
        cells=tuple((100, size) for size in OBJECT_BYTES),
        client_delay=DELAY_S,
        server_delay=DELAY_S,
        deadline=TIMEOUT_S,
        picks_every=0,
        report_period=1.0,
        seed=seed,
        run_id="martins",
    )


def martins_point(
    algorithm: str, rate: float, heterogeneous: bool, seconds: float, seeds: int
) -> MartinsRow:
    lat, ok, means, per_seed = [], [], [], []
    counts = np.zeros(NODES + 1, dtype=np.int64)  # the last: no node
    for seed in range(1, seeds + 1):
        result = simulate(martins_config(algorithm, rate, heterogeneous, seconds, seed))
        t = result.requests
        lat.append(t.column("latency_ms").to_numpy())
        ok.append(t.column("ok").to_numpy(zero_copy_only=False))
        means.append(float(lat[-1][ok[-1]].mean()) if ok[-1].any() else float("nan"))
        node = {name: i for i, name in enumerate(result.servers)}
        index = [node.get(s, NODES) for s in t.column("server").to_pylist()]
        seed_counts = np.bincount(index, minlength=NODES + 1)
        per_seed.append(tuple(int(c) for c in seed_counts[:NODES]))
        counts += seed_counts
    latency, good = np.concatenate(lat), np.concatenate(ok)
    served = latency[good] if good.any() else latency
    return MartinsRow(
        heterogeneous=heterogeneous,
        rate=rate,
        algorithm=algorithm,
        requests=len(latency),
        mean_service_ms=float(served.mean()),
        p95_service_ms=float(np.percentile(served, 95)),
        ok_pct=100.0 * float(good.mean()),
        node_requests=tuple(int(c) for c in counts[:NODES]),
        unserved=int(counts[NODES]),
        service_ms=latency[good],
        seed_mean_ms=tuple(means),
        seed_node_requests=tuple(per_seed),
    )


def reproduce_martins(
    rates: Sequence[float] = RATES,
    algorithms: Sequence[str] = ALGORITHMS,
    seconds: float = 20.0,
    seeds: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[MartinsRow]:
    rows = []
    for heterogeneous in (False, True):
        for rate in rates:
            for algo in algorithms:
                if progress:
                    progress(f"{'het' if heterogeneous else 'hom'} {rate} req/s {algo}")
                rows.append(martins_point(algo, rate, heterogeneous, seconds, seeds))
    return rows


HOMOGENEOUS_ALIKE = 1.2
"""Fig. 15 "perform similarly", lblab's reading: the slowest mean within 20 % of the fastest."""
CLAIMS: tuple[PaperClaim, ...] = (
    PaperClaim(
        id="het-lc-beats-rr",
        text="heterogeneous nodes: LC beats RR at every rate",
        source='Fig. 18, Sect. 6.2.3: "both dynamic algorithms outperform Round Robin at all '
        'request rates"',
        figure_label="the largest, over the rates run, of LC's mean service time over RR's",
        op="<=",
        threshold=1.0,
        basis="below 1 at every rate, by any margin (the text gives no size)",
        fmt="{:.3f}",
    ),
    PaperClaim(
        id="het-lrt-beats-rr",
        text="heterogeneous nodes: LRT beats RR at every rate",
        source='Fig. 18, Sect. 6.2.3: "both dynamic algorithms outperform Round Robin at all '
        'request rates"',
        figure_label="the largest, over the rates run, of LRT's mean service time over RR's",
        op="<=",
        threshold=1.0,
        basis="below 1 at every rate, by any margin (the text gives no size)",
        fmt="{:.3f}",
    ),
    PaperClaim(
        id="hom-alike-low-rates",
        text="homogeneous nodes: RR, LC and LRT alike at 10-100 req/s",
        source='Fig. 15, Sect. 6.1.3: at 10, 50 and 100 req/s they "perform similarly"',
        figure_label="the largest, over the rates up to 100 run, of the slowest mean service "
        "time over the fastest",
        op="<=",
        threshold=HOMOGENEOUS_ALIKE,
        basis="'similarly', lblab's reading: within 20 %",
        fmt="{:.3f}",
    ),
    PaperClaim(
        id="hom-lc-beats-lrt-high-rates",
        text="homogeneous nodes: LC beats LRT at 150 and 200 req/s",
        source='Sect. 6.1.3: "Least Connections outperforms Least Response Time at higher '
        'request rates"',
        figure_label="the largest, over the rates from 150 run, of LC's mean service time over "
        "LRT's",
        op="<=",
        threshold=0.99,
        basis="'outperforms', lblab's reading: by at least 1 % (the two make the same "
        "picks unless nodes tie on connections, and a tie is not a win)",
        fmt="{:.3f}",
    ),
    PaperClaim(
        id="het-fast-nodes-most",
        text="heterogeneous nodes: LC and LRT send the most to nodes 0-2, then 3-5, then 6-9",
        source="Fig. 16b/c, 150 req/s: nodes 0-2 get more requests than 3-5, which get more "
        "than 6-9",
        figure_label="the smallest of nodes 0-2's mean requests over 3-5's and 3-5's over "
        "6-9's, under LC and LRT at 150 req/s",
        op=">=",
        threshold=1.0,
        basis="more, by any margin (the figure gives counts, the text an order)",
        fmt="{:.2f}",
    ),
)
"""Martins et al.'s findings, as their text states them. Fig. 17's seconds are not judged:
our service times are shorter than the authors' (module docstring), so the share under
20 s is near 100 % for all three."""


def _at(rows: Sequence[MartinsRow], heterogeneous: bool, algorithm: str) -> dict[float, MartinsRow]:
    return {
        r.rate: r for r in rows if r.heterogeneous is heterogeneous and r.algorithm == algorithm
    }


def _ratios(
    rows: Sequence[MartinsRow], heterogeneous: bool, first: str, second: str,
    keep: Callable[[float], bool],
) -> list[float]:  # fmt: skip
    """Per seed, the largest over the kept rates of ``first``'s mean over ``second``'s."""
    a, b = _at(rows, heterogeneous, first), _at(rows, heterogeneous, second)
    rates = sorted(r for r in a.keys() & b.keys() if keep(r))
    if not rates:
        nodes = "heterogeneous" if heterogeneous else "homogeneous"
        raise Missing(f"{first} and {second}, {nodes}, at a rate the claim covers")
    per_rate = [np.divide(a[r].seed_mean_ms, b[r].seed_mean_ms) for r in rates]
    return np.max(per_rate, axis=0).tolist()


def _alike(rows: Sequence[MartinsRow]) -> list[float]:
    by = [_at(rows, False, algo) for algo in ALGORITHMS]
    rates = sorted(set.intersection(*(set(b) for b in by)) & {r for r in RATES if r <= 100})
    if not rates:
        raise Missing("rr, lc and lrt, homogeneous, at 10, 50 or 100 req/s")
    spread = [
        np.max([b[r].seed_mean_ms for b in by], axis=0)
        / np.min([b[r].seed_mean_ms for b in by], axis=0)
        for r in rates
    ]
    return np.max(spread, axis=0).tolist()


def _fast_nodes_most(rows: Sequence[MartinsRow]) -> list[float]:
    chosen = [_at(rows, True, algo).get(NODES_RATE) for algo in ("lc", "lrt")]
    if any(r is None for r in chosen):
        raise Missing(f"lc and lrt, heterogeneous, at {NODES_RATE} req/s")
    ratios = []
    for row in chosen:
        assert row is not None
        nodes = np.asarray(row.seed_node_requests, dtype=float)  # seeds x nodes
        fast, mid, slow = nodes[:, :3].mean(1), nodes[:, 3:6].mean(1), nodes[:, 6:].mean(1)
        ratios.append(np.minimum(fast / mid, mid / slow))
    return np.min(ratios, axis=0).tolist()


_FIGURES: dict[str, Callable[[Sequence[MartinsRow]], list[float]]] = {
    "het-lc-beats-rr": lambda rows: _ratios(rows, True, "lc", "rr", lambda r: True),
    "het-lrt-beats-rr": lambda rows: _ratios(rows, True, "lrt", "rr", lambda r: True),
    "hom-alike-low-rates": _alike,
    "hom-lc-beats-lrt-high-rates": lambda rows: _ratios(
        rows, False, "lc", "lrt", lambda r: r >= 150
    ),
    "het-fast-nodes-most": _fast_nodes_most,
}


def judge_claims(
    rows: Sequence[MartinsRow], claims: Sequence[PaperClaim] = CLAIMS
) -> list[Verdict]:
    """Each claim (of ``CLAIMS``, or one with its id and another bound) on the per-seed figures."""
    return judge_all([(c, partial(_FIGURES[c.id], rows)) for c in claims])


def martins_chart(rows: Sequence[MartinsRow], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, het in zip(axes, (False, True), strict=True):
        for algo in dict.fromkeys(r.algorithm for r in rows):
            pts = sorted(
                (r.rate, r.mean_service_ms / 1000.0)
                for r in rows
                if r.algorithm == algo and r.heterogeneous is het
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=algo.upper())
        ax.set_title(
            "heterogeneous nodes (cf. Fig. 18)" if het else "homogeneous nodes (cf. Fig. 15)"
        )
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel("average service time (s)")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _pick_rate(rows: Sequence[MartinsRow], wanted: float) -> float:
    """The paper's rate if it was run, else the highest one that was."""
    rates = {r.rate for r in rows}
    return wanted if wanted in rates else max(rates)


def martins_nodes_chart(rows: Sequence[MartinsRow], path: Path) -> Path:
    """Requests per node at 150 req/s, one panel per algorithm (cf. Fig. 13 and Fig. 16)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = _pick_rate(rows, NODES_RATE)
    algos = list(dict.fromkeys(r.algorithm for r in rows))
    fig, axes = plt.subplots(2, len(algos), figsize=(3.5 * len(algos), 6), squeeze=False)
    for i, het in enumerate((False, True)):
        for j, algo in enumerate(algos):
            ax = axes[i][j]
            for r in rows:
                if r.rate == rate and r.algorithm == algo and r.heterogeneous is het:
                    ax.bar(range(NODES), r.node_requests)
            ax.set_title(
                f"{algo.upper()}, {'heterogeneous (Fig. 16)' if het else 'homogeneous (Fig. 13)'}",
                fontsize=9,
            )
            ax.set_xticks(range(NODES))
            ax.set_xlabel("node")
            ax.set_ylabel("requests")
    fig.suptitle(f"Requests per node at {rate:g} req/s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def martins_service_chart(rows: Sequence[MartinsRow], path: Path) -> Path:
    """Histograms of the user service time at 200 req/s (cf. Fig. 14 and Fig. 17)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = _pick_rate(rows, SERVICE_RATE)
    algos = list(dict.fromkeys(r.algorithm for r in rows))
    fig, axes = plt.subplots(2, len(algos), figsize=(3.5 * len(algos), 6), squeeze=False)
    for i, het in enumerate((False, True)):
        chosen = [r for r in rows if r.rate == rate and r.heterogeneous is het]
        top = max((float(r.service_ms.max()) for r in chosen if len(r.service_ms)), default=1.0)
        for j, algo in enumerate(algos):
            ax = axes[i][j]
            for r in chosen:
                if r.algorithm == algo:
                    ax.hist(r.service_ms / 1000.0, bins=HISTOGRAM_BINS, range=(0, top / 1000.0))
            ax.set_title(
                f"{algo.upper()}, {'heterogeneous (Fig. 17)' if het else 'homogeneous (Fig. 14)'}",
                fontsize=9,
            )
            ax.set_xlabel("user service time (s)")
            ax.set_ylabel("requests")
    fig.suptitle(f"User service time at {rate:g} req/s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
