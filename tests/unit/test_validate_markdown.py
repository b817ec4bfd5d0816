"""``lblab validate --format markdown``: the docs page, stamped, one row per case."""

from __future__ import annotations

import re

from lblab import stamp
from lblab.simulator.validate import COLUMNS, POLICY, Report, _case, markdown_page


def test_the_page_is_stamped_and_has_every_case() -> None:
    r, lc = POLICY["r"], POLICY["lc"]
    cases = (
        _case(r, 0.5, "T", [1.98, 2.03, 2.01], r.expected(0.5) if r.expected else None),
        _case(r, 0.9, "T", [14.0, 15.0, 16.0], r.expected(0.9) if r.expected else None),
        _case(lc, 0.7, "T", [1.15, 1.17, 1.16], None),
    )
    report = Report("quick", cases, 123_456, 12.3, 2, stamp.take())
    page = markdown_page(report, "uv run lblab validate --quick --format markdown")
    assert page.startswith("# Simulator validation\n")
    said = re.search(
        r"Produced by `uv run lblab validate --quick --format markdown` at commit `([^`]+)` "
        r"on (\d{4}-\d\d-\d\d \d\d:\d\d UTC), (\d+) cores, load average [\d.]+ / [\d.]+ / [\d.]+",
        page,
    )
    assert said, page[:600]
    assert said[1] == report.stamp.commit and int(said[3]) == report.stamp.cores
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    assert rows[0] == "| " + " | ".join(COLUMNS) + " |" and len(rows) == 1 + len(cases)
    assert all(row.count("|") == len(COLUMNS) + 1 for row in rows)
    assert [row.rsplit("|", 2)[1].strip() for row in rows[1:]] == ["pass", "FAIL", "pass"]
    assert "123,456 simulated requests in 12.3 s on 2 process(es)" in page
    assert "**1 failed**." in page
    assert report.to_json()["stamp"]["cores"] == report.stamp.cores
