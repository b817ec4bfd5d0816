"""The report token's wire form (RSocket's Bearer authentication entry), its constant-time
check and the checks of the flags that give it."""

from __future__ import annotations

import pytest

from lblab.balancer.backend import BackendAddress
from lblab.balancer.node import NodeConfig
from lblab.config import check_token
from lblab.errors import ConfigError
from lblab.servers.agent import AgentConfig
from lblab.wire.auth import AUTHENTICATION, TokenCheck, bearer_metadata, bearer_token
from lblab.wire.metadata import COMPOSITE_METADATA, ROUTING, encode_composite, encode_routing

TOKEN = "Zq3-report-token-0123456789"


def test_a_bearer_entry_is_the_extension_s_bytes():
    """Well-known MIME 0x7C with the M flag (0xFC), a 24-bit length, 0x81 (Bearer), the token:
    the bytes rsocket-java's ``AuthMetadataCodec.encodeBearerMetadata`` writes."""
    raw = bearer_metadata(TOKEN)
    assert raw == b"\xfc" + (len(TOKEN) + 1).to_bytes(3, "big") + b"\x81" + TOKEN.encode()
    assert bearer_token(COMPOSITE_METADATA, raw) == TOKEN.encode()


def test_the_token_is_found_among_other_entries():
    raw = encode_composite([(ROUTING, encode_routing("work"))]) + bearer_metadata(TOKEN)
    assert bearer_token(COMPOSITE_METADATA, raw) == TOKEN.encode()


@pytest.mark.parametrize(
    ("mime", "metadata"),
    [
        pytest.param(COMPOSITE_METADATA, None, id="no metadata"),
        pytest.param(COMPOSITE_METADATA, b"", id="empty metadata"),
        pytest.param("application/json", bearer_metadata(TOKEN), id="not composite"),
        pytest.param(
            COMPOSITE_METADATA, encode_composite([(ROUTING, encode_routing("work"))]), id="no entry"
        ),
        pytest.param(
            COMPOSITE_METADATA,
            encode_composite([(AUTHENTICATION, b"\x80" + TOKEN.encode())]),
            id="simple auth type",
        ),
        pytest.param(
            COMPOSITE_METADATA,
            encode_composite([(AUTHENTICATION, b"\x06custom" + TOKEN.encode())]),
            id="custom auth type",
        ),
        pytest.param(COMPOSITE_METADATA, encode_composite([(AUTHENTICATION, b"")]), id="empty"),
        pytest.param(COMPOSITE_METADATA, bearer_metadata(TOKEN)[:10], id="truncated"),
    ],
)
def test_no_bearer_token(mime, metadata):
    assert bearer_token(mime, metadata) is None


def test_the_check_takes_the_token_only():
    check = TokenCheck(TOKEN)
    assert check.matches(TOKEN) and check.matches(TOKEN.encode())
    for other in ("", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), " " + TOKEN, "x" * len(TOKEN)):
        assert not check.matches(other), other
    assert not check.matches(TOKEN.encode() + b"\x00")


@pytest.mark.parametrize(
    "bad", ["a" * 15, "a" * 257, "sixteen chars ok", "tab\tin-the-token!!", "ümlaut-token-0123"]
)
def test_a_bad_token_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match=r"--report-token / LBLAB_REPORT_TOKEN must be 16-256"):
        check_token(bad, "--report-token", "LBLAB_REPORT_TOKEN")


def test_good_tokens():
    for good in ("a" * 16, "~" * 256, TOKEN):
        assert check_token(good, "--report-token", "LBLAB_REPORT_TOKEN") == good


def test_the_balancer_and_the_agent_check_their_token_and_never_show_it():
    backends = (BackendAddress("s1", "127.0.0.1", 7001, 1.0),)
    with pytest.raises(ConfigError, match="--report-token"):
        NodeConfig(backends=backends, report_token="short")
    with pytest.raises(ConfigError, match="--report-token"):
        AgentConfig(server="s1", report_to=(("127.0.0.1", 1),), pid=1, report_token="short")
    node = NodeConfig(backends=backends, report_token=TOKEN)
    agent = AgentConfig(server="s1", report_to=(("127.0.0.1", 1),), pid=1, report_token=TOKEN)
    assert TOKEN not in repr(node) and TOKEN not in repr(agent)
