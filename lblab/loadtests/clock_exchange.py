"""The Locust side of ``loadtests.clocks``: the master pings its workers at phase start.

Over Locust's message channel (``register_message`` / ``send_message``) the master sends
``ROUNDS`` pings to every worker when the test starts; each answer gives one
``clocks.estimate``; the master writes the best round per worker with
``clocks.write_clocks`` into the phase's records folder.

``--lblab-test-clock-skew-ms`` (tests only) adds a known offset to a worker's clock. The
worker reads it from its own command line at start: the master's options overwrite the
worker's when the phase spawns.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from lblab.loadtests.clocks import best, estimate, write_clocks
from lblab.loadtests.records import loader_name

ROUNDS = 5
ROUND_GAP_S = 0.05
ANSWER_DEADLINE_S = 2.0
"""How long the master waits for the last answers after the last ping."""
PING, PONG = "lblab_clock_ping", "lblab_clock_pong"


class _Worker:
    """The worker's side: answer pings with its own (optionally skewed) clock."""

    def __init__(self, skew_s: float) -> None:
        self.skew_s = skew_s

    def on_ping(self, environment: Any, msg: Any, **_: Any) -> None:
        t1 = time.time() + self.skew_s
        data = {**msg.data, "t1": t1, "loader": loader_name(), "pid": os.getpid()}
        data["t2"] = time.time() + self.skew_s
        environment.runner.send_message(PONG, data)


class _Master:
    """The master's side: ping every worker at the phase's start, keep the best round."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.exchanges: dict[str, list[tuple[float, float]]] = {}
        self.about: dict[str, dict[str, Any]] = {}
        self.pending = 0

    def on_pong(self, msg: Any, **_: Any) -> None:
        t3 = time.time()
        d = msg.data
        self.exchanges.setdefault(msg.node_id, []).append(estimate(d["t0"], d["t1"], d["t2"], t3))
        self.about[msg.node_id] = {"loader": d["loader"], "pid": d["pid"]}
        self.pending -= 1

    def exchange(self) -> None:
        runner = self.environment.runner
        for _ in range(ROUNDS):
            for client in list(runner.clients.all):
                self.pending += 1
                runner.send_message(PING, {"t0": time.time()}, client.id)
            gevent.sleep(ROUND_GAP_S)
        deadline = time.monotonic() + ANSWER_DEADLINE_S
        while self.pending > 0 and time.monotonic() < deadline:
            gevent.sleep(0.01)
        self.write()

    def write(self) -> None:
        from lblab.loadtests.rsocket_user import spec_of

        workers = {}
        for node, exchanges in self.exchanges.items():
            offset, bound = best(exchanges)
            workers[node] = {
                **self.about[node],
                "offset_ms": round(1000.0 * offset, 3),
                "bound_ms": round(1000.0 * bound, 3),
                "rounds": len(exchanges),
            }
        folder = Path(spec_of(self.environment).records_dir)
        write_clocks(folder, workers, len(self.environment.runner.clients.all))


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    parser.add_argument(
        "--lblab-test-clock-skew-ms",
        type=float,
        default=0.0,
        include_in_web_ui=False,
        help="lblab tests only: pretend this worker's clock is this many ms ahead",
    )


def install(environment: Any) -> None:
    """Wire the exchange into a master or worker process (nothing for a standalone one)."""
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        master = _Master(environment)
        runner.register_message(PONG, master.on_pong)
        environment.events.test_start.add_listener(lambda **_: gevent.spawn(master.exchange))
    elif isinstance(runner, WorkerRunner):
        options = environment.parsed_options
        skew_ms = float(getattr(options, "lblab_test_clock_skew_ms", 0.0) or 0.0)
        runner.register_message(PING, _Worker(skew_ms / 1000.0).on_ping)
