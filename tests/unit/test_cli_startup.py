"""The ``lblab`` command line stays light: every server, agent and balancer process of a
run imports it, so a heavy import there delays every start (measured: a ``twin``
registration that imported pandas made ``lblab server`` take 9 s to start on a busy
2-core machine, and timeline ``add`` events fired late)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "numpy", "pyarrow", "matplotlib", "simpy", "locust", "gevent", "rsocket")


def test_assembling_every_command_imports_nothing_heavy() -> None:
    code = f"import sys, lblab.cli; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "", f"lblab.cli pulls in {out.stdout.strip()}"
