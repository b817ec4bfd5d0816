"""The router reads a few fields of a forwarded frame in place, by offset (``BODY_AT``,
``METADATA_AT``, ``ERROR_MESSAGE_AT``, ``INITIAL_N_LENGTH``): each offset finds what the
codec wrote there, for frames the codec encodes."""

from __future__ import annotations

from lblab.balancer.router import (
    BODY_AT,
    ERROR_MESSAGE_AT,
    INITIAL_N_LENGTH,
    METADATA_AT,
    METADATA_LENGTH_LENGTH,
    routing_key,
)
from lblab.wire.codec import encode_frame
from lblab.wire.codes import U32, ErrorCode, FrameType
from lblab.wire.frames import Error, Payload, RequestResponse, RequestStream
from lblab.wire.metadata import ROUTING_KEY, encode_composite


def test_a_payloads_metadata_is_where_the_router_reads_it() -> None:
    metadata = b"\x01\x02report"
    frame = encode_frame(Payload(stream_id=7, data=b"xyz", metadata=metadata, complete=True))
    length = int.from_bytes(frame[BODY_AT : BODY_AT + METADATA_LENGTH_LENGTH], "big")
    assert length == len(metadata)
    assert frame[METADATA_AT : METADATA_AT + length] == metadata
    assert frame[METADATA_AT + length :] == b"xyz"


def test_an_errors_code_and_message_are_where_the_router_reads_them() -> None:
    frame = encode_frame(Error(stream_id=7, error_code=ErrorCode.REJECTED, message="busy"))
    assert U32.unpack_from(frame, BODY_AT)[0] == ErrorCode.REJECTED
    assert frame[ERROR_MESSAGE_AT:] == b"busy"


def test_the_routing_key_is_found_in_every_request_kind() -> None:
    metadata = encode_composite([(ROUTING_KEY, b"user-42")])
    for frame, kind in (
        (RequestResponse(stream_id=1, data=b"{}", metadata=metadata), FrameType.REQUEST_RESPONSE),
        (RequestStream(stream_id=3, initial_n=5, data=b"{}", metadata=metadata),
         FrameType.REQUEST_STREAM),
    ):  # fmt: skip
        raw = bytearray(b"junk" + encode_frame(frame))
        length = int.from_bytes(raw[4:7], "big")
        assert routing_key(raw, 4, length, kind) == b"user-42", kind
    assert U32.size == INITIAL_N_LENGTH  # a request-stream's initial request-n
