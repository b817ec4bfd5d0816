"""The headline facts of a run's manifest: what ran, on what, and how CPU was limited.

Live runs (``experiment/runner.py``) and simulated runs (``simulator/output.py``) record
different facts in their manifest (``lblab/manifest.py``); this module reads what either
gives and skips what a manifest lacks, so the report and the overview notebook show one
small table either way. The whole manifest is still shown verbatim below it in the report.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from lblab.manifest import Manifest


def _when(value: float | None) -> str | None:
    """Epoch seconds as ``2026-11-21 06:39:52 UTC``."""
    return None if value is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))


def _seconds(value: Any) -> str | None:
    return f"{value:g} s" if isinstance(value, int | float) else None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _live_servers(manifest: Manifest) -> str | None:
    """``s1: 0.25 CPU (cgroup), ...`` from the started testbed, else from the config."""
    started = _dict(manifest.testbed.get("servers"))
    configured = manifest.config.get("servers")
    parts = []
    if started:
        for sid, facts in started.items():
            quota = facts.get("cpu_quota")
            limit = facts.get("cpu_limit", "?")
            cpu = f"{quota:g} CPU" if isinstance(quota, int | float) else "unlimited CPU"
            parts.append(f"{sid}: {cpu} ({limit})")
    elif isinstance(configured, list):
        for server in configured:
            quota = _dict(server).get("cpu_quota")
            cpu = f"{quota:g} CPU" if isinstance(quota, int | float) else "unlimited CPU"
            parts.append(f"{_dict(server).get('id', '?')}: {cpu}")
    return ", ".join(parts) or None


def _isolation(layout: Mapping[str, Any]) -> str | None:
    """``servers on CPUs 1, harness on CPUs 0 (cpuset-v1); quotas scaled by 0.667 ...``."""
    if not layout:
        return None
    if layout.get("method") == "off":
        return "none: servers and harness shared the CPUs"

    def cpus(key: str) -> str:
        return ",".join(str(c) for c in layout.get(key) or [])

    text = (
        f"servers on CPUs {cpus('server_cpus')}, harness on CPUs {cpus('harness_cpus')} "
        f"({layout.get('method')})"
    )
    scale = layout.get("quota_scale")
    if isinstance(scale, int | float) and scale != 1.0:
        given = _dict(layout.get("quotas_given"))
        was = ", ".join(f"{k} {v:g}" for k, v in given.items() if isinstance(v, int | float))
        text += f"; quotas scaled by {scale:.3g} to fit, ratios kept (given: {was})"
    return text


def _simulated_servers(manifest: Manifest) -> str | None:
    """``3 x exp:10ms, 1 worker`` from the first simulated config."""
    if not manifest.phase_configs:
        return None
    parts = []
    for group in manifest.phase_configs[0].get("servers") or []:
        g = _dict(group)
        workers = g.get("workers", 1)
        speed = g.get("speed", 1.0)
        text = f"{g.get('count', 1)} x {g.get('service', '?')}, {workers} worker(s)"
        parts.append(text + (f", speed {speed:g}" if speed not in (None, 1, 1.0) else ""))
    return "; ".join(parts) or None


def run_facts(manifest: Manifest) -> dict[str, str]:
    """Ordered label -> text of the facts this manifest gives (missing ones are left out)."""
    simulated = manifest.simulated
    config = manifest.config
    run = _dict(config.get("run"))
    load = _dict(config.get("load"))
    host = manifest.host
    software = manifest.software
    testbed = manifest.testbed
    facts: dict[str, Any] = {
        "run": manifest.run_id,
        "kind": "simulated (SimPy model, not a measurement)" if simulated else "live measurement",
        "preset": manifest.config_given.get("preset"),
        "status": manifest.status,
        "started": None if simulated else _when(manifest.started),
        "ended": None if simulated else _when(manifest.ended),
        "phase length": run.get("duration"),
        "warm-up (excluded)": _seconds(manifest.warmup_s),
        "load": (
            f"{load.get('model')}, {load.get('users')} users"
            if load.get("model") == "closed"
            else (f"{load.get('model')}, {load.get('rate')} req/s" if load.get("model") else None)
        ),
        "servers": _simulated_servers(manifest) if simulated else _live_servers(manifest),
        "CPU limit method": manifest.cpu_limit_method,
        "CPU isolation": _isolation(_dict(testbed.get("cpu_layout"))),
        "testbed": testbed.get("kind") or _dict(config.get("testbed")).get("kind"),
        "host": ", ".join(
            str(v)
            for v in (
                host.get("hostname"),
                host.get("platform") or host.get("system"),
                f"{host['cpus']} CPUs" if host.get("cpus") else None,
            )
            if v
        ),
        "software": ", ".join(f"{k} {v}" for k, v in software.items() if v and k != "git_commit"),
        "git commit": software.get("git_commit"),
    }
    return {k: str(v) for k, v in facts.items() if v not in (None, "")}
