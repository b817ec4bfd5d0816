"""The failure vocabulary (``lblab/failures.py``): kinds, origins, server faults."""

from __future__ import annotations

import pytest

from lblab.failures import balancer_message, classify_error, is_server_fault
from lblab.wire.codec import encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        (
            ErrorCode.REJECTED,
            balancer_message("rejected", "no backend available"),
            ("rejected", "balancer"),
        ),
        (
            ErrorCode.APPLICATION_ERROR,
            balancer_message("timeout", "timed out"),
            ("timeout", "balancer"),
        ),
        (
            ErrorCode.APPLICATION_ERROR,
            balancer_message("connection", "lost"),
            ("connection", "transport"),
        ),
        (ErrorCode.REJECTED, "server s1 is at --max-inflight", ("rejected", "server")),
        (ErrorCode.APPLICATION_ERROR, "work_bytes must be >= 0", ("application", "server")),
        (ErrorCode.CANCELED, "gone", ("other", "server")),
        (ErrorCode.APPLICATION_ERROR, "balancer/nonsense: x", ("application", "server")),
    ],
)
def test_an_error_is_read_back_into_kind_and_origin(code, message, expected) -> None:
    assert classify_error(code, message) == expected


def test_only_a_flagged_application_error_is_the_servers_fault() -> None:
    def frame(code: int, message: str) -> bytes:
        return encode_frame(Error(stream_id=1, error_code=code, message=message))

    assert is_server_fault(
        ErrorCode.APPLICATION_ERROR, frame(0x201, "server fault: s1 failed: X"), 13
    )
    assert not is_server_fault(
        ErrorCode.APPLICATION_ERROR, frame(0x201, "work_bytes must be >= 0"), 13
    )
    assert not is_server_fault(ErrorCode.REJECTED, frame(0x202, "server fault: at capacity"), 13)
    with pytest.raises(ValueError, match="unknown error kind"):
        balancer_message("oops", "x")
