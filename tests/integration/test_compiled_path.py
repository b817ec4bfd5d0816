"""The balancer's per-request path runs compiled after ``scripts/setup``, and as plain
Python whenever the build does not match the source (lblab/compiled.py).

The suite runs on the compiled path (``scripts/test`` runs ``scripts/setup``, which runs
``scripts/compile``): these tests make sure it does, so that every other test checks the
code the benchmarks measure, and that a stale build is never used.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from balancer_testbed import processes, served_counts, start_balancer, three_servers

from lblab import compiled

ROOT = Path(__file__).resolve().parents[2]
WHERE = (
    "import json, lblab.balancer.router as r, lblab.wire.codec as c, lblab.compiled as k; "
    "print(json.dumps([r.__file__, c.__file__, k.status()]))"
)


def _where(env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", WHERE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_setup_left_a_build_that_matches_the_source():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compile"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{done.stdout}{done.stderr} (scripts/setup builds it)"
    router, codec, status = _where()
    assert router.endswith(".so") and codec.endswith(".so"), status
    assert status == f"compiled ({len(compiled.MODULES)} modules, mypyc)", status


def test_the_tests_themselves_run_the_compiled_modules():
    import lblab.balancer.pool

    assert compiled.active(), compiled.status()
    assert lblab.balancer.pool.__file__.endswith(".so"), lblab.balancer.pool.__file__


def test_a_balancer_says_it_runs_compiled_and_forwards(tmp_path):
    servers = three_servers(tmp_path)
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path)
        kids.append(balancer)
        assert balancer.ready["compiled"] is True, balancer.ready
        counts = asyncio.run(served_counts(int(balancer.ready["port"]), 30, 3))
    assert sum(counts.values()) == 30, counts


def test_pure_python_on_request(tmp_path):
    router, _, status = _where({**os.environ, compiled.OFF_ENV: "1"})
    assert router.endswith("router.py")
    assert status == f"plain Python ({compiled.OFF_ENV} is set)"


def test_an_edited_source_runs_as_written_not_the_old_build(tmp_path):
    copy = tmp_path / "lblab"
    shutil.copytree(ROOT / "lblab", copy, ignore=shutil.ignore_patterns("__pycache__"))
    router = copy / "balancer" / "router.py"
    router.write_text(router.read_text() + "\nEDITED = True\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSAFEPATH": "1"}
    where_router, where_codec, status = _where(env)
    assert where_router == str(router), status
    assert where_codec == str(copy / "wire" / "codec.py"), "all or nothing: none compiled"
    assert status == "plain Python (router.py changed since the build; scripts/compile builds it)"
