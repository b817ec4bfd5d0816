"""Every command given bad files or absurd values: exit 2, one line on stderr, no traceback.

Flags the command line parser refuses (``--port 99999``) get the same one line.

Each case runs the entry point in this process (``tests/cli_in_process.py``: the real
exit code and output; where a command would start its long work a stub stands, so a
case whose validation failed to stop it fails instead of starting a server or a run).
``AS_PROCESSES`` also run as real ``lblab`` processes, one per kind of input, for what
only a process shows (the interpreter's own exit, nothing printed at import).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lblab.procs import lblab_command
from lblab.results import SCHEMAS


class Case(NamedTuple):
    args: tuple[str, ...]  # "{d}" stands for the folder of bad files
    says: str  # a word of the message (case-insensitive)


def _requests_table(**replace: pa.Array) -> pa.Table:
    """A one-row requests table to the contract, with some columns replaced."""
    schema = SCHEMAS["requests"]
    columns = {f.name: pa.array([None], type=f.type) for f in schema}
    columns.update(run_id=pa.array(["r"]), strategy=pa.array(["rr"]), scenario=pa.array(["sp+sr"]))
    columns.update(replace)
    return pa.table(columns)


def _results_dir(root: Path, name: str, requests: bytes | None, manifest: bytes | None) -> None:
    d = root / name
    d.mkdir()
    if requests is not None:
        (d / "requests.parquet").write_bytes(requests)
    if manifest is not None:
        (d / "manifest.json").write_bytes(manifest)


def _parquet_bytes(table: pa.Table, tmp: Path) -> bytes:
    pq.write_table(table, tmp)
    data = tmp.read_bytes()
    tmp.unlink()
    return data


TOML_FILES: Mapping[str, str | bytes] = {
    "malformed.toml": "[run\nduration = ",
    "binary.toml": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
    "servers5.toml": "servers = 5\n",
    "weights-unknown.toml": "[weights]\ns1 = 1\ns9 = 3\n",
    "timeout0.toml": '[run]\nrequest_timeout = "0s"\n',
    "duration-nan.toml": "[run]\nduration = nan\n",
    "duration-inf.toml": "[run]\nduration = inf\n",
    "users-huge.toml": "[load]\nusers = 1000000000000\n",
    "quota-nan.toml": '[[servers]]\nid = "s1"\ncpu_quota = nan\n[weights]\ns1 = 1\n',
    "workers-too-many.toml": '[[servers]]\nid = "s1"\nworkers = 64\n[weights]\ns1 = 1\n',
    "option-unknown.toml": '[strategy_options.lc]\ntie = "sideways"\n',
    "cell-huge.toml": (
        '[run]\nscenarios = ["big"]\n[scenario_defs.big]\n'
        'cells = [{package = "20MB", work = "10KB"}]\n'
    ),
    "sim-rate-nan.toml": "rate = nan\n",
    "sim-servers-text.toml": "servers = [5]\n",
    "sweep.toml": '[base]\nrequests = 100\n[grid]\nstrategy = ["rr", "p2c"]\n',
    "sim-speed-nan.toml": '[[servers]]\ncount = 2\nspeed = nan\nservice = "exp:10ms"\n',
}


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    for name, content in TOML_FILES.items():
        path = d / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    (d / "a-directory.toml").mkdir()
    (d / "a-file").write_text("not a directory\n")
    (d / "empty").mkdir()
    good = _parquet_bytes(_requests_table(), d / "tmp.parquet")
    foreign = _parquet_bytes(pa.table({"a": [1, 2], "b": ["x", "y"]}), d / "tmp.parquet")
    retyped = _parquet_bytes(
        _requests_table(latency_ms=pa.array(["fast"]), ok=pa.array(["yes"])), d / "tmp.parquet"
    )
    manifest = b'{"run_id": "r"}'
    _results_dir(d, "truncated", good[: len(good) // 2], manifest)
    _results_dir(d, "not-parquet", b"run_id,latency_ms\nr,1.0\n", manifest)
    _results_dir(d, "foreign", foreign, manifest)
    _results_dir(d, "retyped", retyped, manifest)
    _results_dir(d, "manifest-not-json", good, b"{run_id: r")
    _results_dir(d, "manifest-list", good, b"[1, 2, 3]")
    _results_dir(d, "manifest-dir", good, None)
    (d / "manifest-dir" / "manifest.json").mkdir()
    _results_dir(d, "run-foreign-manifest", None, b'{"run_id": "r", "phases": "none"}')
    return d


CASES: dict[str, Case] = {
    # ---- lblab run: config files and flags (--print-config stops before any work)
    "run-malformed-toml": Case(("run", "--config", "{d}/malformed.toml", "--print-config"), "not valid toml"),
    "run-binary-config": Case(("run", "--config", "{d}/binary.toml", "--print-config"), "not utf-8"),
    "run-config-is-dir": Case(("run", "--config", "{d}/a-directory.toml", "--print-config"), "is a directory"),
    "run-servers-5": Case(("run", "--config", "{d}/servers5.toml", "--print-config"), "servers: give a list"),
    "run-weights-unknown-server": Case(("run", "--config", "{d}/weights-unknown.toml", "--print-config"), "weights.s9"),
    "run-request-timeout-0": Case(("run", "--config", "{d}/timeout0.toml", "--print-config"), "request_timeout"),
    "run-duration-nan-toml": Case(("run", "--config", "{d}/duration-nan.toml", "--print-config"), "finite"),
    "run-duration-inf-toml": Case(("run", "--config", "{d}/duration-inf.toml", "--print-config"), "finite"),
    "run-duration-huge-flag": Case(("run", "--duration", "1000000000000", "--print-config"), "longer than a week"),
    "run-users-huge": Case(("run", "--config", "{d}/users-huge.toml", "--print-config"), "load.users"),
    "run-cpu-quota-nan": Case(("run", "--config", "{d}/quota-nan.toml", "--print-config"), "cpu_quota"),
    "run-workers-over-inflight": Case(("run", "--config", "{d}/workers-too-many.toml", "--print-config"), "--workers 64"),
    "run-unknown-strategy": Case(("run", "--strategies", "rr,nope", "--print-config"), "unknown strategy 'nope'"),
    "run-unknown-scenario": Case(("run", "--scenarios", "sp+sr,huge", "--print-config"), "unknown scenario 'huge'"),
    "run-unknown-option-value": Case(("run", "--config", "{d}/option-unknown.toml", "--print-config"), "sideways"),
    "run-cell-20mb": Case(("run", "--config", "{d}/cell-huge.toml", "--print-config"), "package: 20000000 must be at most"),
    "run-out-is-a-file": Case(("run", "--preset", "tiny", "--out", "{d}/a-file"), "cannot be created"),
    "run-resume-no-manifest": Case(("run", "--resume", "--out", "{d}/empty"), "does not exist"),
    "run-resume-manifest-not-json": Case(("run", "--resume", "--out", "{d}/manifest-not-json"), "not valid json"),
    "run-resume-foreign-manifest": Case(("run", "--resume", "--out", "{d}/run-foreign-manifest"), "not written by"),
    # ---- lblab simulate / calibrate / reproduce
    "simulate-servers-not-a-number": Case(("simulate", "--servers", "many"), "--servers"),
    "simulate-rate-nan": Case(("simulate", "--rate", "nan", "--requests", "10"), "rate"),
    "simulate-requests-huge": Case(("simulate", "--requests", "1000000000000"), "requests"),
    "simulate-servers-0": Case(("simulate", "--servers", "0", "--requests", "10"), "servers"),
    "simulate-one-strategy-twice": Case(("simulate", "-s", "prequal", "-s", "prequal[q_rif=0.6]", "--requests", "10"), "names 'prequal' twice"),
    "simulate-unknown-strategy-second": Case(("simulate", "-s", "rr", "-s", "nope", "--requests", "10"), "unknown strategy 'nope'"),
    "simulate-rate-nan-toml": Case(("simulate", "--config", "{d}/sim-rate-nan.toml"), "rate"),
    "simulate-servers-list-of-numbers": Case(("simulate", "--config", "{d}/sim-servers-text.toml"), "servers"),
    "simulate-speed-nan": Case(("simulate", "--config", "{d}/sim-speed-nan.toml"), "speed"),
    "simulate-binary-config": Case(("simulate", "--config", "{d}/binary.toml"), "not utf-8"),
    "simulate-out-is-a-file": Case(("simulate", "--requests", "10", "--out", "{d}/a-file"), "is a file"),
    "calibrate-truncated": Case(("calibrate", "{d}/truncated"), "truncated"),
    "calibrate-foreign": Case(("calibrate", "{d}/foreign"), "lacks required columns"),
    "reproduce-ingram-requests-huge": Case(("reproduce", "ingram", "--requests", "10,1000000000000"), "--requests"),
    "reproduce-cheetah-servers-0": Case(("reproduce", "cheetah", "--servers", "0"), "--servers"),
    "reproduce-ingram-seeds-0": Case(("reproduce", "ingram", "--seeds", "0"), "--seeds"),
    "reproduce-cheetah-seeds-0": Case(("reproduce", "cheetah", "--seeds", "0"), "--seeds"),
    "reproduce-martins-seeds-0": Case(("reproduce", "martins", "--seeds", "0"), "--seeds"),
    "reproduce-linkerd-seeds-0": Case(("reproduce", "linkerd", "--seeds", "0"), "--seeds"),
    "reproduce-prequal-seeds-0": Case(("reproduce", "prequal", "--seeds", "0"), "--seeds"),
    "reproduce-cheetah-seeds-not-a-number": Case(("reproduce", "cheetah", "--seeds", "five"), "--seeds"),
    "sweep-tls-dir-without-scheduler": Case(("sweep", "{d}/sweep.toml", "--out", "{d}/sweep-out", "--tls-dir", "{d}/empty"), "not a local cluster"),
    "sweep-tls-without-certificates": Case(("sweep", "{d}/sweep.toml", "--out", "{d}/sweep-out", "--scheduler", "tls://127.0.0.1:9"), "--tls-dir"),
    "sweep-tls-dir-empty": Case(("sweep", "{d}/sweep.toml", "--out", "{d}/sweep-out", "--scheduler", "tls://127.0.0.1:9", "--tls-dir", "{d}/empty"), "ca.pem, cert.pem, key.pem missing"),
    "sweep-tls-dir-for-tcp": Case(("sweep", "{d}/sweep.toml", "--out", "{d}/sweep-out", "--scheduler", "tcp://127.0.0.1:9", "--tls-dir", "{d}/empty"), "tls://host:port"),
    "testbed-hosts-0": Case(("testbed", "up", "--hosts", "0", "--root", "{d}/testbed"), "--hosts"),
    # ---- lblab report / notebooks: results folders
    "twin-truncated-parquet": Case(("twin", "{d}/truncated"), "truncated"),
    "validate-unknown-format": Case(("validate", "--quick", "--format", "xml"), "--format"),
    "report-without-a-folder": Case(("report",), "missing argument"),
    "report-missing-dir": Case(("report", "{d}/nope"), "not a directory"),
    "report-empty-dir": Case(("report", "{d}/empty"), "no requests.parquet"),
    "report-truncated-parquet": Case(("report", "{d}/truncated"), "truncated"),
    "report-not-parquet": Case(("report", "{d}/not-parquet"), "not parquet"),
    "report-foreign-parquet": Case(("report", "{d}/foreign"), "lacks required columns"),
    "report-retyped-columns": Case(("report", "{d}/retyped"), "latency_ms is string"),
    "report-manifest-not-json": Case(("report", "{d}/manifest-not-json"), "not valid json"),
    "report-manifest-a-list": Case(("report", "{d}/manifest-list"), "not an object"),
    "report-manifest-a-dir": Case(("report", "{d}/manifest-dir"), "is a directory"),
    "notebooks-foreign-parquet": Case(("notebooks", "{d}/foreign", "--no-open"), "lacks required columns"),
    # ---- lblab server / agent / balancer / locust-workers: flags
    "server-delay-nan": Case(("server", "--id", "s1", "--port", "0", "--delay-ms", "nan"), "--delay-ms"),
    "server-drain-inf": Case(("server", "--id", "s1", "--port", "0", "--drain-timeout", "inf"), "--drain-timeout"),
    "agent-pid-negative": Case(("agent", "--server", "s1", "--pid", "-5", "--report-to", "127.0.0.1:9"), "--pid"),
    "agent-allowance-nan": Case(("agent", "--server", "s1", "--pid", "1", "--report-to", "127.0.0.1:9", "--allowance", "nan"), "--allowance"),
    "balancer-port-huge": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "99999"), "--port"),
    "balancer-picks-is-dir": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--picks", "{d}/a-directory.toml"), "directory"),
    "balancer-report-token-short": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--report-token", "short"), "--report-token"),
    "balancer-aperture-unplaced": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--aperture", "deterministic"), "--instance"),
    "balancer-aperture-instance-past-k": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--aperture", "deterministic", "--instance", "4", "--instances", "4"), "instance 4"),
    "balancer-aperture-mode-unknown": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--aperture", "ring", "--instance", "0", "--instances", "4"), "not one of"),
    "balancer-aperture-instance-alone": Case(("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0", "--instance", "0"), "give --aperture"),
    "simulate-aperture-size-zero": Case(("simulate", "--aperture", "random", "--aperture-size", "0"), "aperture_size"),
    "agent-report-token-space": Case(("agent", "--server", "s1", "--pid", "1", "--report-to", "127.0.0.1:9", "--report-token", "a token with spaces"), "--report-token"),
    "locust-workers-root-is-file": Case(("locust-workers", "--master", "127.0.0.1:9", "--records-root", "{d}/a-file"), "is a file"),
    "locust-workers-processes-huge": Case(("locust-workers", "--master", "127.0.0.1:9", "--records-root", "{d}/records", "--processes", "1000000"), "--processes"),
    "scorecard-testbed-unknown": Case(("scorecard", "--testbed", "cloud"), "give simulated, local"),
    "scorecard-case-unknown": Case(("scorecard", "--scenarios", "one-slo"), "not a case of the library"),
    "scorecard-case-no-table": Case(("scorecard", "--scenarios", "{d}/servers5.toml"), "needs a [scorecard] table"),
    "scorecard-case-malformed": Case(("scorecard", "--scenarios", "{d}/malformed.toml"), "not valid toml"),
    "scorecard-case-is-dir": Case(("scorecard", "--scenarios", "{d}/a-directory.toml"), "no such case file"),
    "scorecard-budget-text": Case(("scorecard", "--budget", "soon"), "--budget"),
    "scorecard-strategy-unknown": Case(("scorecard", "-s", "nope"), "unknown strategy"),
    "scorecard-format-unknown": Case(("scorecard", "--format", "pdf"), "--format"),
}  # fmt: skip


AS_PROCESSES = (
    "run-malformed-toml",
    "simulate-rate-nan",
    "report-truncated-parquet",
    "balancer-port-huge",
    "server-delay-nan",
)


def _check(case: Case, code: int | str, out: str, err: str) -> None:
    shown = f"exit {code}\nstdout: {out[-800:]}\nstderr: {err[-2000:]}"
    assert code == 2, shown
    assert "Traceback" not in err + out, shown
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    assert lines[0].startswith("error: "), shown
    assert case.says.lower() in lines[0].lower(), shown


def _argv(case: Case, bad_files: Path) -> list[str]:
    return [a.replace("{d}", str(bad_files)) for a in case.args]


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_exits_2_with_one_line(name: str, bad_files: Path, cli: Any) -> None:
    case = CASES[name]
    outcome = cli(*_argv(case, bad_files))
    _check(case, outcome.code, outcome.out, outcome.err)


@pytest.mark.parametrize("name", AS_PROCESSES)
def test_bad_input_exits_2_with_one_line_as_a_process(name: str, bad_files: Path) -> None:
    case = CASES[name]
    argv = lblab_command(*_argv(case, bad_files))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=bad_files)
    _check(case, out.returncode, out.stdout, out.stderr)


def test_at_least_30_cases_over_every_command_that_reads_input() -> None:
    assert len(CASES) >= 30
    commands = {case.args[0] for case in CASES.values()}
    assert commands >= {"run", "simulate", "calibrate", "reproduce", "report", "notebooks",
                        "server", "agent", "balancer", "locust-workers", "testbed", "twin",
                        "validate"}  # fmt: skip
