"""``lblab ui`` end to end: the testbed and Locust's web UI, driven in headless Chromium.

``lblab ui`` runs as a user starts it, on free ports. The test reads the address it
prints, opens Locust's page in headless Chromium over the DevTools protocol (the
``DevTools`` helper of the notebooks test), checks that lblab's fields are in the form,
sends a bad value and reads the UI's error, starts a test on ``sp+sr`` with ``rr``,
switches to ``least-of-3`` (a strategy of the user's own, from a file outside the
repository, named in the config's ``[strategy_specs]``) with Edit + Update while it
runs, asks for ``wrr`` with
``tie=random`` (refused), stops it, then ends ``lblab ui`` with SIGTERM. On the page, as
a person reads it: lblab's banner names the running strategy, Locust's statistics keep
a row per strategy (rr's stops growing at the switch), the refused Edit is shown on the
main page though its dialog closed, and after Stop the banner gives the run folder, each
phase's count and the report's path. The run directory must hold rows of both
strategies, a phase each in the manifest and the report; no process of the session may
be left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from lblab.loadtests.loadgen import free_port
from lblab.procs import lblab_command
from tests.e2e.test_user_strategy import LEAST_OF_THREE
from tests.integration.test_notebooks_server import DevTools, read_line
from tests.run_fixture import PACED_LOAD

pytestmark = pytest.mark.slow

URL_PREFIX = "Locust web UI: "
START_TIMEOUT_S = 90  # the testbed and Locust, on 2 busy cores
STEP_TIMEOUT_S = 45  # one step of the UI, on 2 cores shared with other work
END_TIMEOUT_S = 120  # Locust stops, the tables and the report are written
LOAD_S = 3.0  # of each strategy
MINE = "least-of-3"  # the user's own strategy (LEAST_OF_THREE), switched to while running

# Sets a form field the way a person would (React sees the change), by name, in the
# last form on the page (the Edit dialog's when it is open). The page names the fields
# in camelCase (strategyOptions) and posts them in snake_case (strategy_options).
_SET = """((name, value) => {
  const forms = document.querySelectorAll('form');
  const el = forms[forms.length - 1].querySelector(`[name="${name}"]`);
  if (!el) return false;
  const proto = el.tagName === 'SELECT' ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, value);
  el.dispatchEvent(new Event(el.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true}));
  return el.value === value;
})"""
_CLICK = """((text) => {
  const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === text);
  if (b) b.click();
  return !!b;
})"""
_BUTTONS = "[...document.querySelectorAll('button')].map(b => b.textContent.trim()).join('|')"
# lblab's banner, line by line: (kind, text as shown, without a dismiss button's).
_BANNER = """JSON.stringify([...document.querySelectorAll('#lblab-banner > div')]
  .map(d => [d.dataset.kind, [...d.childNodes].filter(n => n.nodeName !== 'BUTTON')
  .map(n => n.textContent).join('').trim()]))"""
# Locust's statistics table as shown: Type, Name, # Requests of each row.
_ROWS = """JSON.stringify([...document.querySelectorAll('table tbody tr')]
  .map(tr => [...tr.querySelectorAll('td')].slice(0, 3).map(td => td.innerText.trim())))"""
_DIALOG_OPEN = "!!document.querySelector('[role=dialog]')"
_FIELDS = """JSON.stringify(Object.fromEntries(['scenario', 'strategy', 'loadModel', 'arrival']
  .map(n => [n, [...(document.querySelector(`select[name="${n}"]`) || {options: []}).options]
  .map(o => o.value)])))"""


def wait_until(check: Callable[[], Any], what: str, timeout: float = STEP_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.25)
    return value


NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def locust_state(url: str) -> str:
    with NO_PROXY.open(url + "stats/requests", timeout=5) as response:
        return str(json.load(response)["state"])


def post_form(url: str, form: dict[str, str]) -> dict[str, Any]:
    data = urllib.parse.urlencode(form).encode()
    with NO_PROXY.open(urllib.request.Request(url, data=data), timeout=10) as response:
        return dict(json.load(response))


class Page:
    """Locust's page in headless Chromium."""

    def __init__(self, devtools: DevTools) -> None:
        self.dt = devtools

    def set(self, name: str, value: str) -> None:
        assert self.dt.evaluate(f"{_SET}({json.dumps(name)}, {json.dumps(value)})"), name

    def click(self, text: str) -> None:
        assert self.dt.evaluate(f"{_CLICK}({json.dumps(text)})"), f"no {text!r} button"

    def text(self) -> str:
        return str(self.dt.evaluate("document.body.innerText"))

    def banner(self, kind: str) -> list[str]:
        """The texts of lblab's banner lines of ``kind``."""
        return [text for k, text in json.loads(self.dt.evaluate(_BANNER)) if k == kind]

    def rows(self) -> dict[tuple[str, str], int]:
        """Locust's statistics rows but Aggregated: (Type, Name) -> # Requests."""
        return {
            (row[0], row[1]): int(row[2])
            for row in json.loads(self.dt.evaluate(_ROWS))
            if len(row) == 3 and row[0] and row[2].isdigit()
        }

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.dt.call("Page.captureScreenshot")["data"]))
        assert path.stat().st_size > 20_000, path


def drive_the_ui(popen: subprocess.Popen[bytes], port: int, tmp_path: Path) -> list[psutil.Process]:
    """Swarm rr, switch to the user's own strategy, stop, in headless Chromium; returns the session's processes."""
    page: DevTools | None = None
    try:
        url, _ = read_line(popen, URL_PREFIX, START_TIMEOUT_S)
        assert url == f"http://127.0.0.1:{port}/"
        session = psutil.Process(popen.pid).children(recursive=True)
        web = [p for p in session if "locust" in " ".join(p.cmdline())]
        listening = [c.laddr for p in web for c in p.net_connections("tcp") if c.status == "LISTEN"]
        assert listening and all(a.ip == "127.0.0.1" for a in listening), listening

        page = DevTools(url, tmp_path / "chromium")
        ui = Page(page)
        fields = wait_until(
            lambda: (f := json.loads(page.evaluate(_FIELDS)))["strategy"] and f,
            "lblab's fields in the form",
        )
        assert {"sp+sr", "lp+lr", "variation"} <= set(fields["scenario"])
        assert {"rr", "lc", "p2c", MINE} <= set(fields["strategy"])
        assert fields["loadModel"] == ["closed", "open"]
        wait_until(lambda: ui.banner("idle"), "lblab's banner")
        ui.click("Custom parameters")
        time.sleep(0.5)
        ui.screenshot(tmp_path / "ui-form.png")

        # Bad input: the UI says what was wrong, nothing starts, the session lives on.
        ui.set("userCount", "4")
        ui.set("spawnRate", "4")
        ui.set("strategyOptions", "nonsense")
        ui.click("Start")
        wait_until(lambda: "is not NAME=VALUE" in ui.text(), "the UI's error message")
        wait_until(lambda: ui.banner("refused"), "the refusal in lblab's banner")
        form = {"user_count": "4", "spawn_rate": "4", "scenario": "sp+sr", "strategy": "nope"}
        answer = post_form(url + "swarm", form)  # what the form posts, with a name it lacks
        assert not answer["success"] and "strategy: 'nope' is not one of r, rr" in answer["message"]
        assert locust_state(url) in ("ready", "stopped")

        ui.set("strategyOptions", "")
        ui.set("scenario", "sp+sr")
        ui.set("strategy", "rr")
        ui.click("Start")
        wait_until(lambda: locust_state(url) == "running", "running with rr")
        # The strategy is on the page while it runs, and the accepted Start cleared the
        # refusal; the statistics row names it.
        running = wait_until(lambda: ui.banner("running"), "the running strategy")
        assert running[0].startswith("Strategy rr · running since"), running
        assert "scenario sp+sr · closed, 4 users" in running[0] and not ui.banner("refused")
        assert "Strategy rr" in page.evaluate("document.title")
        time.sleep(LOAD_S)
        assert set(wait_until(ui.rows, "the statistics rows")) == {("rr", "sp+sr")}

        ui.click("Edit")
        wait_until(lambda: "Update" in page.evaluate(_BUTTONS), "the Edit form")
        ui.set("strategy", MINE)
        ui.click("Update")
        notes = tmp_path / "run" / "raw" / "ui"
        wait_until(lambda: (notes / "phase-001.json").exists(), f"the switch to {MINE}")
        assert json.loads((notes / "phase-001.json").read_text())["strategy"] == MINE
        assert json.loads((notes / "phase-000.json").read_text())["end"] is not None
        wait_until(
            lambda: ui.banner("running")[0].startswith(f"Strategy {MINE} ·"), "it in the banner"
        )
        # One row per strategy: rr's stops at the switch, the new one's grows from it.
        time.sleep(1.0)  # rr's requests in flight at the switch are answered
        before = wait_until(lambda: (r := ui.rows()).get((MINE, "sp+sr")) and r, "its row")
        after = wait_until(
            lambda: (r := ui.rows())[(MINE, "sp+sr")] > before[(MINE, "sp+sr")] and r,
            "its row growing",
        )
        assert after[("rr", "sp+sr")] == before[("rr", "sp+sr")] > 50, (before, after)

        # A change the balancer refuses: Locust closes the dialog, the banner says it.
        ui.click("Edit")
        wait_until(lambda: "Update" in page.evaluate(_BUTTONS), "the Edit form")
        ui.set("strategy", "wrr")
        ui.set("strategyOptions", "tie=random")
        ui.click("Update")
        refused = wait_until(lambda: ui.banner("refused"), "the refused Edit in the banner")
        assert "the balancer refused strategy wrr tie=random" in refused[0], refused
        assert refused[0].endswith(f"the test goes on with {MINE}"), refused
        assert not page.evaluate(_DIALOG_OPEN) and locust_state(url) == "running"
        assert ui.banner("running")[0].startswith(f"Strategy {MINE} ·")
        assert not (notes / "phase-002.json").exists()
        ui.screenshot(tmp_path / "ui-running.png")
        time.sleep(LOAD_S)

        ui.click("Stop")
        wait_until(lambda: locust_state(url) == "stopped", "stopped")
        # After Stop: where the results are, once each phase's rows are in.
        run = tmp_path / "run"
        results = wait_until(
            lambda: (r := ui.banner("results")) and all("recorded" in t for t in r[1:3]) and r,
            "the results in the banner",
        )
        assert results[0] == f"Results · run folder {run}", results
        assert results[1].startswith("phase r1-000-sp+sr-rr · rr: "), results
        assert results[2].startswith(f"phase r1-001-sp+sr-{MINE} · {MINE}: "), results
        assert results[3].startswith(f"Report · {run / 'report' / 'index.html'}, written"), results
        assert ui.banner("idle") and not ui.banner("running") and not ui.banner("refused")
        ui.screenshot(tmp_path / "ui-stopped.png")
    finally:
        if page is not None:
            page.close()
    return session


@contextlib.contextmanager
def lblab_ui(tmp_path: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``lblab ui`` in its own session; killed with its tree if a step failed. Its users
    are paced: the test watches the UI, not the servers' capacity."""
    config = tmp_path / "paced.toml"
    (tmp_path / "least_of_three.py").write_text(LEAST_OF_THREE)
    config.write_text(
        'preset = "tiny"\n[run]\nstrategies = ["rr", "least-of-3"]\n'
        f'[strategy_specs]\n"least-of-3" = "{tmp_path / "least_of_three.py"}:LeastOfThree"\n'
        + PACED_LOAD
    )
    popen = subprocess.Popen(
        lblab_command("ui", "--config", str(config), "--web-port", str(port), "--warmup", "1s",
                      "--out", str(tmp_path / "run")),
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "lblab.err", "wb"),  # noqa: SIM115 - the child owns it
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield popen
    finally:
        if popen.poll() is None:
            for process in [*psutil.Process(popen.pid).children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    process.kill()
            popen.kill()
            popen.wait(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()


@pytest.mark.timeout(300)
def test_swarm_switch_stop_in_the_web_ui_records_both_strategies(tmp_path: Path) -> None:
    port = free_port()
    with lblab_ui(tmp_path, port) as popen:
        session = drive_the_ui(popen, port, tmp_path)
        popen.send_signal(signal.SIGTERM)
        popen.communicate(timeout=END_TIMEOUT_S)
    err = (tmp_path / "lblab.err").read_text()
    assert popen.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    _, alive = psutil.wait_procs(session, timeout=5)
    assert not alive, f"left running: {alive}"
    run = tmp_path / "run"
    assert not [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(run) in " ".join(p.info["cmdline"] or [])
    ]

    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "done"
    phases = [(p["scenario"], p["strategy"], p["status"]) for p in manifest["phases"]]
    assert phases == [("sp+sr", "rr", "done"), ("sp+sr", MINE, "done")], phases
    requests = pd.read_parquet(run / "requests.parquet")
    counts = requests.groupby("strategy").size().to_dict()
    assert counts.get("rr", 0) > 50 and counts.get(MINE, 0) > 50, counts
    assert requests.ok.mean() > 0.99 and set(requests.scenario) == {"sp+sr"}
    for entry in manifest["phases"]:
        assert entry["requests"] == counts[entry["strategy"]] and entry["unaccounted"] == 0
    for table in ("cpu", "picks"):
        assert set(pd.read_parquet(run / f"{table}.parquet").strategy) == {"rr", MINE}, table
    assert (run / "report" / "index.html").stat().st_size > 10_000
    log = (run / "logs" / "locust.log").read_text()
    assert "refused: strategy options: 'nonsense'" in log
    assert "refused: the balancer refused strategy wrr tie=random" in log
