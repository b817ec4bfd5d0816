"""The JSON work: documents of exact sizes, the cache, and request parsing errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.errors import ApplicationError
from lblab.servers.work import (
    DEFAULT_STREAM_ITEMS,
    MAX_WORK_BYTES,
    DocumentCache,
    WorkRequest,
    build_document,
    do_work,
    parse_work_request,
)


@pytest.mark.parametrize("size", [1, 2, 3, 25, 26, 27, 100, 137, 10_000, 100_000, 1_000_000])
def test_document_encodes_to_exactly_the_requested_size(size: int) -> None:
    assert len(json.dumps(build_document(size))) == size


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=50_000))
def test_document_size_is_exact_for_any_size(size: int) -> None:
    assert len(json.dumps(build_document(size))) == size


def test_large_documents_are_mostly_records_not_padding() -> None:
    doc = build_document(100_000)
    assert len(doc["pad"]) < 200  # less than two records of padding
    assert len(doc["records"]) > 500


def test_cache_returns_the_same_document_and_evicts_past_its_budget() -> None:
    cache = DocumentCache(budget_bytes=25_000)
    first = cache.get(10_000)
    assert cache.get(10_000) is first
    cache.get(12_000)
    assert len(cache) == 2
    cache.get(11_000)  # 33 000 bytes > budget: the least recently used (10 000) goes
    assert len(cache) == 2
    assert cache.get(10_000) is not first


def test_do_work_parses_and_returns_the_request() -> None:
    cache = DocumentCache()
    body = json.dumps({"work_bytes": 5000, "pad": "x" * 50}).encode()
    assert do_work(body, cache) == WorkRequest(5000, DEFAULT_STREAM_ITEMS)
    assert len(cache) == 1
    assert do_work(b'{"work_bytes": 0}', cache).work_bytes == 0
    assert len(cache) == 1  # zero work builds nothing


def test_items_is_read_for_streams() -> None:
    assert parse_work_request(b'{"work_bytes": 10, "items": 7}').items == 7


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"pad": "x"}', "work_bytes is missing"),
        (b'{"work_bytes": -1}', "work_bytes must be >= 0, got -1"),
        (b'{"work_bytes": 1.5}', "work_bytes must be an integer, got 1.5"),
        (b'{"work_bytes": "10"}', 'work_bytes must be an integer, got "10"'),
        (b'{"work_bytes": true}', "work_bytes must be an integer, got true"),
        (
            json.dumps({"work_bytes": MAX_WORK_BYTES + 1}).encode(),
            f"exceeds this server's cap of {MAX_WORK_BYTES}",
        ),
        (b'{"work_bytes": 1, "items": 0}', "items must be >= 1"),
    ],
)
def test_bad_requests_name_what_is_wrong(body: bytes, expected: str) -> None:
    with pytest.raises(ApplicationError) as info:
        parse_work_request(body)
    assert expected in str(info.value)
