"""What a phase leaves in the run folder, whoever ran it: the runner's plan
(``experiment/runner.py``) or a swarm of the web UI (``loadtests/webui/session.py``).

Its requests part, merged from every writer's records chunks in the phase's folder (all
writers, all hosts delivered so far), labelled with the phase and its measured window;
its picks and cpu parts, cut from the balancer's picks files and the agents' samples
once they are flushed; and its validity checks (``experiment/validity.py``). Each step
writes the manifest's facts about the phase. The runner and the web UI session each
compose one: what differs between them is only which phases there are and the config
each ran with (``config_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lblab.experiment.plan import Phase
from lblab.experiment.run_folders import phase_folder
from lblab.experiment.runconfig import RunConfig
from lblab.experiment.validity import phase_checks
from lblab.loadtests import loadgen
from lblab.loadtests.clocks import read_clocks
from lblab.loadtests.collect import WindowSource
from lblab.loadtests.record_table import read_records
from lblab.loadtests.records import read_progress
from lblab.manifest import ManifestFile, measured_fields
from lblab.results import to_arrow, write_part
from lblab.windows import INSIDE, WINDOW_COLUMN, Window, phase_window, with_window


class PhaseRecorder:
    """A run folder's phases as tables and manifest facts (the module docstring)."""

    def __init__(
        self,
        run_dir: Path,
        manifest: ManifestFile,
        config_of: Callable[[Phase], RunConfig],
        harness_cores: Callable[[], float | None],
    ) -> None:
        self.run_dir, self.manifest = run_dir, manifest
        self.config_of = config_of
        """The config a phase ran with (its own length, or a swarm's own load)."""
        self.harness_cores = harness_cores
        self.picks = WindowSource(run_dir / "raw", "picks*.jsonl")
        self.cpu = WindowSource(run_dir / "raw", "cpu-*.jsonl")

    def merge_records(self, phase: Phase, start: float) -> dict[str, Any]:
        """Write the phase's requests part from every records chunk in its folder (all
        writers, all hosts delivered so far); returns the manifest's facts about them."""
        attempt = self.manifest.phase(phase.index).attempt
        assert attempt is not None, "a phase's records are merged after it started"
        records = phase_folder(self.run_dir, phase.key, attempt)
        table = read_records(records)
        requests = table.num_rows
        load_start = pc.min(table["t_sent"]).as_py() if requests else start
        window_facts: dict[str, Any] = {}
        if requests:
            answered = pc.add(table["t_sent"], pc.divide(table["latency_ms"], 1000.0))
            cfg = self.config_of(phase)
            load = cfg.loads[phase.scenario]
            window = phase_window(
                load_start,
                pc.max(answered).as_py(),
                cfg.warmup,
                None if load.count else cfg.duration,
            )
            labelled = self._label(table, phase, window)
            write_part(self.run_dir, "requests", phase.key, labelled)
            window_facts = measured_fields(labelled, window)
        loaders = pc.value_counts(table["loader"].fill_null("unknown")).to_pylist()
        return {
            "load_start": load_start,
            **window_facts,
            "requests": requests,
            "failures": requests - pc.sum(table["ok"]).as_py() if requests else 0,
            "locust_requests": loadgen.locust_request_count(records),
            "loaders": {c["values"]: c["counts"] for c in loaders},
            "clocks": read_clocks(records),  # distributed Locust: workers' clock offsets
            # Requests the writers counted (their progress files) without a row here.
            "unaccounted": read_progress(records)[0] - requests,
        }

    def _label(self, table: pa.Table, phase: Phase, window: Window) -> pa.Table:
        n = table.num_rows
        labels = {
            "run_id": pa.array([self.run_dir.name] * n, pa.string()),
            "scenario": pa.array([phase.scenario] * n, pa.string()),
            "strategy": pa.array([phase.strategy] * n, pa.string()),
            "replication": pa.array([phase.replication] * n, pa.int32()),
        }
        for i, (name, col) in enumerate(labels.items()):
            table = table.add_column(i, name, col)
        return with_window(table, "t_sent", window)

    def collect(self, phases: Sequence[Phase], before: float, force: bool = False) -> None:
        """The picks and cpu parts, and the checks, of each phase of ``phases`` that
        ended before ``before`` (``force``: again, even where its parts exist)."""
        self.picks.poll()
        self.cpu.poll()
        parts = self.run_dir / "parts"
        for p in phases:
            entry = self.manifest.phase(p.index)
            if entry.status not in ("done", "failed") or entry.start is None or entry.end is None:
                continue
            if entry.end > before:
                continue
            if (
                not force
                and (parts / "picks" / f"{p.key}.parquet").exists()
                and (parts / "cpu" / f"{p.key}.parquet").exists()
            ):
                continue
            cfg = self.config_of(p)
            counts = {}
            inside: dict[str, pa.Table | None] = {"picks": None, "cpu": None}
            for table, source, cols in (
                ("picks", self.picks, ("t", "server", "inflight_at_pick")),
                ("cpu", self.cpu, ("t", "server", "cpu_percent")),
            ):
                rows: list[dict[str, Any]] = [
                    {c: r.get(c) for c in cols} for r in source.window(entry.start, entry.end)
                ]
                counts[table] = len(rows)
                window = entry.window
                if rows and window is not None:
                    interval = cfg.testbed.agent_interval if table == "cpu" else 0.0
                    keys = {
                        "run_id": self.run_dir.name,
                        "scenario": p.scenario,
                        "strategy": p.strategy,
                        "replication": p.replication,
                    }
                    data = to_arrow(table, [{**keys, **r} for r in rows])
                    labelled = with_window(data, "t", window, interval)
                    write_part(self.run_dir, table, p.key, labelled)
                    inside[table] = labelled.filter(pc.equal(labelled[WINDOW_COLUMN], INSIDE))
            cpu_inside, picks_inside = inside["cpu"], inside["picks"]
            checks = phase_checks(
                entry,
                cfg,
                cfg.loads[p.scenario],
                cpu_inside["server"].to_pylist() if cpu_inside is not None else [],
                picks_inside.num_rows if picks_inside is not None else 0,
                self.harness_cores(),
                self.manifest.manifest.extra.get("capacity", {}).get(p.scenario),
            )
            self.manifest.update_phase(
                p.index, picks=counts["picks"], cpu_samples=counts["cpu"], **checks
            )
