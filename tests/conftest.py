"""Shared fixtures for the whole suite, and the marks its tiers use.

``scripts/test`` runs the suite on pytest-xdist workers with ``--dist loadscope``: a
module's tests stay together on one worker, so its module fixtures (a balancer, servers,
a simulated run) are made once; the one ``tiny`` run (``tiny_run_dir``) is made once for
all workers (``tests/run_fixture.py``).

``slow`` marks what takes more than a few seconds: every test under ``tests/e2e``
(marked here), and the modules and tests marked in their files. Modules with slow tests
run first, the longest first.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.run_fixture", "tests.cli_in_process"]


LONGEST = "tests/e2e/test_ansible.py"
"""The one test that takes minutes (provisioning five namespace hosts, then three again)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)  # every end-to-end test is a real run
    # Long modules first: xdist hands modules out in this order, so the short ones fill
    # the workers' ends instead of one long module running alone at the end.
    slow = {_module(i) for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: (_module(i) != LONGEST, _module(i) not in slow))


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]
