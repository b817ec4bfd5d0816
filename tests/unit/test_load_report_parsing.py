"""``LoadReport.from_json`` takes what a server may send and names what it may not."""

from __future__ import annotations

import random

import orjson
import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import RequestView
from lblab.balancer.strategies.registry import STRATEGIES, make_strategy
from lblab.errors import RemoteProtocolError
from lblab.loadreport import MAX_MEASURE, LoadReport

BASE = {"server": "s1", "source": "response", "t": 1700000000}


def parse(**fields: object) -> LoadReport:
    return LoadReport.from_json(orjson.dumps({**BASE, **fields}))


def test_numbers_are_floats_and_inflight_a_whole_number_whoever_sent_them() -> None:
    report = parse(inflight=2.0, qps=40, cpu_util=0.5, service_ms=None)
    assert report.inflight == 2 and isinstance(report.inflight, int)
    assert report.qps == 40.0 and isinstance(report.qps, float)
    assert isinstance(report.t, float) and report.service_ms is None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"inflight": 2.5}, "inflight 2.5 is not a whole number"),
        ({"inflight": "3"}, "inflight '3' is not a whole number"),
        ({"inflight": True}, "inflight True is not a whole number"),
        ({"qps": "40"}, "qps '40' is not a finite number"),
        ({"cpu_util": False}, "cpu_util False is not a finite number"),
        ({"t": None}, "t None is not a finite number"),
        ({"server": 7}, "server 7 is not a name"),
        ({"source": "gossip"}, "source 'gossip' is not one of agent, push, response"),
        ({"colour": "red"}, "unexpected keyword argument 'colour'"),
        ({"qps": 1e307}, "qps 1e\\+307 is out of range"),
        ({"cpu_util": -0.5}, "cpu_util -0.5 is out of range"),
        ({"inflight": 2**62}, "inflight 4611686018427387904 is out of range"),
        ({"queue_ms": 2e9}, "queue_ms 2000000000.0 is out of range"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(fields: dict[str, object], says: str) -> None:
    with pytest.raises(RemoteProtocolError, match=says):
        parse(**fields)


@pytest.mark.parametrize("raw", [b"[1, 2]", b"{", b'"report"', b"", b'{"server": "s1"}'])
def test_what_is_not_a_report_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="load report"):
        LoadReport.from_json(raw)


def test_every_strategy_takes_a_report_a_foreign_server_wrote_with_floats() -> None:
    """An ``inflight`` of 2.0 (JSON numbers from another language's encoder) once reached
    the compiled ``dynamic`` and ``c3`` as a float, where they raised ``TypeError``."""
    raw = orjson.dumps({**BASE, "inflight": 2.0, "service_ms": 1.5, "queue_ms": 0, "qps": 10})
    for name in STRATEGIES:
        pool = Pool(
            [BackendSpec("s1", 1), BackendSpec("s2", 1)], make_strategy(name, rng=random.Random(1))
        )
        assert pool.report("s1", LoadReport.from_json(raw), 0.5), name


@pytest.mark.parametrize(
    "fields",
    [
        {"qps": MAX_MEASURE, "cpu_util": 0.0},  # the largest rate over the smallest share
        {"qps": MAX_MEASURE, "cpu_util": 1e-300},
        {"qps": 0.0, "cpu_util": MAX_MEASURE, "inflight": int(MAX_MEASURE)},
        {"service_ms": MAX_MEASURE, "queue_ms": MAX_MEASURE, "est_wait_ms": MAX_MEASURE},
        {"service_ms": 5e-324, "qps": 5e-324, "eps": MAX_MEASURE},
    ],
)
def test_every_strategy_picks_after_the_most_extreme_report_it_can_be_sent(
    fields: dict[str, object],
) -> None:
    """A report of ``qps`` 1e307 once made ``dwrr``'s weights NaN: every pick raised, and
    the balancer closed each client connection on its first request. Reports are bounded
    now; at the bounds every strategy still picks, from every source, many times over."""
    for name in STRATEGIES:
        pool = Pool(
            [BackendSpec("s1", 1), BackendSpec("s2", 1)], make_strategy(name, rng=random.Random(1))
        )
        now = 0.0
        for source in ("agent", "response", "push"):
            for server in ("s1", "s2"):
                report = parse(**{**fields, "server": server, "source": source})
                pool.report(server, report, now)
            for _ in range(50):
                now += 0.05
                picked = pool.pick(RequestView(request_id=int(now * 100)), now)
                assert picked is not None or name == "lease", name  # lease: none granted
