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
from locust.runners import MasterRunner

from loadtests.records import FLUSH_S, RequestRecorder, mark_started
from loadtests.rsocket_user import ClosedLoopUser, OpenLoopUser, spec_of

__all__ = ["ClosedLoopUser", "OpenLoopUser"]


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

    def on_request(
        self, environment: Any, name: str, response_time: float, context: dict[str, Any]
    ) -> None:
        if "t_sent" not in context:
            return  # not one of ours
        if self.recorder is None:
            self.recorder = RequestRecorder(Path(spec_of(environment).records_dir))
            self.flusher = gevent.spawn(self._flush_forever)
        self.recorder.add(
            context["t_sent"],
            response_time,
            context["error_kind"],
            context["package_bytes"],
            context["work_bytes"],
            context["server"],
            name,
        )

    def _flush_forever(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            assert self.recorder is not None
            self.recorder.flush()

    def flush(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()


_recording = _Recording()


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return  # the master runs no users: its workers record

    def on_request(name: str, response_time: float, context: dict[str, Any], **_: Any) -> None:
        _recording.on_request(environment, name, response_time, context)

    def on_test_start(**_: Any) -> None:
        mark_started(Path(spec_of(environment).records_dir))

    environment.events.request.add_listener(on_request)
    environment.events.test_start.add_listener(on_test_start)
    environment.events.test_stop.add_listener(lambda **_: _recording.flush())
    environment.events.quitting.add_listener(lambda **_: _recording.flush())
