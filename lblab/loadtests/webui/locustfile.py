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
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from flask import Response, jsonify, request
from locust import events
from locust.runners import STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

from lblab.errors import ConfigError
from lblab.loadtests.admin_client import AdminClient, AdminError
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.locustfile import ClosedLoopUser, OpenLoopUser, new_records
from lblab.loadtests.records import new_attempt, phase_folder
from lblab.loadtests.runconfig import LoadConfig
from lblab.loadtests.runner import Phase
from lblab.loadtests.webui import choices
from lblab.loadtests.webui.choices import Swarm
from lblab.loadtests.webui.protocol import UiSession, phase_notes
from lblab.scenarios import builtin_scenario

__all__ = ["ClosedLoopUser", "OpenLoopUser"]

log = logging.getLogger("lblab.ui")
OPEN_SCHEDULE_S = 7 * 86400.0  # the open model's schedule runs until Stop


class SwarmPhases:
    """The phases of this Locust process: one per swarm, and one per switch in a swarm."""

    def __init__(self, environment: Any, session: UiSession) -> None:
        self.env, self.session = environment, session
        self.host = environment.host  # the testbed's balancer
        self.run_dir = Path(session.run_dir)
        self.admin = AdminClient(*session.admin)
        self.swarm: Swarm | None = None
        self.entry: dict[str, Any] | None = None  # the running phase's note
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
            log.warning("web UI: refused: %s", exc)
            return jsonify({"success": False, "message": str(exc), "host": self.env.host})
        return None

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
            still = (
                f"; the test goes on with {self.swarm.strategy}" if running and self.swarm else ""
            )
            raise AdminError(
                f"the balancer refused strategy {swarm.strategy} {options or ''}: {exc}{still}"
            ) from None
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
        log.error("this locustfile is for `lblab ui` (the web UI and --lblab-ui); see README")
        return
    phases = SwarmPhases(environment, UiSession.from_json(text))
    web_ui.app.before_request(phases.before_request)
    # Locust quitting stops a running test, which fires these too.
    environment.events.test_stopping.add_listener(lambda **_: phases.stopping())
    environment.events.test_stop.add_listener(lambda **_: phases.end_phase())
