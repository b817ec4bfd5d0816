"""The in-class anchor of ``benchmarks/bench_balancer.py`` (``benchmarks/haproxy_h2.py``)
runs for real: HAProxy takes its config, h2load's output parses, and the strace of
``--strace`` sees both sides of the proxy.

Three ``nghttpd`` and HAProxy over them, one short h2load run through it (a few seconds
in all); skipped, with the reason, where haproxy, h2load or nghttpd is missing
(``scripts/setup`` installs them).
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.benchmark_scripts import bench

h2 = bench("haproxy_h2")
pytestmark = pytest.mark.skipif(bool(h2.missing_tools()), reason=h2.missing_tools() or "")


def test_the_config_is_haproxys_http2_on_both_sides(tmp_path):
    cfg = tmp_path / "haproxy.cfg"
    text = h2.write_config(cfg, 8443, [9001, 9002, 9003], streams=128)
    assert "    mode http\n" in text and "    bind 127.0.0.1:8443 proto h2\n" in text
    assert text.count(" proto h2\n") == 4 and "    balance roundrobin\n" in text
    assert "    nbthread 1\n" in text and "tune.h2.max-concurrent-streams 128" in text
    checked = subprocess.run(
        ["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_h2load_through_haproxy_parses_and_strace_sees_both_sides(tmp_path):
    bed = h2.start_bed(tmp_path / "h2", {"100B": 100}, "POST")
    sb = bench("strace_batching")
    tracer = None
    try:
        if not sb.missing():
            tracer = sb.Tracer(bed.haproxy.pid, bed.port, bed.backend_ports, tmp_path / "st")
            tracer.start()
        run = h2.start_h2load(
            bed.url("100B", True), 4, 0.5, 0.1, tmp_path / "log.tsv", bed.body("100B")
        )
        time.sleep(max(0.0, run.opens_at - time.monotonic()))
        t0 = time.time()
        time.sleep(0.5)
        t1 = time.time()
        summary, log = run.finish()
        batching = tracer.finish(t0, t1, 1) if tracer else None
    finally:
        if tracer is not None:
            tracer.finish(0.0, 0.0, 0)  # a no-op once finished
        bed.stop()
    assert summary["succeeded"] == summary["2xx"] == len(log) > 0, summary
    assert summary["failed"] == summary["errored"] == summary["timeout"] == 0
    assert summary["req/s"] > 0
    assert {line.status for line in log} == {200}
    latencies, others, warning = h2.in_window(log, t0, t1)
    assert latencies and others == 0 and not warning
    assert latencies == sorted(latencies) and 0 < latencies[len(latencies) // 2] < 1.0
    assert len(latencies) < len(log)  # the window is inside h2load's measured phase
    if batching is not None:
        for side in sb.SIDES:
            for kind in ("read", "write"):
                assert batching.calls[side, kind] > 0, (side, kind, dict(batching.calls))


def test_h2load_summary_without_a_run_is_an_error():
    with pytest.raises(ValueError, match="no h2load summary"):
        h2.parse_summary("connect to 127.0.0.1:1 failed: Connection refused\n")
