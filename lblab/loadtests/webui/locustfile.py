"""The locustfile of ``lblab ui``: the lblab users, the UI's fields, one phase per swarm.

    locust -f loadtests/webui/locustfile.py --web-host 127.0.0.1 --web-port 8089 \\
        --host rsocket://HOST:PORT --lblab-ui '<UiSession JSON>'

``lblab ui`` starts it. Before Locust's own ``/swarm`` handler runs, ``SwarmPhases``
checks the form (``choices.parse_swarm``), switches the balancer's strategy through its
admin API, points the users at a new phase (``--lblab-spec``, records folder) and notes
the phase in ``raw/ui/phase-NNN.json`` for ``lblab ui``. A refused form gets Locust's
own JSON answer ``{"success": false, "message": ...}``, which the UI shows under the
form; the test, if one runs, goes on unchanged. An Edit of a running test that changes
the strategy or the number of users ends the phase and starts the next one; the scenario
and load model stay until Stop.

Locust's page does not say what it measures, so lblab adds to it (``banner``): a script
above its header shows the running strategy, a refused change (an Edit dialog closes
whatever the answer) and, after Stop, where the results are; and the users' request
events carry the running strategy as ``request_type``, so each statistics row is one
strategy and cell, and a switch starts new rows instead of adding to the old ones.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from flask import Response, jsonify, request, send_file
from locust import events
from locust.runners import STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

from lblab.errors import ConfigError
from lblab.experiment.plan import Phase
from lblab.experiment.run_folders import new_attempt, phase_folder
from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests import rsocket_user
from lblab.loadtests.admin_client import AdminClient, AdminError
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.locustfile import new_records
from lblab.loadtests.rsocket_user import LocustRSocketClient
from lblab.loadtests.webui import banner, choices
from lblab.loadtests.webui.choices import Swarm
from lblab.loadtests.webui.protocol import UiSession, phase_notes
from lblab.manifest import PhaseEntry, load
from lblab.results import MANIFEST
from lblab.scenarios import builtin_scenario

__all__ = ["ClosedLoopUser", "OpenLoopUser"]

log = logging.getLogger("lblab.ui")
OPEN_SCHEDULE_S = 7 * 86400.0  # the open model's schedule runs until Stop
BANNER_JS = Path(__file__).with_name("static") / "banner.js"


class SwarmPhases:
    """The phases of this Locust process: one per swarm, and one per switch in a swarm."""

    def __init__(self, environment: Any, session: UiSession) -> None:
        self.env, self.session = environment, session
        self.host = environment.host  # the testbed's balancer
        self.run_dir = Path(session.run_dir)
        self.admin = AdminClient(*session.admin)
        self.swarm: Swarm | None = None
        self.entry: dict[str, Any] | None = None  # the running phase's note
        self.notes: list[dict[str, Any]] = []  # every phase's note, the running one too
        self.label = "-"  # the strategy of the statistics rows (the last phase's)
        self.refusal: banner.Refusal | None = None  # until the next form is taken
        self.count = 0
        self.replications: Counter[tuple[str, str]] = Counter()
        phase_notes(self.run_dir).mkdir(parents=True, exist_ok=True)

    def before_request(self) -> Response | None:
        """Flask's hook: check and apply a ``/swarm`` form before Locust reads it."""
        if request.path != "/swarm" or request.method != "POST":
            return None
        try:
            self.apply(request.form)
        except (ConfigError, AdminError) as exc:
            message = str(exc)
            if self.entry is not None and self.env.runner.state != STATE_STOPPING:
                message += f"; the test goes on with {self.label}"
            log.warning("web UI: refused: %s", message)
            number = self.refusal.number + 1 if self.refusal else 1
            self.refusal = banner.Refusal(number, message, time.time())
            return jsonify({"success": False, "message": message, "host": self.env.host})
        self.refusal = None
        return None

    def status(self) -> Response:
        """``GET lblab/status``: the banner's lines. The manifest (the ``lblab ui``
        process's, atomically replaced) is read only between swarms, when the results
        line shows."""
        phases: tuple[PhaseEntry, ...] = ()
        if self.entry is None and self.notes:
            phases = load(self.run_dir / MANIFEST).phases
        lines = banner.page_lines(
            running=self.entry,
            stopping=self.env.runner.state == STATE_STOPPING,
            refusal=self.refusal,
            run_dir=str(self.run_dir),
            notes=self.notes,
            manifest_phases=phases,
        )
        return jsonify(lines)

    @staticmethod
    def with_banner(response: Response) -> Response:
        """Flask's hook: Locust's page, with lblab's banner script in it."""
        if request.path == "/" and response.mimetype == "text/html":
            page = banner.with_script(response.get_data(as_text=True))
            if page is None:
                log.warning("web UI: Locust's page has no </body>: lblab's banner is missing")
            else:
                response.set_data(page)
        return response

    def apply(self, form: Any) -> None:
        state = self.env.runner.state
        if state == STATE_STOPPING:
            raise ConfigError("the test is stopping; start the next one when it has stopped")
        running = state in (STATE_RUNNING, STATE_SPAWNING) and self.swarm is not None
        host = form.get("host")
        if host is not None and host.strip() != self.host:
            raise ConfigError(
                f"host: {host!r}: the users send to the testbed's balancer, {self.host}; "
                "leave the Host field as it was"
            )
        fallback = (
            self._form_of(self.swarm) if running else {f.dest: f.default for f in choices.FIELDS}
        )
        swarm = choices.parse_swarm(form, fallback)
        load = swarm.load(self.session.think_time)
        if running:
            assert self.swarm is not None
            if not swarm.same_load(self.swarm):
                raise ConfigError(
                    "the scenario and the load model stay while a test runs (the strategy and "
                    "the number of users may change): Stop it, then start a new test"
                )
            if swarm == self.swarm:
                return
        options = swarm.strategy_options or dict(
            self.session.strategy_options.get(swarm.strategy, {})
        )
        try:
            self.admin.set_strategy(swarm.strategy, options)
        except AdminError as exc:
            label = banner.strategy_label(swarm.strategy, options)
            raise AdminError(f"the balancer refused strategy {label}: {exc}") from None
        if running:
            self.end_phase()
        else:
            self.env.user_classes = [ClosedLoopUser if load.model == "closed" else OpenLoopUser]
            # Closed users finish the request in flight; the open schedule is stopped at
            # once and its requests in flight still end (answer or deadline) and are kept.
            self.env.stop_timeout = (
                math.ceil(self.session.request_timeout + 1) if load.model == "closed" else 0
            )
        self._begin_phase(swarm, options, load)

    def _begin_phase(self, swarm: Swarm, options: dict[str, str], load: LoadConfig) -> None:
        s = self.session
        key = (swarm.scenario, swarm.strategy)
        self.replications[key] += 1
        phase = Phase(self.count, swarm.scenario, swarm.strategy, self.replications[key])
        self.count += 1
        attempt = new_attempt(1)  # a swarm is a phase of its own, never rerun
        spec = LoadSpec(
            run_id=self.run_dir.name,
            scenario=builtin_scenario(swarm.scenario),
            strategy=swarm.strategy,
            replication=phase.replication,
            model=load.model,
            think_time=load.think_time,
            rate=load.rate,
            arrival=load.arrival,
            duration=OPEN_SCHEDULE_S,
            request_timeout=s.request_timeout,
            seed=s.seed + phase.index,
            records_dir=str(phase_folder(self.run_dir, phase.key, attempt)),
        )
        self.env.parsed_options.lblab_spec = spec.to_json()
        new_records()  # the last phase's rows go to its folder, the next ones to this
        self.swarm = swarm
        self.entry = {
            "index": phase.index,
            "key": phase.key,
            "attempt": attempt,
            "scenario": phase.scenario,
            "strategy": phase.strategy,
            "strategy_options": options,
            "replication": phase.replication,
            "seed": spec.seed,
            "load": load.facts(),
            "start": time.time(),
            "end": None,
        }
        self.notes.append(self.entry)
        self.label = banner.strategy_label(swarm.strategy, options)
        self._write()
        log.info("phase %s started: %s", phase.key, swarm)

    def stopping(self) -> None:
        """Stop was asked for: the load ends now, though users finish their requests."""
        if self.entry is not None:
            self.entry["load_end"] = time.time()

    def end_phase(self) -> None:
        """The running phase ends now (Stop, a switch, or Locust quitting)."""
        if self.entry is None:
            return
        new_records()
        self.entry["end"] = time.time()
        self.entry.setdefault("load_end", self.entry["end"])
        self._write()
        log.info("phase %s ended", self.entry["key"])
        self.entry = None
        self.swarm = None
        self.refusal = None  # it was about the test that just ended

    def _write(self) -> None:
        assert self.entry is not None
        folder = phase_notes(self.run_dir)
        name = f"phase-{self.entry['index']:03d}.json"
        tmp = folder / f".{name}.tmp"
        tmp.write_text(json.dumps(self.entry))
        os.replace(tmp, folder / name)

    @staticmethod
    def _form_of(swarm: Swarm | None) -> dict[str, str]:
        assert swarm is not None
        return {
            "scenario": swarm.scenario,
            "strategy": swarm.strategy,
            "strategy_options": ",".join(f"{k}={v}" for k, v in swarm.strategy_options.items()),
            "load_model": swarm.load_model,
            "open_rate": str(swarm.open_rate),
            "arrival": swarm.arrival,
            "user_count": str(swarm.users),
            "spawn_rate": str(swarm.spawn_rate),
        }


class LabelledClient(LocustRSocketClient):
    """Its request events carry the running phase's strategy as ``request_type`` (Locust's
    Type column), so Locust keeps a statistics row per strategy and cell. Read at each
    answer, not taken from the user's spec: the users outlive a switch (an Edit keeps
    them). The recorder reads the cell from ``name``, which stays."""

    def __init__(
        self, environment: Any, host: str, port: int, spec: LoadSpec, phases: SwarmPhases
    ) -> None:
        super().__init__(environment, host, port, spec)
        fire = self._fire
        self._fire = lambda **event: fire(**{**event, "request_type": phases.label})


class StrategyRows(rsocket_user.RSocketUser):
    """A user of the UI: its requests' statistics rows name the running strategy."""

    abstract = True
    phases: ClassVar[SwarmPhases | None] = None  # set at init

    def new_client(self, k: int = 0) -> LocustRSocketClient:
        """The UI drives one balancer (``lblab ui`` refuses ``balancers`` > 1)."""
        assert self.phases is not None
        return LabelledClient(self.environment, *self.address, self.spec, self.phases)


class ClosedLoopUser(StrategyRows, rsocket_user.ClosedLoopUser):
    """The closed model (``rsocket_user.ClosedLoopUser``), its rows named by strategy."""


class OpenLoopUser(StrategyRows, rsocket_user.OpenLoopUser):
    """The open model (``rsocket_user.OpenLoopUser``), its rows named by strategy."""


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--lblab-ui",
        default="",
        include_in_web_ui=False,
        help="lblab ui: the session as JSON (lblab ui passes it)",
    )
    choices.add_arguments(parser)


@events.init.add_listener
def _on_init(environment: Any, web_ui: Any = None, **_: Any) -> None:
    text = getattr(environment.parsed_options, "lblab_ui", "")
    if web_ui is None or not text:
        log.error(
            "this locustfile is for `lblab ui` (the web UI and --lblab-ui); see docs/guides/web-ui.md"
        )
        return
    phases = SwarmPhases(environment, UiSession.from_json(text))
    StrategyRows.phases = phases
    web_ui.app.before_request(phases.before_request)
    web_ui.app.after_request(phases.with_banner)
    web_ui.app.add_url_rule("/" + banner.STATUS_URL, view_func=phases.status)
    web_ui.app.add_url_rule(
        "/" + banner.SCRIPT_URL,
        view_func=lambda: send_file(BANNER_JS, mimetype="text/javascript", max_age=0),
    )
    # Locust quitting stops a running test, which fires these too.
    environment.events.test_stopping.add_listener(lambda **_: phases.stopping())
    environment.events.test_stop.add_listener(lambda **_: phases.end_phase())
