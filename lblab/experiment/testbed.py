"""What the runner needs of a testbed, and how a phase ended on one.

``Testbed`` is what ``experiment/runner.py`` drives a run's plan through, phase by phase,
whatever runs the phases. Two drivers implement it, and neither knows the other (an
import-linter contract in ``pyproject.toml`` holds them apart):

- ``loadtests/locust_testbed.LocustTestbed``: a headless Locust per phase against live
  processes (``Processes``): the servers, agents and balancer nodes
  ``loadtests/local_testbed.LocalProcesses`` starts here, or a balancer someone else runs
  on hosts of theirs (``local_testbed.ExternalProcesses``, e.g. the ansible roles');
- ``simulator/simulated_testbed.SimulatedTestbed``: each phase simulated.

The runner keeps what is the same whichever it is: the plan and its adaptive blocks,
the manifest, the budget, resume, the answer, and both ends of each phase's progress
line. The composition root (``lblab/app/testbeds.py``) picks the driver the config's
``[testbed] kind`` (``runconfig.TestbedKind``) names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lblab.experiment.plan import Phase
from lblab.experiment.progress import RunProgress
from lblab.experiment.runconfig import RunConfig, TestbedKind


@dataclass(frozen=True, slots=True)
class PhaseRun:
    """How a phase ended on its testbed, and the manifest's facts about it."""

    status: str
    """``done`` or ``failed``."""
    error: str | None
    ended: float
    """When the phase's load ended (epoch seconds)."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """The phase's manifest fields (``manifest.PhaseEntry``): requests, window, ..."""
    simulated_config: Mapping[str, Any] | None = None
    """A simulated phase's config (``SimConfig.describe``), for ``Manifest.phase_configs``."""


PHASE_SLACK_S = 30.0
"""Seconds a phase may run beyond its expected end (answers, a load generator's
start-up) before its driver calls it stuck."""


class Testbed(Protocol):
    kind: TestbedKind
    flush_grace: float
    """Seconds after a phase's end before everything it measured is surely written."""

    @classmethod
    def preflight(cls, config: RunConfig) -> str | None:
        """Before a run folder is made: a ``ConfigError`` if this driver cannot run
        ``config``; the line to show about what it will use (or None)."""

    def start(self, strategy: str) -> None:
        """Ready for the first phase (which runs ``strategy``)."""

    def facts(self) -> dict[str, Any]:
        """What the manifest records of the started testbed (with ``cpu_limit_method``)."""

    def run_phase(
        self, phase: Phase, config: RunConfig, attempt: str, progress: RunProgress
    ) -> PhaseRun:
        """Run ``phase`` with ``config`` (the run's, with the phase's own length) as try
        ``attempt``, its requests part written; ``KeyboardInterrupt`` and ``WriteFailed``
        pass through. The runner has started the phase's progress line and ends it; the
        driver moves it (``progress.update_phase``)."""

    def collect(self, phases: Sequence[Phase], before: float, force: bool = False) -> None:
        """The picks and cpu parts and the checks of the phases that ended before
        ``before`` and have none yet (``force``: again)."""

    def recollect(self, phases: Sequence[Phase]) -> None:
        """``lblab run --collect``: every finished phase's parts again from what it
        recorded (a ``ConfigError`` where a driver records nothing to collect)."""

    def recover(self) -> None:
        """After a failed phase: put back what should run, so the next one can."""

    def stop(self) -> None: ...
