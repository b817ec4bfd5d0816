"""The locustfile the runner and the ansible loader hosts use.

    locust -f loadtests/locustfile.py --headless --host rsocket://HOST:PORT \\
        --lblab-spec '<LoadSpec JSON>' -u 50 -r 50 -t 20m --stop-timeout 31 ClosedLoopUser

Distributed: the same flags on ``--master`` (with ``--expect-workers N``); workers need
only ``--worker --master-host HOST -f loadtests/locustfile.py``. Every process that runs
users records its requests into the spec's ``records_dir`` (see ``loadtests.records``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from lblab.loadtests import clock_exchange
from lblab.loadtests.records import FLUSH_S, RequestRecorder, mark_started
from lblab.loadtests.rsocket_user import (
    GENERATOR_DONE,
    LOAD_STARTED,
    ClosedLoopUser,
    OpenLoopUser,
    end_load_after,
    quit_after_reports,
    report_when_asked,
    spec_of,
)

__all__ = ["ClosedLoopUser", "OpenLoopUser", "new_records"]


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--lblab-spec",
        default="",
        include_in_web_ui=False,
        help="lblab: the phase's load spec as JSON (loadtests.loadspec.LoadSpec)",
    )


class _Recording:
    """The process's recorder, created at the first request (workers learn the spec late)."""

    recorder: RequestRecorder | None = None
    flusher: gevent.Greenlet | None = None
    records_dir = ""
    check_folder = False  # the spec may name a new folder (``new_records``)

    def on_request(
        self, environment: Any, name: str, response_time: float, context: dict[str, Any]
    ) -> None:
        if "t_sent" not in context:
            return  # not one of ours
        if self.recorder is None or self.check_folder:
            self._open(spec_of(environment).records_dir)
        assert self.recorder is not None
        self.recorder.add(
            context["t_sent"],
            response_time,
            context["error_kind"],
            context["error_origin"],
            context["package_bytes"],
            context["work_bytes"],
            context["server"],
            name,
            context.get("service_ms"),
            context.get("queue_ms"),
            context.get("send_lag_ms"),
            context.get("balancer", "b1"),
            context.get("server_ms"),
        )

    def _flush_forever(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            assert self.recorder is not None
            self.recorder.flush()

    def flush(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()

    def _open(self, records_dir: str) -> None:
        """Record into ``records_dir``; a folder keeps one recorder (its chunk numbers)."""
        self.check_folder = False
        if self.recorder is not None and records_dir == self.records_dir:
            return
        self.flush()
        self.recorder, self.records_dir = RequestRecorder(Path(records_dir)), records_dir
        if self.flusher is None:
            self.flusher = gevent.spawn(self._flush_forever)

    def restart(self) -> None:
        """Write what this process holds; the next request records into the folder of
        the spec then current."""
        self.flush()
        self.check_folder = True


_recording = _Recording()


def new_records() -> None:
    """Start recording into the current spec's folder (``lblab ui``: a new swarm, or a
    strategy switch while one runs, is a new phase with its own folder)."""
    _recording.restart()


def _count_generators(environment: Any) -> None:
    """The master's part in the open and trace models: one generator per worker, each
    sending its share of the schedule (Locust's ``fixed_count`` counts users over all
    workers: at 1, the class default for one process, only one worker's share was sent),
    and the test ends when every generator has said it is done (a worker that quit
    instead would have its generator handed to another, which would send it again)."""
    generators = spec_of(environment).generators
    OpenLoopUser.fixed_count = generators
    done: set[str] = set()

    def on_done(environment: Any, msg: Any, **_: Any) -> None:
        done.add(msg.node_id)
        if len(done) >= generators:
            gevent.spawn(quit_after_reports, environment)

    environment.runner.register_message(GENERATOR_DONE, on_done)


def _time_the_load(environment: Any) -> None:
    """The master's part in the closed model under a run time: the first worker to send
    starts the phase's clock (``rsocket_user._LoadClock``)."""
    started = False

    def on_started(environment: Any, **_: Any) -> None:
        nonlocal started
        if not started and environment.parsed_options.run_time:
            started = True
            end_load_after(environment, spec_of(environment).duration)

    environment.runner.register_message(LOAD_STARTED, on_started)


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    # Locust sets its --run-time timer right after this event, relative to the gevent
    # loop's cached clock, which has not moved since the hub was made (before this file
    # and its imports loaded: 1-2 s, more on a busy machine). Without a refresh the
    # phase ended that much early: 3.0 s of load for -t 5 (tests/integration/
    # test_locust_hub.py).
    gevent.get_hub().loop.update_now()
    clock_exchange.install(environment)
    if isinstance(environment.runner, MasterRunner):
        _count_generators(environment)
        _time_the_load(environment)
        return  # the master runs no users: its workers record
    if isinstance(environment.runner, WorkerRunner):
        report_when_asked(environment)

    def on_request(name: str, response_time: float, context: dict[str, Any], **_: Any) -> None:
        _recording.on_request(environment, name, response_time, context)

    def on_test_start(**_: Any) -> None:
        mark_started(Path(spec_of(environment).records_dir))

    environment.events.request.add_listener(on_request)
    environment.events.test_start.add_listener(on_test_start)
    environment.events.test_stop.add_listener(lambda **_: _recording.flush())
    environment.events.quitting.add_listener(lambda **_: _recording.flush())
