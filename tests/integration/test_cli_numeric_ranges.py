"""Every numeric option of every command, and every numeric config key, over its whole
range: 0, 1e-300, 1e300, NaN, +-infinity, a negative and the edges of its range.

Each value either works (exit 0: a simulation prints its table, ``--print-config`` its
TOML; a command that would start a long-lived process or a long study reaches it with
the value taken, where a stub stands in for the work) or is refused: exit 2 and one
line on stderr, ``error: ...`` naming the option, never a traceback. The table below
is the ranges' one list; ``lblab.config`` and the configs it checks hold the rules.

The commands run in this process through ``lblab.cli.main``, the entry point itself
(exit codes and the one-line error included: ``tests/cli_in_process.py``): about 1000
cases in a few seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.cli_in_process import Outcome

EDGES = ("0", "1e-300", "1e300", "nan", "inf", "-inf", "-1")
"""Tried on every option; each one is in its option's ``ok`` or it must be refused."""


class Opt(NamedTuple):
    argv: tuple[str, ...]  # the command and what it needs; "{v}" is the value tried
    says: str  # what the refusal names: the option or the config key ("a|b": either)
    ok: tuple[str, ...]  # values that work; every other value tried is refused
    extra: tuple[str, ...] = ()  # values tried besides EDGES (range edges, just past them)


SERVER = ("server", "--id", "s1", "--port", "0")
AGENT = ("agent", "--server", "s1", "--pid", str(os.getpid()), "--report-to", "127.0.0.1:9")
BALANCER = ("balancer", "--backend", "s1=127.0.0.1:9", "--port", "0")
RUN = ("run", "--preset", "tiny", "--print-config")
SIM = ("simulate", "--requests", "10")
CLOSED = (*SIM, "--users", "1")
APERTURE = ("--aperture", "deterministic")


def o(argv: tuple[str, ...], says: str, ok: tuple[str, ...], *extra: str) -> Opt:
    return Opt(argv, says, ok, extra)


OPTIONS: dict[str, Opt] = {
    # ---- lblab server (servers/server.py ServerConfig)
    "server --port": o((*SERVER, "--port", "{v}"), "--port", ("0", "65535"), "65536"),
    "server --cpu-quota": o((*SERVER, "--cpu-quota", "{v}"), "--cpu-quota", ("0.01", "1"), "0.009"),
    "server --max-inflight": o((*SERVER, "--max-inflight", "{v}"), "--max-inflight", ("1", "1000000"), "1000001"),
    "server --workers": o((*SERVER, "--max-inflight", "2000", "--workers", "{v}"), "--workers", ("1", "1024"), "1025"),
    "server --delay-ms": o((*SERVER, "--delay-ms", "{v}"), "--delay-ms", ("0", "1e-300", "3600000"), "3600001"),
    "server --drain-timeout": o((*SERVER, "--drain-timeout", "{v}"), "--drain-timeout", ("1e-300", "3600"), "3601"),
    "server --setup-timeout": o((*SERVER, "--setup-timeout", "{v}"), "--setup-timeout", ("0.05", "600"), "601"),
    "server --max-connections": o((*SERVER, "--max-connections", "{v}"), "--max-connections", ("1", "1000000"), "1000001"),
    "server --max-pending-setup": o((*SERVER, "--max-pending-setup", "{v}"), "--max-pending-setup", ("1", "1000000"), "1000001"),
    # ---- lblab agent (servers/agent.py AgentConfig)
    "agent --pid": o(("agent", "--server", "s1", "--report-to", "127.0.0.1:9", "--pid", "{v}"), "--pid", ("1", "4194304"), "4194305"),
    "agent --interval": o((*AGENT, "--interval", "{v}"), "--interval", ("0.01", "60"), "61"),
    "agent --allowance": o((*AGENT, "--allowance", "{v}"), "--allowance", ("0.01", "4096"), "4097"),
    # ---- lblab balancer (balancer/command.py, NodeConfig, HealthConfig)
    "balancer --port": o((*BALANCER, "--port", "{v}"), "--port", ("0", "65535"), "65536"),
    "balancer --agent-port": o((*BALANCER, "--agent-port", "{v}"), "--agent-port", ("0", "65535"), "65536"),
    "balancer --admin-port": o((*BALANCER, "--admin-port", "{v}"), "--admin-port", ("0", "65535"), "65536"),
    "balancer --request-timeout": o((*BALANCER, "--request-timeout", "{v}"), "--request-timeout", ("1e-300", "3600"), "3601"),
    "balancer --max-frame-bytes": o((*BALANCER, "--max-frame-bytes", "{v}"), "--max-frame-bytes", ("64", "16777215"), "63", "16777216"),
    "balancer --seed": o((*BALANCER, "--seed", "{v}"), "--seed", ("0", "4294967295"), "4294967296"),
    "balancer --setup-timeout": o((*BALANCER, "--setup-timeout", "{v}"), "--setup-timeout", ("0.05", "600"), "601"),
    "balancer --max-connections": o((*BALANCER, "--max-connections", "{v}"), "--max-connections", ("1", "1000000"), "1000001"),
    "balancer --client-max-streams": o((*BALANCER, "--client-max-streams", "{v}"), "--client-max-streams", ("1", "1000000"), "1000001"),
    "balancer --client-max-held-bytes": o((*BALANCER, "--client-max-held-bytes", "{v}"), "--client-max-held-bytes", ("1", "17179869184"), "17179869185"),
    "balancer --backend-max-held-bytes": o((*BALANCER, "--backend-max-held-bytes", "{v}"), "--backend-max-held-bytes", ("1", "17179869184"), "17179869185"),
    "balancer --max-pending-setup": o((*BALANCER, "--max-pending-setup", "{v}"), "--max-pending-setup", ("1", "1000000"), "1000001"),
    "balancer --eject-after": o((*BALANCER, "--eject-after", "{v}"), "--eject-after", ("0", "1000000"), "1000001"),
    "balancer --eject-base": o((*BALANCER, "--eject-base", "{v}"), "--eject-base|eject_base", ("1e-300", "30s"), "8d"),
    "balancer --eject-max": o((*BALANCER, "--eject-max", "{v}"), "--eject-max|eject_max", ("1", "604800"), "604801"),
    "balancer --panic-threshold": o((*BALANCER, "--panic-threshold", "{v}"), "--panic-threshold", ("0", "1e-300", "100"), "101"),
    "balancer --success-rate-threshold": o((*BALANCER, "--success-rate-threshold", "{v}"), "--success-rate-threshold", ("0", "1e-300", "100"), "101"),
    "balancer --success-rate-window": o((*BALANCER, "--success-rate-window", "{v}"), "--success-rate-window|success_rate_window", ("1e-300", "3600"), "3601"),
    "balancer --slow-start-window": o((*BALANCER, "--slow-start-window", "{v}"), "--slow-start-window", ("0", "1e-300", "168h"), "169h"),
    "balancer --slow-start-aggression": o((*BALANCER, "--slow-start-aggression", "{v}"), "--slow-start-aggression", ("1e-300", "1000"), "0"),
    "balancer --slow-start-min-weight": o((*BALANCER, "--slow-start-min-weight", "{v}"), "--slow-start-min-weight", ("0", "1e-300", "100"), "100.5"),
    "balancer --slow-start-fast-after": o((*BALANCER, "--slow-start-fast-after", "{v}"), "--slow-start-fast-after", ("0", "1000000"), "1000001"),
    "balancer --slow-start-fast-ratio": o((*BALANCER, "--slow-start-fast-ratio", "{v}"), "--slow-start-fast-ratio", ("1e-300", "1000"), "1000.5"),
    "balancer --success-rate-min-requests": o((*BALANCER, "--success-rate-min-requests", "{v}"), "--success-rate-min-requests", ("1", "1000000"), "1000001"),
    "balancer --weights": o((*BALANCER, "--weights", "s1={v}"), "--weights s1", ("1e-300", "1000000"), "1000001"),
    "balancer --aperture-size": o((*BALANCER, *APERTURE, "--instance", "0", "--instances", "1", "--aperture-size", "{v}"), "--aperture-size", ("2", "100000"), "1", "100001"),
    "balancer --instances": o((*BALANCER, *APERTURE, "--instance", "0", "--instances", "{v}"), "--instances", ("1", "100000"), "100001"),
    "balancer --instance": o((*BALANCER, *APERTURE, "--instances", "4", "--instance", "{v}"), "instance", ("0", "3"), "4"),
    # ---- lblab run: flags (--print-config checks the whole config, starts nothing)
    "run --duration": o((*RUN, "--duration", "{v}"), "run.duration", ("1e-300", "604800"), "604801"),
    "run --warmup": o((*RUN, "--warmup", "{v}"), "run.warmup", ("0", "1e-300", "604800"), "604801"),
    "run --users": o((*RUN, "--users", "{v}"), "--users|load.users", ("1", "100000"), "100001"),
    "run --replications": o((*RUN, "--replications", "{v}"), "--replications|run.replications", ("1", "1000"), "1001"),
    "run --twin-scale": o((*RUN, "--twin-scale", "{v}"), "--twin-scale", ("1", "100000"), "100001"),
    "run --locust-workers": o((*RUN, "--locust-workers", "{v}"), "--locust-workers|run.locust_workers", ("0", "256"), "257"),
    "run --expect-workers": o((*RUN, "--locust-master-bind", "127.0.0.1", "--expect-workers", "{v}"), "--expect-workers|expect_workers|locust_master_bind", ("1", "256"), "257"),
    "run --seed": o((*RUN, "--seed", "{v}"), "--seed|run.seed", ("0", "4294967295"), "4294967296"),
    # ---- lblab locust-workers, lblab ui
    "locust-workers --processes": o(("locust-workers", "--master", "127.0.0.1:9", "--records-root", "{tmp}/records", "--processes", "{v}"), "--processes", ("1", "256"), "257"),
    "ui --web-port": o(("ui", "--out", "{tmp}/ui", "--web-port", "{v}"), "--web-port", ("{port}",), "65536"),
    "ui --warmup": o(("ui", "--out", "{tmp}/ui", "--web-port", "{port}", "--warmup", "{v}"), "run.warmup", ("0", "1e-300", "604800"), "604801"),
    # ---- lblab simulate (simulator/config.py SimConfig): the accepted values really run
    "simulate --servers": o((*SIM, "--servers", "{v}"), "--servers|servers", ("1", "3"), "100001"),
    "simulate --requests": o(("simulate", "--requests", "{v}"), "--requests|requests", ("1", "1000"), "1000000001"),
    "simulate --workers": o((*SIM, "--workers", "{v}"), "--workers|workers", ("1", "10000"), "10001"),
    "simulate --rate": o((*SIM, "--rate", "{v}"), "rate", ("0.1", "1000000"), "1e-5", "1000001"),
    "simulate --users": o((*SIM, "--users", "{v}"), "--users|users", ("1", "100000"), "100001"),
    "simulate --think": o((*CLOSED, "--think", "{v}"), "think", ("0", "1e-300", "100s"), "1d"),
    "simulate --routing-keys": o((*SIM, "-s", "ring-hash", "--routing-keys", "{v}"), "--routing-keys|routing_keys", ("0", "1000000"), "1000001"),
    "simulate --report-period": o((*SIM, "--report-period", "{v}"), "report_period", ("0.001", "604800"), "0.0009"),
    "simulate --report-delay": o((*SIM, "--report-delay", "{v}"), "report_delay", ("0", "1e-300", "604800"), "604801"),
    "simulate --client-delay": o((*SIM, "--client-delay", "{v}"), "client_delay", ("0", "1e-300", "1000")),
    "simulate --server-delay": o((*SIM, "--server-delay", "{v}"), "server_delay", ("0", "1e-300", "1000")),
    "simulate --deadline": o((*SIM, "--deadline", "{v}"), "deadline", ("1e-300", "none", "604800"), "604801"),
    "simulate --max-tries": o((*SIM, "--max-tries", "{v}"), "--max-tries|max_tries", ("1", "100"), "101"),
    "simulate --picks-every": o((*SIM, "--picks-every", "{v}"), "--picks-every|picks_every", ("0", "1000000000"), "1000000001"),
    "simulate --seed": o((*SIM, "--seed", "{v}"), "--seed|seed", ("0", "4294967295"), "4294967296"),
    "simulate --balancers": o((*SIM, "--balancers", "{v}"), "--balancers|balancers", ("1", "1024"), "1025"),
    "simulate --aperture-size": o((*SIM, *APERTURE, "--aperture-size", "{v}"), "--aperture-size|aperture_size", ("2", "100000"), "1", "100001"),
    "simulate --replications": o((*SIM, "--replications", "{v}"), "--replications", ("1", "2"), "1001"),
    "simulate --service fixed": o((*SIM, "--service", "fixed:{v}"), "service", ("0", "1e-300", "1000")),
    "simulate --service lognormal sigma": o((*SIM, "--service", "lognormal:10ms,{v}"), "sigma", ("1e-300", "10"), "11"),
    "simulate --service bimodal p_slow": o((*SIM, "--service", "bimodal:1ms,2ms,{v}"), "p_slow", ("0", "1e-300", "1"), "1.1"),
    "simulate --service json b": o((*SIM, "--service", "json:a=1ms,b={v}"), "b", ("0", "1e-300", "1e-3"), "0.0011"),
    # ---- lblab validate, twin, reproduce (the studies stubbed; their refusals are real)
    "validate --jobs": o(("validate", "--format", "json", "--jobs", "{v}"), "--jobs", ("1", "64"), "65"),
    "twin --scale": o(("twin", "{tmp}", "--scale", "{v}"), "--scale", (), "100001"),
    "twin --scale-replications": o(("twin", "{tmp}", "--scale-replications", "{v}"), "--scale-replications", (), "101"),
    "twin --scale-requests": o(("twin", "{tmp}", "--scale-requests", "{v}"), "--scale-requests", (), "99", "10000001"),
    "twin --repeats": o(("twin", "{tmp}", "--repeats", "{v}"), "--repeats", (), "21"),
    "reproduce ingram --requests": o(("reproduce", "ingram", "--requests", "{v}"), "--requests", ("1", "10000000"), "10000001"),
    "reproduce ingram --seeds": o(("reproduce", "ingram", "--seeds", "{v}"), "--seeds", ("1", "1000"), "1001"),
    "reproduce cheetah --servers": o(("reproduce", "cheetah", "--servers", "{v}"), "--servers", ("1", "100000"), "100001"),
    "reproduce cheetah --active": o(("reproduce", "cheetah", "--active", "{v}"), "--active", ("1", "10000000"), "10000001"),
    "reproduce cheetah --awrr-servers": o(("reproduce", "cheetah", "--awrr-servers", "{v}"), "--awrr-servers", ("1", "100000"), "100001"),
    "reproduce cheetah --awrr-load": o(("reproduce", "cheetah", "--awrr-load", "{v}"), "--awrr-load", ("0.05", "0.95"), "0.96"),
    "reproduce cheetah --runs": o(("reproduce", "cheetah", "--runs", "{v}"), "--runs", ("1", "1000"), "1001"),
    "reproduce cheetah --jobs": o(("reproduce", "cheetah", "--jobs", "{v}"), "--jobs", ("1", "64"), "65"),
    "reproduce cheetah --seed": o(("reproduce", "cheetah", "--seed", "{v}"), "--seed", ("0", "4294967295"), "4294967296"),
    "reproduce martins --rates": o(("reproduce", "martins", "--rates", "{v}"), "--rates", ("1", "10000000"), "10000001"),
    "reproduce martins --seconds": o(("reproduce", "martins", "--seconds", "{v}"), "--seconds", ("0.1", "3600"), "3601"),
    "reproduce martins --seeds": o(("reproduce", "martins", "--seeds", "{v}"), "--seeds", ("1", "1000"), "1001"),
    "reproduce linkerd --seconds": o(("reproduce", "linkerd", "--seconds", "{v}"), "--seconds", ("1", "3600"), "3601"),
    "reproduce linkerd --rate": o(("reproduce", "linkerd", "--rate", "{v}"), "--rate", ("1", "100000"), "100001"),
    "reproduce linkerd --seed": o(("reproduce", "linkerd", "--seed", "{v}"), "--seed", ("0", "4294967295"), "4294967296"),
    "reproduce linkerd --jobs": o(("reproduce", "linkerd", "--jobs", "{v}"), "--jobs", ("1", "64"), "65"),
    "reproduce prequal --seconds": o(("reproduce", "prequal", "--seconds", "{v}"), "--seconds", ("14", "3600"), "13.9", "3601"),
    "reproduce prequal --seed": o(("reproduce", "prequal", "--seed", "{v}"), "--seed", ("0", "4294967295"), "4294967296"),
    "reproduce prequal --jobs": o(("reproduce", "prequal", "--jobs", "{v}"), "--jobs", ("1", "64"), "65"),
    "testbed up --hosts": o(("testbed", "up", "--root", "{tmp}/tb", "--loaders", "1", "--hosts", "{v}"), "--hosts", ("3", "40"), "41"),
    "testbed up --loaders": o(("testbed", "up", "--root", "{tmp}/tb", "--loaders", "{v}"), "--loaders", ("1", "3"), "4"),
}  # fmt: skip

# Numeric keys of the TOML configs: `lblab run --config` (experiment/runconfig.py) and
# `lblab simulate --config` (simulator/config.py). "{v}" is written as a TOML value.
SERVER_TABLE = '[[servers]]\nid = "s1"\n{body}\n[weights]\ns1 = 1\n'
TOML_RUN: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "run.duration": ("[run]\nduration = {v}", "run.duration", ("1e-300", "604800")),
    "run.warmup": ("[run]\nwarmup = {v}", "run.warmup", ("0", "1e-300")),
    "run.replications": ("[run]\nreplications = {v}", "run.replications", ()),
    "run.seed": ("[run]\nseed = {v}", "run.seed", ("0",)),
    "run.request_timeout": ("[run]\nrequest_timeout = {v}", "run.request_timeout", ("1e-300",)),
    "run.equivalence": ("[run]\nequivalence = {v}", "run.equivalence", ("1e-300",)),
    "load.users": ("[load]\nusers = {v}", "load.users", ()),
    "load.spawn_rate": ("[load]\nspawn_rate = {v}", "load.spawn_rate", ("1e-300",)),
    "load.think_time": ("[load]\nthink_time = [0, {v}]", "load.think_time", ("0", "1e-300")),
    "load.rate (open, count 10)": (
        '[load]\nmodel = "open"\ncount = 10\nrate = {v}',
        "load",
        ("1",),
    ),
    "load.count (open, rate 1e-3)": (
        '[load]\nmodel = "open"\nrate = 1e-3\ncount = {v}',
        "load",
        ("0", "604"),
    ),
    "testbed.agent_interval": ("[testbed]\nagent_interval = {v}", "testbed.agent_interval", ()),
    "testbed.balancers": ("[testbed]\nbalancers = {v}", "testbed.balancers", ()),
    "servers.cpu_quota": (SERVER_TABLE.format(body="cpu_quota = {v}"), "cpu_quota|cpu-quota", ()),
    "servers.workers": (SERVER_TABLE.format(body="workers = {v}"), "workers", ()),
    "servers.delay_ms": (SERVER_TABLE.format(body="delay_ms = {v}"), "delay_ms", ("0", "1e-300")),
    "servers.max_inflight": (SERVER_TABLE.format(body="max_inflight = {v}"), "max_inflight", ()),
    "weights.s1": ('[[servers]]\nid = "s1"\n[weights]\ns1 = {v}', "weights.s1", ("1e-300",)),
    "timeline.at": (
        '[[timeline]]\nat = {v}\naction = "kill"\nserver = "s1"',
        "at",
        ("0", "1e-300"),
    ),
    "timeline.factor": (
        '[[timeline]]\nat = 1\naction = "slow"\nserver = "s1"\nfactor = {v}',
        "factor",
        (),
    ),
    "timeline.add_ms": (
        '[[timeline]]\nat = 1\naction = "slow"\nserver = "s1"\nadd_ms = {v}',
        "add_ms",
        ("1e-300",),
    ),
    "timeline.duration": (
        '[[timeline]]\nat = 1\naction = "pause"\nserver = "s1"\nduration = {v}',
        "duration",
        ("1e-300",),
    ),
}
GROUP = '[[servers]]\nservice = "exp:10ms"\n'
TOML_SIM: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "rate": ("rate = {v}", "rate", ()),
    "tick_period": ("tick_period = {v}", "tick_period", ()),
    "report_period": ("report_period = {v}", "report_period", ()),
    "replication": ("replication = {v}", "replication", ()),  # numbered from 1
    "servers.count": (GROUP + "count = {v}", "count", ()),
    "servers.speed": (GROUP + "speed = {v}", "speed", ()),
    "servers.weight": (GROUP + "weight = {v}", "weight", ("1e-300",)),
    "servers.capacity": (GROUP + "capacity = {v}", "capacity", ()),
    "servers.delay": (GROUP + "delay = {v}", "delay", ("0", "1e-300")),
    "balancers": ("balancers = {v}", "balancers", ()),
    "aperture_size": ('aperture = "random"\naperture_size = {v}', "aperture_size", ()),
}


def _cases() -> Iterator[Any]:
    for name, opt in OPTIONS.items():
        for value in dict.fromkeys((*EDGES, *opt.extra, *opt.ok)):
            yield pytest.param(opt, value, id=f"{name} {value}")


def _check(outcome: Outcome, value: str, ok: tuple[str, ...], says: str, what: str) -> None:
    shown = f"{what} = {value}: exit {outcome.code}\nstdout: {outcome.out[-600:]}\nstderr: {outcome.err[-1500:]}"
    assert "Traceback" not in outcome.out + outcome.err, shown
    if value in ok:
        assert outcome.code in (0, "reached"), shown
        assert "error" not in outcome.err.lower(), shown
        return
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    assert outcome.code == 2 and len(lines) == 1, shown
    named = any(word.lower() in lines[0].lower() for word in says.split("|"))
    assert lines[0].startswith("error: ") and named, shown


@pytest.mark.parametrize(("opt", "value"), list(_cases()))
def test_every_numeric_option_works_or_is_refused_in_one_line(
    cli: Any, opt: Opt, value: str
) -> None:
    argv = [a.replace("{v}", value) for a in opt.argv]
    outcome = cli(*argv)
    _check(outcome, value, opt.ok, opt.says, " ".join(argv[:3]))
    if value in opt.ok and argv[0] == "simulate":
        assert outcome.code == "reached"  # the experiment was made and started


def _toml_cases(table: dict[str, tuple[str, str, tuple[str, ...]]]) -> Iterator[Any]:
    for key, (body, says, ok) in table.items():
        for value in EDGES:
            yield pytest.param(body, says, ok, value, id=f"{key} = {value}")


@pytest.mark.parametrize(("body", "says", "ok", "value"), list(_toml_cases(TOML_RUN)))
def test_every_numeric_run_config_key_works_or_is_refused(
    cli: Any, tmp_path: Path, body: str, says: str, ok: tuple[str, ...], value: str
) -> None:
    config = tmp_path / "run.toml"
    config.write_text('preset = "tiny"\n' + body.format(v=value) + "\n")
    outcome = cli("run", "--config", str(config), "--print-config")
    _check(outcome, value, ok, says, body.splitlines()[-1])


@pytest.mark.parametrize(("body", "says", "ok", "value"), list(_toml_cases(TOML_SIM)))
def test_every_numeric_simulate_config_key_works_or_is_refused(
    cli: Any, tmp_path: Path, body: str, says: str, ok: tuple[str, ...], value: str
) -> None:
    config = tmp_path / "sim.toml"
    config.write_text("requests = 10\n" + body.format(v=value) + "\n")
    outcome = cli("simulate", "--config", str(config))
    _check(outcome, value, ok, says, body.splitlines()[-1])


IDS_OK = ("s1", "s-1", "web_2.eu-west", "x" * 64)
IDS_BAD = ("", "x" * 65, "s 1", "s/1", "s\n1", 's"1', "s\u00e91", "s1;rm")
ID_PLACES = {
    "server --id": (*SERVER[:1], "--id", "{v}", "--port", "0"),
    "agent --server": ("agent", "--server", "{v}", "--pid", str(os.getpid()), "--report-to", "127.0.0.1:9"),
    "balancer --backend": ("balancer", "--port", "0", "--backend", "{v}=127.0.0.1:9"),
}  # fmt: skip


@pytest.mark.parametrize("value", IDS_OK + IDS_BAD)
@pytest.mark.parametrize("place", list(ID_PLACES))
def test_ids_follow_one_grammar_everywhere(cli: Any, place: str, value: str) -> None:
    """1-64 of ``A-Za-z0-9_.-`` (lblab.config.ID_PATTERN) for every id a person gives."""
    argv = [a.replace("{v}", value) for a in ID_PLACES[place]]
    outcome = cli(*argv)
    says = "--backend" if place.startswith("balancer") and not value else "id"
    _check(outcome, value, IDS_OK, says, place)


@pytest.mark.parametrize("value", IDS_OK + IDS_BAD)
def test_server_ids_in_a_run_config_follow_the_same_grammar(
    cli: Any, tmp_path: Path, value: str
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(f'preset = "tiny"\n[[servers]]\nid = {json.dumps(value)}\n[weights]\n')
    outcome = cli("run", "--config", str(config), "--print-config")
    _check(outcome, value, IDS_OK, "servers[0].id", "[[servers]] id")
