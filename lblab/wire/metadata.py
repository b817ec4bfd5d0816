"""Composite metadata (message/x.rsocket.composite-metadata.v0), routing and lblab's MIME types.

Entry layout (RSocket extension spec): one byte that is either ``0x80 | well_known_id``
or ``len(mime) - 1`` followed by the ASCII MIME, then a 24-bit length and the content.
Routing content is a list of tags, each ``u8 length`` + UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from lblab.errors import LocalProtocolError, RemoteProtocolError

COMPOSITE_METADATA: Final = "message/x.rsocket.composite-metadata.v0"
ROUTING: Final = "message/x.rsocket.routing.v0"
APPLICATION_JSON: Final = "application/json"
TEXT_PLAIN: Final = "text/plain"
# lblab's own entries. A custom MIME per the extension spec's rules (not well known).
ROUTING_KEY: Final = "message/x.lblab.routing-key.v0"
"""UTF-8 key that hash strategies (ip-hash aside) hash on."""
LOAD_REPORT: Final = "application/x.lblab.load-report.v0+json"
"""A ``lblab.loadreport.LoadReport`` as JSON, in response metadata or METADATA_PUSH."""

WORK_ROUTE: Final = "work"
PROBE_ROUTE: Final = "probe"
"""A load probe (``prequal``): the server answers it from its own counters at once."""

# The subset of the well-known table lblab meets; ids from the extension spec.
WELL_KNOWN_IDS: Final[dict[str, int]] = {
    "application/json": 0x05,
    "application/octet-stream": 0x06,
    "text/plain": 0x21,
    "message/x.rsocket.mime-type.v0": 0x7A,
    "message/x.rsocket.accept-mime-types.v0": 0x7B,
    "message/x.rsocket.authentication.v0": 0x7C,
    "message/x.rsocket.tracing-zipkin.v0": 0x7D,
    ROUTING: 0x7E,
    COMPOSITE_METADATA: 0x7F,
}
WELL_KNOWN_NAMES: Final[dict[int, str]] = {v: k for k, v in WELL_KNOWN_IDS.items()}


def encode_composite(entries: Iterable[tuple[str, bytes]]) -> bytes:
    """Composite metadata from ``(mime, content)`` pairs; well-known MIMEs use their id."""
    out = bytearray()
    for mime, content in entries:
        known = WELL_KNOWN_IDS.get(mime)
        if known is not None:
            out.append(0x80 | known)
        else:
            raw = mime.encode("ascii")
            if not 0 < len(raw) <= 128:
                raise LocalProtocolError(f"custom MIME must be 1..128 ASCII bytes: {mime!r}")
            out.append(len(raw) - 1)
            out += raw
        if len(content) > 0xFFFFFF:
            raise LocalProtocolError(f"metadata entry of {len(content)} bytes exceeds 24 bits")
        out += len(content).to_bytes(3, "big")
        out += content
    return bytes(out)


def iter_composite(metadata: bytes | memoryview) -> Iterator[tuple[str, bytes]]:
    """``(mime, content)`` for each entry; an unknown well-known id is named ``well-known:0xNN``."""
    pos, end = 0, len(metadata)
    while pos < end:
        head = metadata[pos]
        pos += 1
        if head & 0x80:
            ident = head & 0x7F
            mime = WELL_KNOWN_NAMES.get(ident, f"well-known:0x{ident:02x}")
        else:
            n = head + 1
            if pos + n > end:
                raise RemoteProtocolError("composite metadata: MIME name runs past the end")
            mime = bytes(metadata[pos : pos + n]).decode("ascii", "replace")
            pos += n
        if pos + 3 > end:
            raise RemoteProtocolError("composite metadata: entry length runs past the end")
        length = int.from_bytes(metadata[pos : pos + 3], "big")
        pos += 3
        if pos + length > end:
            raise RemoteProtocolError("composite metadata: entry content runs past the end")
        yield mime, bytes(metadata[pos : pos + length])
        pos += length


def find_entry(metadata: bytes | memoryview | None, mime: str) -> bytes | None:
    """Content of the first entry of this MIME, or None (also for absent metadata)."""
    if not metadata:
        return None
    for entry_mime, content in iter_composite(metadata):
        if entry_mime == mime:
            return content
    return None


def encode_routing(*tags: str) -> bytes:
    out = bytearray()
    for tag in tags:
        raw = tag.encode("utf-8")
        if not 0 < len(raw) <= 255:
            raise LocalProtocolError(f"routing tag must be 1..255 bytes: {tag!r}")
        out.append(len(raw))
        out += raw
    return bytes(out)


def decode_routing(content: bytes) -> list[str]:
    tags, pos = [], 0
    while pos < len(content):
        n = content[pos]
        if pos + 1 + n > len(content):
            raise RemoteProtocolError("routing metadata: tag runs past the end")
        tags.append(content[pos + 1 : pos + 1 + n].decode("utf-8", "replace"))
        pos += 1 + n
    return tags


def request_metadata(route: str = WORK_ROUTE, routing_key: str | None = None) -> bytes:
    """The composite metadata a lblab client sends with a work request."""
    entries = [(ROUTING, encode_routing(route))]
    if routing_key is not None:
        entries.append((ROUTING_KEY, routing_key.encode("utf-8")))
    return encode_composite(entries)


PROBE_METADATA: Final = request_metadata(PROBE_ROUTE)
"""The whole metadata of a probe: the one routing entry ``probe``. A server recognises a
probe by these exact bytes (one comparison per request, no metadata parsing)."""
