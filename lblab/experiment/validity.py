"""The runner's side of the validity checks (``lblab/validity.py``): the facts of a phase.

The runner keeps ``lblab.validity.request_facts`` of each phase's request rows in the
manifest when the phase ends; ``phase_checks`` adds what arrives later (CPU samples,
picks) and what the runner measured of its own processes and of the machine's CPUs
(``loadtests.probe``: ``harness_cpu``, with ``disturbance``), and evaluates the checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lblab.experiment.runconfig import LoadConfig, RunConfig, TestbedKind
from lblab.manifest import PhaseEntry
from lblab.validity import judge, phase_facts


def phase_checks(
    entry: PhaseEntry,
    config: RunConfig,
    load: LoadConfig,
    cpu_servers: Sequence[str],
    picks_inside: int,
    harness_cores: float | None,
    capacity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest's ``verdicts`` and ``verdict`` of a phase; ``cpu_servers`` names the
    server of each CPU sample inside its window; ``harness_cores`` is what the harness
    may use without taking it from the servers (None: not known); ``capacity`` is the
    manifest's entry of the phase's scenario (``simulator/capacity.py``)."""
    window = entry.window
    if window is None:
        return {"verdicts": [], "verdict": "n/a"}
    harness = entry.harness_cpu
    servers = [s.id for s in config.servers]
    samples = {s: 0 for s in servers}
    for server in cpu_servers:
        if server in samples:
            samples[server] += 1
    generators = max(1, config.locust_workers + config.expect_workers)
    # What else ran where the servers did (``loadtests.probe``); an external testbed's
    # servers are elsewhere, so this machine's CPUs say nothing of theirs.
    disturbance = (
        harness.get("disturbance") if config.testbed.kind == TestbedKind.LOCAL else None
    ) or {}
    servers_cpu = disturbance.get("servers") or {}
    harness_cpu = disturbance.get("harness") or {}
    facts = phase_facts(
        window,
        entry.measured,
        unaccounted=entry.unaccounted or 0,
        generator_cores=harness.get("locust") or None,
        balancer_cores=entry.balancer_cores,
        agents_cores=sum(harness["agents"]) if harness.get("agents") else None,
        cores_left=harness_cores,
        samples_per_s={s: n / window.seconds for s, n in samples.items()}
        if window.seconds > 0 and cpu_servers
        else None,
        expected_samples_per_s=1.0 / config.testbed.agent_interval,
        picks_in_window=picks_inside,
        offered_rps=load.rate if load.model == "open" else None,
        interarrival_ms=1000.0 * generators / load.rate
        if load.model == "open" and load.rate
        else None,
        loaders=max(1, len(entry.loaders)),
        clocks=entry.clocks,
        server_cpus=servers_cpu.get("cpus"),
        servers_isolated=bool(disturbance.get("isolated")),
        outside_cores=servers_cpu.get("outside_cores"),
        steal_cores=servers_cpu.get("steal_cores"),
        harness_cpus=harness_cpu.get("cpus"),
        harness_outside_cores=harness_cpu.get("outside_cores"),
        harness_steal_cores=harness_cpu.get("steal_cores"),
        offered_capacity=offered_capacity(capacity),
    )
    return judge(facts)


def offered_capacity(capacity: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """(offered, total) of a manifest's ``capacity`` entry, when it has both."""
    found = capacity or {}
    offered, total = found.get("offered"), found.get("total")
    if found.get("batch"):
        return None
    if isinstance(offered, int | float) and isinstance(total, int | float):
        return float(offered), float(total)
    return None
