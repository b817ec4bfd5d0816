"""``lblab report`` on a real tiny run and a small simulated run, checked in headless Chromium.

The page is opened from disk (file://), as a reader would. A copy of it gets a probe
script that, once the page has loaded, records every image that failed to render
(``naturalWidth == 0``) and every error or ``console.error``; Chromium's ``--dump-dom``
hands the result back. A screenshot is saved to the test's tmp dir for a human look.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_TIMEOUT_S = 60
_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(
  String(e.message || (e.target && (e.target.src || e.target.href)))), true);
const __ce = console.error;
console.error = (...a) => { window.__errors.push(a.join(' ')); __ce(...a); };
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const bad = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  document.body.setAttribute('data-probe',
    JSON.stringify({images: imgs.length, bad: bad, errors: window.__errors}));
});
</script>"""


def chromium(args: list[str], user_data: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed; run scripts/setup (apt-get install -y chromium)")
    return subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={user_data}", *args],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_TIMEOUT_S,
        check=False,
    )


def probe_page(index: Path, tmp_path: Path) -> dict[str, Any]:
    """Load a probed copy of the report; returns {images, bad, errors} and console lines."""
    copy = tmp_path / "probe-report"
    shutil.copytree(index.parent, copy)
    page = copy / "index.html"
    page.write_text(page.read_text().replace("<head>", "<head>" + _PROBE, 1))
    result = chromium(
        ["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
         page.as_uri()],
        tmp_path / "chromium-probe",
    )  # fmt: skip
    found = re.search(r'data-probe="([^"]*)"', result.stdout)
    assert found, f"the probe did not run; chromium stderr:\n{result.stderr[-3000:]}"
    outcome = json.loads(html.unescape(found.group(1)))
    outcome["console"] = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return outcome


def check_report(index: Path, tmp_path: Path) -> None:
    assert index.name == "index.html" and index.is_file()
    text = index.read_text()
    for needed in ("Which algorithm wins where", "Summary", "Manifest", "CPU limit method"):
        assert needed in text, f"the report lacks {needed!r}"
    for external in ('src="http', 'href="http', "<script", "<link"):
        assert external not in text, f"the report is not self-contained: {external}"
    charts = sorted((index.parent / "charts").glob("*.png"))
    assert len(charts) >= 10
    assert all(p.with_suffix(".svg").is_file() for p in charts)
    outcome = probe_page(index, tmp_path)
    assert outcome["images"] == len(charts)
    assert outcome["bad"] == [], f"images that did not render: {outcome['bad']}"
    assert outcome["errors"] == [] and outcome["console"] == [], outcome
    shot = tmp_path / "report.png"
    chromium(
        [f"--screenshot={shot}", "--window-size=1280,2000", index.as_uri()],
        tmp_path / "chromium-shot",
    )
    assert shot.is_file() and shot.stat().st_size > 10_000


def simulate(out: Path) -> Path:
    """A small simulated run (two strategies, 2000 requests each; a few seconds)."""
    result = run_lblab(
        ["simulate", "--servers", "3", "--requests", "2000", "-s", "rr", "-s", "lc",
         "--out", str(out)],
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.mark.slow
def test_report_of_a_real_run_renders_in_chromium(tiny_run_dir: Path, tmp_path: Path) -> None:
    """The report the run wrote at its end (``lblab report`` itself is run on the
    simulated run below): it renders, and its validity section counts every phase's
    checks as the manifest has them."""
    index = tiny_run_dir / "report" / "index.html"
    check_report(index, tmp_path)
    text = index.read_text()
    assert "live measurement" in text and "warm-up (excluded)" in text
    phases = json.loads((tiny_run_dir / "manifest.json").read_text())["phases"]
    warn, fail = [sum(p["verdict"] == level for p in phases) for level in ("warn", "fail")]
    assert "Can these numbers be trusted?" in text
    assert (
        f"{len(phases)} phases checked: {len(phases) - warn - fail} pass, {warn} warn, {fail} fail."
    ) in text


@pytest.mark.slow
def test_report_of_a_simulated_run(tmp_path: Path) -> None:
    run = simulate(tmp_path / "sim")
    result = run_lblab(["report", str(run)], timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    index = run / "report" / "index.html"
    assert f"report: {index}" in result.stdout
    check_report(index, tmp_path)
    assert "simulated (SimPy model" in index.read_text()


def test_report_of_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    result = run_lblab(["report", str(tmp_path / "nothing")], timeout=60)
    assert result.returncode == 2
    assert "is not a directory; pass a results folder" in result.stderr
