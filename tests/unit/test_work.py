"""The JSON work: documents of exact sizes, the cache, and request parsing errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.servers.work import (
    DEFAULT_STREAM_ITEMS,
    MAX_WORK_BYTES,
    PREVIEW_CHARS,
    BadRequest,
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
        (b"\xff\xfe", "not UTF-8 (invalid start byte at byte 0)"),
        (b'{"work_bytes": 1, "pad": "\xed\xa0\x80"}', "not UTF-8"),  # a surrogate
        (b"[1, 2]", "must be a JSON object, not an array"),
        (b'"work"', 'must be a JSON object, not "work"'),
        (b"null", "must be a JSON object, not null"),
        (b"[" * 5000 + b"]" * 5000, "nests arrays or objects deeper than this server parses"),
        (
            b'{"work_bytes": 1, "pad": ' + b'{"a": ' * 5000 + b"0" + b"}" * 5001,
            "nests arrays or objects deeper",
        ),
        (b'{"work_bytes": NaN}', "has NaN, which is not JSON"),
        (b'{"work_bytes": 1, "pad": [-Infinity]}', "has -Infinity, which is not JSON"),
        (
            b'{"work_bytes": 1e400}',
            "work_bytes must be an integer, got a number beyond the range of a double",
        ),
        (b'{"work_bytes": ' + b"9" * 5000 + b"}", "a number this server cannot read"),
        (
            b'{"work_bytes": ' + b"9" * 4000 + b"}",
            f"work_bytes {'9' * PREVIEW_CHARS}... exceeds this server's cap",
        ),
        (b'{"work_bytes": -' + b"9" * 4000 + b"}", f"must be >= 0, got -{'9' * 39}..."),
        (b'{"work_bytes": [[[1]]]}', "work_bytes must be an integer, got an array"),
        (b'{"work_bytes": {"n": 1}}', "work_bytes must be an integer, got an object"),
        (b'{"work_bytes": 1, "pad": 7}', "pad must be a string, got 7"),
        (b'{"work_bytes": 1, "itmes": 7}', 'keys other than work_bytes, pad and items: "itmes"'),
        (b'{"work_bytes": 1, "items": "x' + b"y" * 10_000 + b'"}', 'got "xyyyyy'),
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
    """Each is a ``BadRequest`` (the client's error), with a message of bounded length
    however long the offending value."""
    with pytest.raises(BadRequest) as info:
        parse_work_request(body)
    assert expected in str(info.value)
    assert len(str(info.value)) < 300
