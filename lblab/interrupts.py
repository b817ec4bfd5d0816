"""Ctrl-C and SIGTERM for the long-running commands (a run, the web UI's session, the
notebook server): SIGTERM raised as a ``KeyboardInterrupt`` so both stop the same way,
and cleanup that a second signal cannot cut short."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler: stop as Ctrl-C stops (``signal.signal(SIGTERM, raise_interrupt)``)."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def ignoring_interrupts() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C during it is ignored, not half-obeyed."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
