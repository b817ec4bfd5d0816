"""``lblab strategies``: every registered strategy with its one-line definition."""

from __future__ import annotations

import dataclasses
import json

import typer


def _rows() -> list[dict[str, object]]:
    from .registry import STRATEGIES

    rows: list[dict[str, object]] = []
    for name, cls in STRATEGIES.items():
        options = {f.name: f.default for f in dataclasses.fields(cls.Config)}
        signals = [
            signal
            for signal, used in (
                ("response-reports", cls.uses_response_reports),
                ("push-reports", cls.uses_push_reports),
                ("agent-reports", cls.uses_agent_reports),
                ("leases", cls.uses_leases),
                ("probes", cls.uses_probes),
            )
            if used
        ]
        rows.append(
            {
                "name": name,
                "summary": cls.summary,
                "options": options,
                "signals": signals,
                "full_scan": cls.full_scan,
                "decisions": dict(cls.decisions),
            }
        )
    return rows


def strategies_command(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
) -> None:
    """List every load-balancing strategy with its one-line definition."""
    rows = _rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="lblab strategies (definitions: docs/ALGORITHMS.md)")
    table.add_column("name", style="bold")
    table.add_column("definition")
    table.add_column("options (default)")
    table.add_column("signals")
    table.add_column("decisions counted")
    for row in rows:
        options = row["options"]
        assert isinstance(options, dict)
        table.add_row(
            str(row["name"]),
            str(row["summary"]),
            ", ".join(f"{k}={v}" for k, v in options.items()) or "-",
            ", ".join(row["signals"]) or "-",  # type: ignore[arg-type]
            ", ".join(row["decisions"]) or "-",  # type: ignore[arg-type]
        )
    Console().print(table)
