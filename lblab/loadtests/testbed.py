"""What the runner needs of a testbed, and what a live testbed's processes give.

``Testbed`` is what ``loadtests/runner.py`` drives a run's plan through, phase by phase,
whatever runs the phases:

- ``locust_testbed.LocustTestbed``: a headless Locust per phase against live processes
  (``Processes``): the servers, agents and balancer nodes ``local_testbed.LocalTestbed``
  starts here, or a balancer someone else runs on hosts of theirs
  (``local_testbed.ExternalTestbed``, e.g. the ansible roles');
- ``simulator/simulated_testbed.SimulatedTestbed``: each phase simulated.

The runner keeps what is the same whichever it is: the plan and its adaptive blocks,
the manifest, the budget, resume, the answer. The experiment service
(``lblab/experiment/``) picks the testbed the config names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lblab.loadtests.plan import Phase
from lblab.loadtests.progress import RunProgress
from lblab.loadtests.runconfig import RunConfig
from lblab.procs import Child


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


class Testbed(Protocol):
    kind: str
    flush_grace: float
    """Seconds after a phase's end before everything it measured is surely written."""

    def start(self, strategy: str) -> None:
        """Ready for the first phase (which runs ``strategy``)."""

    def facts(self) -> dict[str, Any]:
        """What the manifest records of the started testbed (with ``cpu_limit_method``)."""

    def run_phase(
        self, phase: Phase, config: RunConfig, attempt: str, progress: RunProgress
    ) -> PhaseRun:
        """Run ``phase`` with ``config`` (the run's, with the phase's own length) as try
        ``attempt``, its requests part written; ``KeyboardInterrupt`` and ``WriteFailed``
        pass through."""

    def collect(self, phases: Sequence[Phase], before: float, force: bool = False) -> None:
        """The picks and cpu parts and the checks of the phases that ended before
        ``before`` and have none yet (``force``: again)."""

    def recover(self) -> None:
        """After a failed phase: put back what should run, so the next one can."""

    def stop(self) -> None: ...


class Processes(Protocol):
    """A live testbed's processes, here or on hosts, as ``LocustTestbed`` drives them."""

    kind: str
    changed: bool
    """A timeline event altered the pool; ``restore`` before the next phase."""

    @property
    def address(self) -> tuple[str, int]:
        """The balancer (the first node) that Locust's users connect to."""

    def start(self, strategy: str) -> None: ...

    def set_strategy(self, strategy: str) -> None:
        """The strategy of the next phase, with fresh state (``PUT /strategy``)."""

    def check_alive(self) -> list[str]:
        """Names of processes that should run and do not."""

    def restore(self) -> None:
        """Undo what a phase's timeline changed."""

    def stop(self) -> None: ...

    def balancer_addresses(self) -> tuple[str, ...]:
        """Every balancer node's ``HOST:PORT`` when there are several (the users spread
        over them); none with one."""

    def harness_pids(self, locust: Sequence[Child]) -> dict[str, list[int]]:
        """The processes whose CPU the validity checks read, by group."""

    def harness_cores(self) -> float | None:
        """The cores the harness may use without taking them from the servers (None:
        not known here)."""

    def facts(self) -> dict[str, Any]:
        """What the manifest records of the started testbed."""
