"""No task swallows its own cancellation: ``lblab.wire_asyncio.within`` and the loops
built on it (the agent's report link) end when cancelled at any moment.

On Python 3.11 ``asyncio.wait_for`` cancelled just as its awaitable finishes returns the
awaitable's result or raises its error instead of ``CancelledError``; the agent's
reconnect loop caught that error and went on, so the agent never finished stopping.
These tests cancel at seeded random moments, counted in event-loop iterations (the race
window is one or two of them) and now and then after a real pause (a later attempt,
the backoff), on loopback: a port that refuses, and a listener that accepts and closes
at once (a failed handshake)."""

from __future__ import annotations

import asyncio
import random
import socket

import pytest

from lblab.servers.agent import ReportLink
from lblab.wire_asyncio import within

CANCELS = 400
ENDS_WITHIN_S = 1.0
"""A cancelled link ends in an iteration or two; one that has not after 1 s never will."""
GIVE_UP_AFTER = 5
"""Lost cancels after which a trial stops counting: each costs ``ENDS_WITHIN_S``."""


def test_within_raises_the_cancel_that_coincides_with_the_awaitable_failing() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        for outcome in (OSError("refused"), ("reader", "writer")):
            fut: asyncio.Future[object] = loop.create_future()
            task = asyncio.create_task(within(5.0, fut))
            await asyncio.sleep(0)  # the task now awaits fut
            if isinstance(outcome, OSError):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)
            task.cancel()  # in the same iteration: the window wait_for loses a cancel in
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())


def test_within_times_out_and_keeps_a_cancel_that_coincides_with_the_deadline() -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            await within(0.0, asyncio.Event().wait())
        task = asyncio.create_task(within(0.0, asyncio.Event().wait()))
        await asyncio.sleep(0)  # the task awaits, its deadline due in this iteration
        task.cancel()  # both cancel it; the one from outside wins
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _lost_cancels(port: int, seed: int) -> int:
    """Start the link, cancel it at a random moment, CANCELS times: how many never end."""
    rng = random.Random(seed)
    lost = 0
    for _ in range(CANCELS):
        link = ReportLink("127.0.0.1", port, "s1")
        task = asyncio.create_task(link.run())
        if rng.random() < 0.05:
            await asyncio.sleep(rng.uniform(0.0, 0.15))  # a later attempt, or its backoff
        for _ in range(rng.randrange(10)):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait({task}, timeout=ENDS_WITHIN_S)
        if not task.done():
            lost += 1
            while not task.done():  # a lost cancel: cancel again until one lands
                task.cancel()
                await asyncio.wait({task}, timeout=ENDS_WITHIN_S)
            if lost == GIVE_UP_AFTER:
                break
    return lost


def test_the_agent_link_ends_on_every_cancel_while_connects_are_refused() -> None:
    assert asyncio.run(_lost_cancels(_refused_port(), seed=1)) == 0


def test_the_agent_link_ends_on_every_cancel_while_handshakes_fail() -> None:
    async def main() -> int:
        async def slam(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(slam, "127.0.0.1", 0)
        async with server:
            return await _lost_cancels(server.sockets[0].getsockname()[1], seed=2)

    assert asyncio.run(main()) == 0
