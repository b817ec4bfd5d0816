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


SEQUENCES = """
import json, random, sys
from lblab import compiled
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import STRATEGIES, make_strategy
from lblab.loadreport import LoadReport, ProbeAnswer

def lease(view):
    view.lease_remaining, view.lease_expires_at = 10**6, 1e9

out = {"status": compiled.status()}
for name in STRATEGIES:
    rng = random.Random(7)
    specs = [BackendSpec(f"s{i}", 1 + i % 3) for i in range(6)]
    strategy = make_strategy(name, rng=rng, weights={"s1": 2.0, "s4": 3.0})
    pool = Pool(specs, strategy)
    for view in pool.views:
        lease(view)
    picked, inflight, error = [], [], None
    try:
        for k in range(600):
            now = k * 0.0037
            if k == 200:
                pool.set_state("s2", Health.DOWN, now)
            if k == 260:
                pool.set_state("s2", Health.UP, now)
            if k == 300:
                pool.add(BackendSpec("s9", 2), now)
                lease(pool.views[-1])
            if k == 400:
                pool.remove("s0", now)
            req = RequestView(
                request_id=k,
                routing_key=f"key{k % 17}".encode() if k % 2 else None,
                client_address=f"10.0.{k % 7}.{k % 5}",
            )
            if k % 11 == 0:  # a replay that excludes a backend already tried
                req = req.excluding("s3", 1)
            view = pool.pick(req, now)
            for target in pool.probe_targets(now):
                pool.probe_sent(target.id)
                answer = ProbeAnswer(rif=k % 6, latency_ms=float(1 + k % 9))
                pool.probe_answer(target.id, answer, now)
            if view is None:
                picked.append("-")
                continue
            pool.dispatch(view, req, now)
            inflight.append((view, req))
            picked.append(view.id)
            if k % 3 != 0:  # leave a third of them in flight a while: loads differ
                done, done_req = inflight.pop(0)
                for source in ("response", "push"):
                    report = LoadReport(
                        server=done.id, source=source, t=now, service_ms=1.0 + k % 5,
                        inflight=k % 4, est_wait_ms=float(k % 6), queue_ms=float(k % 2),
                    )
                    pool.report(done.id, report, now)
                ok = k % 13 != 0
                outcome = Outcome(ok=ok, latency_ms=2.0 + k % 7, error_kind=None if ok else "TIMEOUT")
                pool.complete(done, done_req, outcome, now)
            if k % 50 == 0:  # agents: the servers' CPU, unequal
                for i, view in enumerate(pool.views):
                    cpu = LoadReport(
                        server=view.id, source="agent", t=now, cpu_util=0.15 * (i + 1),
                        qps=100.0, eps=0.0,
                    )
                    pool.report(view.id, cpu, now)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    out[name] = ["".join(picked), error, rng.random(), strategy.ties]
json.dump(out, sys.stdout)
"""


def test_every_strategy_picks_alike_compiled_and_as_plain_python():
    """The strategies are compiled (``lblab/compiled.py``), their exact definitions are
    written for Python: the same seeds give the same picks and leave the same random
    state either way, through weights, replays, health changes, backends added and
    removed, probes, failures and every kind of load report. It failed when a compiled strategy's constructor ran twice (mypyc's
    double ``__init__`` without ``allow_interpreted_subclasses``), drawing its seed anew."""

    def run(env: dict[str, str]) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-c", SEQUENCES],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    compiled_run = run(dict(os.environ))
    plain_run = run({**os.environ, compiled.OFF_ENV: "1"})
    assert compiled_run.pop("status").startswith("compiled"), compiled_run
    assert plain_run.pop("status").startswith("plain"), plain_run
    differ = [name for name in plain_run if compiled_run[name] != plain_run[name]]
    assert not differ, f"compiled and plain Python pick differently: {differ}"
    assert not [name for name, (_, error, _, _) in plain_run.items() if error], plain_run
    assert len({seq for seq, *_ in plain_run.values()}) > 10  # the strategies differ
