"""One testbed factory: the driver of each ``[testbed] kind``.

``local`` and ``external`` run every phase as a headless Locust against live processes
(``loadtests/locust_testbed.py``); ``simulated`` simulates it (``simulator/
simulated_testbed.py``). Both implement ``experiment.testbed.Testbed``; nothing below
this module chooses between them.
"""

from __future__ import annotations

from pathlib import Path

from lblab.experiment.runconfig import RunConfig, TestbedKind
from lblab.experiment.testbed import Testbed
from lblab.loadtests.locust_testbed import LocustTestbed
from lblab.manifest import ManifestFile
from lblab.simulator.simulated_testbed import SimulatedTestbed

DRIVERS: dict[TestbedKind, type[LocustTestbed] | type[SimulatedTestbed]] = {
    TestbedKind.LOCAL: LocustTestbed,
    TestbedKind.EXTERNAL: LocustTestbed,
    TestbedKind.SIMULATED: SimulatedTestbed,
}
"""The driver class of each kind (every kind has one)."""


def preflight(config: RunConfig) -> str | None:
    """The driver's checks of ``config`` before a run folder is made (a ``ConfigError``
    naming the field), and the line to show about what it will use."""
    return DRIVERS[config.testbed.kind].preflight(config)


def make_testbed(config: RunConfig, run_dir: Path, manifest: ManifestFile) -> Testbed:
    """The testbed that runs ``config``'s phases into ``run_dir``."""
    return DRIVERS[config.testbed.kind](config, run_dir, manifest)
