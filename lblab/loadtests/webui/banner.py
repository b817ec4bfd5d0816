"""What lblab's banner at the top of Locust's page says (no Locust import: a unit test
and the ``lblab ui`` process read it too).

Locust's page shows the host and names its statistics rows after the scenario's cells;
it never shows the strategy, an Edit whose change was refused closes with the reason
only in its LOGS tab, and nothing on it says where the results go. The Locust process
answers ``GET lblab/status`` with ``page_lines``; ``static/banner.js`` (added to
Locust's page by ``with_script``) polls it and shows the lines above Locust's header:
the running strategy, the last refusal, and after Stop the run folder, each phase's
state and the report's path.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lblab.manifest import PhaseEntry

SCRIPT_URL = "lblab/banner.js"  # relative, as Locust's own assets, under its base path
STATUS_URL = "lblab/status"


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the banner: ``head`` in bold, then ``text``. ``kind`` styles it
    (``running``, ``idle``, ``refused``, ``results``); ``key`` tells one refusal from
    the next, so a dismissed one stays hidden and a new one shows."""

    kind: str
    head: str
    text: str
    key: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A ``/swarm`` form lblab refused, and what goes on instead."""

    number: int
    message: str
    at: float  # epoch seconds


def strategy_label(strategy: str, options: Mapping[str, str]) -> str:
    """``lc`` or ``lc tie=random``: the strategy as the banner and the statistics rows
    name it (Locust's ``request_type``, its Type column)."""
    return " ".join([strategy, *(f"{k}={v}" for k, v in options.items())])


def describe_load(load: Mapping[str, Any]) -> str:
    """``closed, 4 users`` or ``open, 250 req/s poisson`` from a phase's ``load`` facts."""
    if load["model"] == "closed":
        return f"closed, {load['users']} users"
    return f"open, {load['rate']:g} req/s {load['arrival']}"


def report_path(run_dir: str) -> str:
    return str(Path(run_dir) / "report" / "index.html")


def page_lines(
    *,
    running: Mapping[str, Any] | None,
    stopping: bool,
    refusal: Refusal | None,
    run_dir: str,
    notes: Sequence[Mapping[str, Any]],
    manifest_phases: Sequence[PhaseEntry],
) -> list[dict[str, str]]:
    """The banner's lines.

    ``running`` is the running phase's note (``None`` between swarms) and ``notes`` all
    phases this Locust process started; ``manifest_phases`` are the manifest's (the
    ``lblab ui`` process marks one ``done`` once its rows are in the run's parts), read
    only between swarms.
    """
    lines: list[Line] = []
    if running is not None:
        what = "stopping" if stopping else "running"
        lines.append(
            Line(
                "running",
                f"Strategy {strategy_label(running['strategy'], running['strategy_options'])}",
                f"{what} since {_clock(running['start'])} · scenario {running['scenario']} · "
                f"{describe_load(running['load'])} · phase {running['key']} · Locust's "
                f"statistics: one row per strategy and cell (Type = strategy) · run folder "
                f"{run_dir}",
            )
        )
    else:
        lines.append(
            Line(
                "idle",
                "No test running",
                "the scenario, strategy and load model are under Custom parameters in the "
                "form (New opens it after a test)",
            )
        )
    if refusal is not None:
        lines.append(
            Line(
                "refused",
                f"Refused at {_clock(refusal.at)}",
                refusal.message,
                key=f"refused-{refusal.number}",
            )
        )
    if running is None and notes:
        lines.extend(_results(run_dir, notes, manifest_phases))
    return [asdict(line) for line in lines]


def _results(
    run_dir: str, notes: Sequence[Mapping[str, Any]], manifest_phases: Sequence[PhaseEntry]
) -> list[Line]:
    """Where this session's phases went, and when the report is written."""
    recorded = {p.key: p for p in manifest_phases}
    lines = [Line("results", "Results", f"run folder {run_dir}")]
    for note in notes:
        entry = recorded.get(note["key"])
        label = strategy_label(note["strategy"], note["strategy_options"])
        if entry is not None and entry.status == "done":
            state = f"{entry.requests} requests ({entry.failures} failed) recorded"
        elif entry is not None and entry.status == "failed":
            state = f"failed: {entry.error}"
        else:
            state = "its rows are being written"
        lines.append(Line("results", f"phase {note['key']}", f"{label}: {state}"))
    lines.append(
        Line(
            "results",
            "Report",
            f"{report_path(run_dir)}, written with the run's tables (requests, cpu, picks "
            ".parquet) when lblab ui ends: Ctrl-C (or SIGTERM) in its terminal",
        )
    )
    return lines


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def with_script(html: str) -> str | None:
    """Locust's page with lblab's banner script before ``</body>``; ``None`` when the
    page has no ``</body>`` (a Locust whose page changed: the banner is then missing)."""
    at = html.rfind("</body>")
    if at < 0:
        return None
    return f'{html[:at]}<script src="{SCRIPT_URL}" defer></script>\n{html[at:]}'
