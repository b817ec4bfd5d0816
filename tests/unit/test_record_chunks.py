"""A phase's record chunks: each says which balancer node a request went through."""

from __future__ import annotations

from pathlib import Path

import orjson

from lblab.loadtests.record_table import read_records
from lblab.loadtests.records import RequestRecorder


def test_each_row_names_its_balancer_and_an_older_chunk_reads_as_b1(tmp_path: Path) -> None:
    recorder = RequestRecorder(tmp_path)
    recorder.add(1.0, 2.0, None, None, 100, 10, "s1", "sp+sr", balancer="b2")
    recorder.add(1.1, 2.5, None, None, 100, 10, "s2", "sp+sr")
    recorder.flush()
    (chunk,) = tmp_path.glob("requests-*.json")
    older = orjson.loads(chunk.read_bytes())
    del older["balancer"]  # as a loader host on an older lblab writes it
    (tmp_path / "requests-old-1-0.json").write_bytes(orjson.dumps(older))
    table = read_records(tmp_path)
    assert sorted(table["balancer"].to_pylist()) == ["b1", "b1", "b1", "b2"]
