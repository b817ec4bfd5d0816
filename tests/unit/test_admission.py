"""The connection caps (``lblab.admission``), sans-I/O: who is refused and who is counted."""

from __future__ import annotations

from lblab.admission import Admission


class Conn:
    def __init__(self) -> None:
        self.refused: list[str] = []

    def refuse(self, message: str) -> None:
        self.refused.append(message)


def test_a_displaced_pending_connection_stops_counting_toward_the_total() -> None:
    """Over the pending cap the oldest connection without SETUP is refused; it closes at
    once, so it no longer counts toward ``max_connections`` and the next one gets in."""
    caps = Admission(max_connections=2, max_pending_setup=1, what="the port")
    first, second, third = Conn(), Conn(), Conn()
    assert caps.admit(first) and caps.admit(second)
    assert first.refused and "oldest is closed" in first.refused[0]
    assert first not in caps.open
    assert caps.admit(third)  # not "at its limit": first no longer counts
    assert not third.refused
    assert second.refused and "oldest is closed" in second.refused[0]  # third displaced it
    assert caps.open == {third}


def test_a_lingering_connection_counts_but_no_longer_waits_for_setup() -> None:
    caps = Admission(max_connections=2, max_pending_setup=1, what="the port")
    closed, waiting = Conn(), Conn()
    assert caps.admit(closed)
    caps.closing(closed)  # closed by us, its socket lingering
    assert caps.admit(waiting)  # not displaced by a connection that is closing
    assert not closed.refused and not waiting.refused
    assert caps.open == {closed, waiting}
    assert not caps.admit(Conn())  # the lingering socket still counts toward the total
