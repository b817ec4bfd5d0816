"""infra/monitoring: the scrape config and the dashboard parse, and query what the real parts emit.

A real balancer (its admin port pinned the way docs/guides/monitoring.md tells a local run to), an
echo backend, a real agent reporting that backend's CPU, and the status exporter, all
on loopback. Every metric the Grafana dashboard queries must come out of the balancer's
``/metrics`` or the exporter's, with samples, after a few requests.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from balancer_testbed import processes, rsocket_client, start_balancer, start_echo, status_of
from balancer_testbed import wait_for as wait_until
from rsocket.payload import Payload

from lblab.infra.monitoring.status_exporter import fetch_status, metrics_text
from lblab.procs import Child, lblab_command, spawn

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "infra" / "monitoring"
SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
JOB = re.compile(r'job="([^"]+)"')


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return loaded


def _scrape() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    return loaded


def _exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p["targets"]]


def _queried() -> set[str]:
    """Metric names the dashboard's queries select (``name{...}``)."""
    return {m for e in _exprs() for m in SELECTOR.findall(e)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str = "/metrics") -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        return str(resp.read().decode())


def _samples(text: str) -> dict[str, list[str]]:
    """Metric name -> its sample lines (comments left out)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            out.setdefault(re.split(r"[{ ]", line, maxsplit=1)[0], []).append(line)
    return out


def test_scrape_config_parses_and_targets_the_admin_ports() -> None:
    config = _scrape()
    assert config["global"]["scrape_interval"] == "5s"
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"lblab-balancer", "lblab-status"}
    targets = {name: j["static_configs"][0]["targets"] for name, j in jobs.items()}
    assert targets == {"lblab-balancer": ["127.0.0.1:9100"], "lblab-status": ["127.0.0.1:9101"]}
    assert all(j["metrics_path"] == "/metrics" for j in jobs.values())
    # The ansible role's default admin port is the target the comments point at.
    role = yaml.safe_load((ROOT / "infra/roles/balancer/defaults/main.yml").read_text())
    assert role["balancer_admin_port"] == 9100


def test_dashboard_parses_and_every_panel_queries_a_scraped_job() -> None:
    dash = _dashboard()
    panels = dash["panels"]
    assert len(panels) >= 8
    assert len({p["id"] for p in panels}) == len(panels)
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource"]
    jobs = {j["job_name"] for j in _scrape()["scrape_configs"]}
    for p in panels:
        assert p["title"] and p["description"] and p["targets"], p["id"]
        assert p["datasource"]["uid"] == "${datasource}"
        for t in p["targets"]:
            assert set(JOB.findall(t["expr"])) <= jobs and JOB.search(t["expr"]), t["expr"]
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
    assert all(m.startswith("lblab_") for m in _queried()), _queried()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Echo backend s1, its agent, a balancer on a pinned admin port, the exporter."""
    logs = tmp_path_factory.mktemp("monitoring")
    echo = start_echo("s1", logs)
    with processes(echo) as kids:
        pinned = _free_port()
        # As a local run's `[testbed] balancer_args` does: a second --admin-port wins.
        balancer = start_balancer([echo], logs, "--admin-port", str(pinned))
        kids.append(balancer)
        agent = spawn(
            "agent s1",
            lblab_command(
                "agent", "--server", "s1", "--pid", str(echo.pid), "--interval", "0.1",
                "--report-to", f"127.0.0.1:{balancer.ready['agent_port']}",
            ),
            log_path=logs / "agent.log",
        )  # fmt: skip
        kids.append(agent)
        exporter = spawn(
            "status exporter",
            [sys.executable, "-m", "lblab.infra.monitoring.status_exporter",
             "--balancer", f"127.0.0.1:{pinned}", "--port", "0"],
            log_path=logs / "exporter.log",
        )  # fmt: skip
        kids.append(exporter)
        _traffic(balancer)
        wait_until(
            lambda: status_of(balancer)["backends"][0]["last_report"],
            10,
            "the agent's first load report",
        )
        yield {"balancer": balancer, "exporter": exporter, "pinned": pinned}


def _traffic(balancer: Child, n: int = 20) -> None:
    async def go() -> None:
        async with rsocket_client(balancer.ready["port"]) as client:
            for i in range(n):
                await client.request_response(Payload(json.dumps({"i": i}).encode()))

    asyncio.run(asyncio.wait_for(go(), 20))


def test_every_dashboard_metric_is_emitted_by_the_real_parts(live: dict[str, Any]) -> None:
    assert live["balancer"].ready["admin_port"] == live["pinned"]
    balancer = _samples(_get(live["pinned"]))
    exporter = _samples(_get(live["exporter"].ready["port"]))
    emitted = set(balancer) | set(exporter)
    missing = _queried() - emitted
    assert not missing, f"the dashboard queries metrics nobody emits: {sorted(missing)}"
    assert any(line.endswith(" 20") for line in balancer["lblab_balancer_picks_total"])
    assert balancer["lblab_balancer_latency_ewma_ms"], "no latency after 20 requests"


def test_exporter_shows_the_agents_cpu_and_the_strategy(live: dict[str, Any]) -> None:
    samples = _samples(_get(live["exporter"].ready["port"]))
    assert samples["lblab_status_up"] == ["lblab_status_up 1"]
    assert samples["lblab_status_strategy"] == ['lblab_status_strategy{strategy="rr"} 1']
    (cpu,) = samples["lblab_status_report_cpu_util"]
    assert cpu.startswith('lblab_status_report_cpu_util{backend="s1",source="agent"} ')
    assert 0.0 <= float(cpu.rsplit(" ", 1)[1]) <= 1.5
    assert _get_status(live["exporter"].ready["port"], "/nothing") == 404


def _get_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_exporter_says_down_when_the_balancer_does_not_answer() -> None:
    status = fetch_status(f"http://127.0.0.1:{_free_port()}/status", timeout=2)
    assert status is None
    assert metrics_text(status) == (
        "# HELP lblab_status_up 1 if the balancer's /status answered.\n"
        "# TYPE lblab_status_up gauge\nlblab_status_up 0\n"
    )


def test_exporter_refuses_a_bad_address() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lblab.infra.monitoring.status_exporter", "--balancer", "nonsense"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--balancer: 'nonsense' is not HOST:PORT" in result.stderr
    assert "Traceback" not in result.stderr
