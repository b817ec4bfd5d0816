"""Locust's own ``FastHttpUser``, for ``bench_loadgen.py``'s ``fasthttp`` round.

    locust -f benchmarks/fasthttp_locustfile.py --headless --host http://HOST:PORT \\
        --lblab-spec '<LoadSpec JSON>' -u 8 -r 80 -t 18s EchoHttpUser

The yardstick for lblab's RSocket user: the same closed model with no think time, each
request a POST of the spec's first cell's body (``sp+sr``: 100 B) to
``benchmarks/http_echo_server.py``, and the load lasting the spec's duration from the
first request, as ``ClosedLoopUser``'s does (``-t`` is the safety net). No records:
Locust's own stats only.
"""

from __future__ import annotations

from typing import Any

from locust import constant, events, task
from locust.contrib.fasthttp import FastHttpUser

from lblab.loadtests.rsocket_user import end_load_after, spec_of
from lblab.scenarios import request_body


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    parser.add_argument("--lblab-spec", default="", include_in_web_ui=False)


class EchoHttpUser(FastHttpUser):
    wait_time = constant(0)
    clock_started = False  # by the process's first request

    def on_start(self) -> None:
        spec = spec_of(self.environment)
        cell = spec.scenario.cells[0]
        self.body = request_body(cell.package_bytes, cell.work_bytes)
        self.duration = spec.duration

    @task
    def echo(self) -> None:
        if not EchoHttpUser.clock_started:
            EchoHttpUser.clock_started = True
            end_load_after(self.environment, self.duration)
        # Its docstring says "String/bytes"; its hint only str.
        self.client.post("/", data=self.body)  # type: ignore[arg-type]
