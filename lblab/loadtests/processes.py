"""A live testbed's processes, here or on hosts, as ``locust_testbed.LocustTestbed``
drives them: ``local_testbed.LocalProcesses`` (started here) and
``local_testbed.ExternalProcesses`` (a balancer someone else runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lblab.experiment.runconfig import TestbedKind
from lblab.procs import Child


class Processes(Protocol):
    """A live testbed's processes, here or on hosts, as ``LocustTestbed`` drives them."""

    kind: TestbedKind
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
