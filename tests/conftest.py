"""Shared fixtures for the whole suite, and how its tests are spread over workers.

``scripts/test`` runs the suite on pytest-xdist workers (``--dist loadgroup``). A module's
tests stay together on one worker, so its module fixtures (a balancer, servers, a
simulated run) are made once; every test that reads the one ``tiny`` run
(``tiny_run_dir``) joins one group, so that run is made once as well.

``slow`` marks what takes more than a few seconds: every test under ``tests/e2e``
(marked here), and the modules and tests marked in their files.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.run_fixture"]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)  # every end-to-end test is a real run
        if item.get_closest_marker("xdist_group"):
            continue
        fixtures = getattr(item, "fixturenames", ())
        group = "tiny_run" if "tiny_run_dir" in fixtures else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
