"""``LoadReport.from_json`` takes what a server may send and names what it may not."""

from __future__ import annotations

import random

import orjson
import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.registry import STRATEGIES, make_strategy
from lblab.errors import RemoteProtocolError
from lblab.loadreport import LoadReport

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
