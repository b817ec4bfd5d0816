"""Typed failures, one class per kind of fault (the h11 split of blame).

``LocalProtocolError``: we were about to send something illegal (a bug on our side).
``RemoteProtocolError``: the peer sent something illegal; the connection answers with a
connection-level ERROR frame coded by ``error_code`` and closes, other connections
carry on. ``ApplicationError`` is a stream-level ERROR frame received or to be sent.
"""

from __future__ import annotations

from lblab.wire.codes import ErrorCode

EXIT_OK, EXIT_PHASE_FAILED, EXIT_INTERRUPTED = 0, 1, 130
"""``lblab run``'s exit codes besides bad input (2, ``lblab.cli``) and
``WriteFailed.exit_code`` (74): ok, a phase failed (or the testbed did not start),
interrupted (Ctrl-C)."""


class LblabError(Exception):
    """Root of every error lblab raises on purpose."""


class ConfigError(LblabError, ValueError):
    """A configuration value is wrong; the message names the field, the value and the fix."""


class ManifestError(ConfigError):
    """A run's ``manifest.json`` cannot be read: missing, not a manifest, or of a schema
    version this lblab does not know; the message names the file and what to do."""


class WriteFailed(LblabError):
    """A file of results could not be written; the message names the path and why.

    ``no_room``: the filesystem was full (or over quota), so freeing space and running
    again can continue the work. Not an ``OSError``: code that tolerates a failed
    connection or process must not take a failed write of results for one."""

    exit_code = 74  # sysexits.h EX_IOERR

    def __init__(self, message: str, *, path: object = None, no_room: bool = False) -> None:
        super().__init__(message)
        self.path, self.no_room = path, no_room

    def __str__(self) -> str:
        return str(self.args[0])


class ProtocolError(LblabError):
    """Abstract: an RSocket protocol rule was broken. Use a subclass."""

    error_code: ErrorCode = ErrorCode.CONNECTION_ERROR

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        if type(self) is ProtocolError:
            raise TypeError(
                "ProtocolError is abstract: raise LocalProtocolError or RemoteProtocolError"
            )
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class LocalProtocolError(ProtocolError):
    """We tried to build or send an illegal frame."""


class RemoteProtocolError(ProtocolError):
    """The peer sent an illegal frame; reply with ERROR(error_code) and close the connection."""


class ApplicationError(LblabError):
    """An ERROR frame on one stream: the request failed, the connection is fine.

    ``error_code`` is the frame's code as sent: an ``ErrorCode`` or any other 32-bit value
    a peer chose (an application's own codes)."""

    def __init__(self, message: str, error_code: int = ErrorCode.APPLICATION_ERROR) -> None:
        super().__init__(message)
        self.error_code = error_code


class NoBackendAvailable(LblabError):
    """The balancer has no available backend for a request (answered with REJECTED)."""


def worth_logging(count: int) -> bool:
    """Whether the ``count``-th occurrence of a fault is logged: the 1st, 2nd, 4th, 8th
    ... A fault a peer or a broken strategy repeats at request rate then writes a line per
    doubling, not one per request, and the count in each line says how many there were."""
    return count & (count - 1) == 0
