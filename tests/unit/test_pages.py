"""The markdown tables of the results pages (``lblab/pages.py``)."""

from __future__ import annotations

from lblab.pages import cell, table


def test_cells_read_as_a_person_writes_figures() -> None:
    assert [cell(None), cell(3), cell(0.123456), cell(25077.4), cell(-1234.5)] == [
        "", "3", "0.1235", "25077", "-1234",
    ]  # fmt: skip
    assert cell("a|b\nc") == "a\\|b c"


def test_a_table_reads_mappings_by_column_and_sequences_in_order() -> None:
    lines = table(["x", "y"], [{"y": 2, "x": 1}, (3, None)])
    assert lines == ["| x | y |", "|---|---|", "| 1 | 2 |", "| 3 |  |"]
