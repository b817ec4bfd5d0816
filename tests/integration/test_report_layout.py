"""The report reads top-down as a person would, and stands alone in headless Chromium.

Built from a small synthetic run (``analysis/synthetic.py``: made-up numbers, three
strategies, two matrix cells, two replications) whose manifest gets validity checks
like a live run's: one phase fails a check, one warns. The page is parsed with the
standard library's HTML parser; then ``index.html`` alone (no ``charts/`` beside it)
is opened from disk in Chromium with the network resolver off, and screenshotted.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from lblab.analysis.report import FOOTNOTE, build_report, charts
from lblab.analysis.synthetic import write_synthetic_run
from lblab.analysis.validity import CHECKS_GUIDE
from lblab.results import MANIFEST
from tests.integration.test_report import chromium, probe_page

pytestmark = pytest.mark.slow

STRATEGIES = ("rr", "wrr", "lc")
SCENARIOS = ("sp+sr", "lp+lr")
READING_ORDER = ("answer", "validity", "instrument", "matrices", "charts", "tables", "manifest")
SHOT = (1280, 900)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check(name: str, level: str) -> dict[str, str]:
    return {"name": name, "level": level, "figure": "made up", "why": "a test phase"}


def _phases() -> list[dict[str, Any]]:
    """Every unit of the synthetic run passes, but sp+sr wrr rep 1 fails, lp+lr lc rep 2 warns."""
    phases = []
    for scenario in SCENARIOS:
        for strategy in STRATEGIES:
            for rep in (1, 2):
                level = {("sp+sr", "wrr", 1): "fail", ("lp+lr", "lc", 2): "warn"}.get(
                    (scenario, strategy, rep), "pass"
                )
                checks = [_check("generator", "pass"), _check("machine", level)]
                phases.append(
                    {
                        "key": f"r{rep}-{scenario}-{strategy}",
                        "scenario": scenario,
                        "strategy": strategy,
                        "replication": rep,
                        "verdict": level,
                        "verdicts": checks,
                    }
                )
    return phases


@dataclass
class Figure:
    section: str
    caption: str = ""
    images: list[str] = field(default_factory=list)


@dataclass
class Table:
    section: str
    folded: bool
    classes: str
    rows: int = 0


@dataclass
class Page(HTMLParser):
    """What the tests look at: h2 ids in order, figures, tables, every URL attribute."""

    sections: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    loose_images: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    _open: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href", "action", "poster") and v]
        section = self.sections[-1] if self.sections else ""
        if tag == "h2":
            self.sections.append(a.get("id") or "")
        elif tag == "figure":
            self.figures.append(Figure(section))
        elif tag == "img":
            into = self.figures[-1].images if "figure" in self._open else self.loose_images
            into.append(a.get("src") or "")
        elif tag == "table":
            self.tables.append(Table(section, "details" in self._open, a.get("class") or ""))
        elif tag == "tr" and self.tables:
            self.tables[-1].rows += 1
        if tag not in ("img", "br", "meta"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if "figcaption" in self._open and self.figures:
            self.figures[-1].caption += data


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = write_synthetic_run(
        tmp_path_factory.mktemp("layout") / "syn",
        rows_per_unit=100,
        strategies=STRATEGIES,
        scenarios=SCENARIOS,
        replications=2,
    )
    manifest = json.loads((run_dir / MANIFEST).read_text())
    manifest["phases"] = _phases()
    (run_dir / MANIFEST).write_text(json.dumps(manifest))
    return build_report(run_dir)


@pytest.fixture(scope="module")
def page(report: Path) -> Page:
    parsed = Page()
    parsed.feed(report.read_text(encoding="utf-8"))
    parsed.close()
    return parsed


def test_sections_come_in_reading_order(page: Page) -> None:
    found = [s for s in page.sections if s in READING_ORDER]
    assert found == list(READING_ORDER), page.sections
    assert page.sections[0] == "answer", "the answer must be the first section"


def test_answer_names_the_winners_and_the_phases_not_to_trust(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    answer = text[text.index('id="answer"') : text.index('id="matrices"')]
    assert "On throughput (ok/s):" in answer and "cells are decided" in answer  # the words
    assert '<table class="winners">' in answer
    # Each cell is coloured by its verdict, as the notebooks' winner chart.
    verdicts = re.findall(r'<td class="(winner|tie|unresolved)" style="background:([^"]+)"', answer)
    assert len(verdicts) == len(SCENARIOS) * 5
    assert all(colour == charts.VERDICT_COLOURS[v] for v, colour in verdicts)
    assert "<b>Do not trust</b> sp+sr wrr rep 1 (machine)" in answer
    assert "<b>Read with care</b> (a check warned): lp+lr lc rep 2 (machine)" in answer
    assert "12 phases checked: 10 pass, 1 warn, 1 fail." in answer


def test_the_charts_and_tables_mark_what_the_answer_left_out(report: Path) -> None:
    """sp+sr wrr rep 1 failed: the answer says so and how the rest of the page marks it,
    each per-strategy chart hatches (or dashes) exactly what includes it, with the legend
    line, and the summary table marks the row with a dagger and its footnote."""
    text = report.read_text(encoding="utf-8")
    answer = text[text.index('id="answer"') : text.index('id="validity"')]
    assert (
        "The answer leaves out 1 phase that failed a validity check: sp+sr wrr (rep 1)." in answer
    )
    assert (
        "hatched and faded bars, boxes and cells, dashed lines, and \u2020 in the tables" in answer
    )
    svg = {p.stem: p.read_text() for p in (report.parent / "charts").glob("*.svg")}
    legend = "hatched: " + charts.FAILED
    assert (
        legend == "hatched: includes a phase that failed a validity check (left out of the answer)"
    )
    hatched = {name for name, body in svg.items() if legend in body}
    assert hatched == {
        *(
            f"matrix-{m}"
            for m in (
                "requests",
                "throughput_rps",
                "latency_mean_ms",
                "latency_p95_ms",
                "failure_rate",
            )
        ),
        *(
            f"bars-{m}"
            for m in (
                "throughput_rps",
                "latency_mean_ms",
                "latency_p95_ms",
                "cpu_imbalance",
                "cpu_jain",
            )
        ),
        "server-share",
        "latency-by-server",
    }, sorted(hatched)
    # One hatched bar (sp+sr wrr) plus the legend's swatch: a hatch is a fill with a pattern.
    assert svg["bars-throughput_rps"].count("url(#h") == 2
    assert svg["server-share"].count("url(#h") == 3 + 1  # wrr's bar: one segment per server
    assert "dashed: includes a phase" in svg["latency-percentiles"]
    assert "dashed: a phase that failed" in svg["cpu-sp_sr"]
    assert "dashed" not in svg["cpu-lp_lr"]  # nothing failed there
    tables = text[text.index('id="tables"') : text.index('id="manifest"')]
    summary = tables[: tables.index("All request metrics")]
    assert summary.count("\u2020</th>") == 1 and "<th>wrr \u2020</th>" in summary
    assert f'<p class="footnote">{FOOTNOTE}</p>' in summary
    assert "2 (1 failed)" in tables  # replications of sp+sr wrr


def test_every_image_is_a_figure_with_a_caption(page: Page, report: Path) -> None:
    assert page.loose_images == [], "an image outside a <figure>"
    charts = sorted((report.parent / "charts").glob("*.png"))
    assert len(page.figures) == len(charts) >= 10
    for f in page.figures:
        assert len(f.images) == 1, f
        caption = " ".join(f.caption.split())
        assert len(caption.split()) >= 12, f"caption too thin to say how to read: {caption!r}"
        src = f.images[0]
        assert src.startswith("data:image/png;base64,"), src[:60]
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_MAGIC
    matrices = [f for f in page.figures if f.section == "matrices"]
    assert len(matrices) == 5 and all("ranks the strategies" in f.caption for f in matrices)
    assert {f.section for f in page.figures} == {"matrices", "charts"}


def test_long_tables_are_folded(page: Page) -> None:
    tail = [t for t in page.tables if t.section == "tables"]
    assert len(tail) == 4 and all(t.folded for t in tail), tail
    # Long: more rows than a screen shows. The run's facts (one short row per fact,
    # about 18 for a live run) stay open under "What ran".
    long = [t for t in page.tables if t.rows > 12 and t.classes != "facts"]
    assert long and all(t.folded for t in long), long
    unfolded = [t.section for t in page.tables if not t.folded]
    assert unfolded == ["answer", "validity", "run"], unfolded


def test_no_external_url_script_or_stylesheet(page: Page, report: Path) -> None:
    external = [u for u in page.urls if u.lower().startswith(("http:", "https:", "//", "ftp:"))]
    assert external == []
    # Besides its own parts, the page links the checks' guide in this checkout (a link
    # the reader may follow, on this machine's disk; nothing the page fetches).
    guide = f"{CHECKS_GUIDE.as_uri()}#the-checks"
    own = [u for u in page.urls if u != guide]
    assert all(u.startswith(("#", "data:image/png", "charts/")) for u in own), page.urls
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    assert "url(" not in report.read_text(encoding="utf-8")  # no CSS fetch either


def test_the_page_alone_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    alone = tmp_path / "alone" / "index.html"
    alone.parent.mkdir()
    shutil.copy(report, alone)  # no charts/ folder beside it: the page must stand alone
    outcome = probe_page(alone, tmp_path)
    assert outcome["images"] >= 10 and outcome["bad"] == [], outcome
    assert outcome["errors"] == [] and outcome["console"] == [], outcome
    shot = tmp_path / "top.png"
    result = chromium(
        ["--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
         f"--screenshot={shot}", f"--window-size={SHOT[0]},{SHOT[1]}", alone.as_uri()],
        tmp_path / "chromium-shot",
    )  # fmt: skip
    assert shot.is_file(), result.stderr[-3000:]
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.size == SHOT
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    # A blank page has one colour; the top of the report has text, a table and links.
    assert colours is None or len(colours) > 50, f"{len(colours or [])} colours: blank?"
