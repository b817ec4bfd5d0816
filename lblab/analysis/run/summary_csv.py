"""``summary.csv``: one row per scenario x strategy x replication with the headline
metrics, for a spreadsheet (Locust's users expect a CSV of the summary); the Parquet
tables stay the record. ``verdict`` is the phase's validity verdict (a ``fail`` phase is
left out of the answer)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lblab.analysis.metrics import HEADLINE
from lblab.files import write_bytes_atomically
from lblab.manifest import Manifest

SUMMARY_CSV = "summary.csv"
COLUMNS = ["scenario", "strategy", "replication", "requests", "ok", "window_s", *HEADLINE]


def write_summary_csv(run_dir: Path, units: pd.DataFrame, manifest: Manifest) -> Path:
    """Write ``summary.csv`` (atomically); returns its path."""
    frame = units.reindex(columns=COLUMNS).copy()
    verdicts = {p.cell: p.verdict or "n/a" for p in manifest.phases}
    frame["verdict"] = [
        verdicts.get((str(c), str(s), int(r)), "n/a")
        for c, s, r in zip(frame["scenario"], frame["strategy"], frame["replication"], strict=True)
    ]
    frame = frame.sort_values(["scenario", "replication", "strategy"], kind="stable")
    path = run_dir / SUMMARY_CSV
    write_bytes_atomically(path, frame.to_csv(index=False, float_format="%.6g").encode())
    return path
