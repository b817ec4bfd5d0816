"""RSocket's authentication extension, Bearer type: a token in a SETUP's composite metadata.

The extension (rsocket/rsocket, ``Extensions/Security/Authentication.md``) is one
composite-metadata entry of the well-known MIME ``message/x.rsocket.authentication.v0``
(id 0x7C) whose content is the auth type, then the payload. The type is one byte: with
its high bit (the M flag) set, the low 7 bits are a well-known type id (``simple`` 0x00,
``bearer`` 0x01); else a length and a type name follow. A Bearer entry is thus ``0x81``
and the token's bytes, nothing else (no length: the entry's own ends it). lblab's agents
send the run's report token so to the balancer's agent port (docs/DESIGN.md, "Wire
contract"); any RSocket client with the extension (rsocket-java's
``AuthMetadataCodec.encodeBearerMetadata``) writes the same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from lblab.errors import RemoteProtocolError
from lblab.wire.metadata import COMPOSITE_METADATA, encode_composite, find_entry

AUTHENTICATION: Final = "message/x.rsocket.authentication.v0"
BEARER: Final = 0x81
"""The auth type byte of a Bearer entry: the M flag and well-known type 0x01."""


def bearer_metadata(token: str) -> bytes:
    """Composite metadata holding one Bearer authentication entry with ``token``."""
    return encode_composite([(AUTHENTICATION, bytes([BEARER]) + token.encode())])


def bearer_token(metadata_mime: str, metadata: bytes | None) -> bytes | None:
    """The Bearer token a SETUP carries, or None: its metadata is not composite, has no
    authentication entry, or one of another auth type, or cannot be read."""
    if metadata_mime != COMPOSITE_METADATA:
        return None
    try:
        entry = find_entry(metadata, AUTHENTICATION)
    except RemoteProtocolError:
        return None
    if not entry or entry[0] != BEARER:
        return None
    return entry[1:]


class TokenCheck:
    """Compares offered tokens with one expected token in constant time.

    Both sides are hashed first (SHA-256), so ``hmac.compare_digest`` compares two equal
    lengths and the time taken says nothing about the expected token, not even its
    length."""

    __slots__ = ("_digest",)

    def __init__(self, token: str) -> None:
        self._digest = hashlib.sha256(token.encode()).digest()

    def matches(self, offered: bytes | str) -> bool:
        raw = offered.encode() if isinstance(offered, str) else offered
        return hmac.compare_digest(hashlib.sha256(raw).digest(), self._digest)
