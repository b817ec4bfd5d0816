"""balancer.checks: safe ids and hosts, loopback admin binds, self-pointing backends."""

from __future__ import annotations

import asyncio

import pytest

from lblab.balancer.input_checks import (
    check_admin_bind,
    check_backend_id,
    check_host,
    is_local_ip,
    is_loopback,
    resolved_self_loop,
    self_loop,
)
from lblab.errors import ConfigError

TOKEN = "0123456789abcdef"


@pytest.mark.parametrize("good", ["s1", "A.z-0_9", "x" * 64, "web-1.eu"])
def test_safe_ids_pass(good: str) -> None:
    check_backend_id(good)


@pytest.mark.parametrize("bad", ["", "x" * 65, "a b", 'a"b', "a\nb", "a/b", "a%20b", "s\u00e9"])
def test_unsafe_ids_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        check_backend_id(bad)


@pytest.mark.parametrize("good", ["127.0.0.1", "::1", "lb_1.example.com", "example.com."])
def test_hosts_pass(good: str) -> None:
    check_host(good, "address")


@pytest.mark.parametrize("bad", ["", "a b", "127.0.0.1\nx", "-a", "a..b", "x" * 64, 'a"b'])
def test_hosts_that_are_neither_ip_nor_name_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="not an IP address or a host name"):
        check_host(bad, "address")


def test_admin_beyond_loopback_needs_a_well_formed_token() -> None:
    for host in ("127.0.0.1", "127.9.9.9", "::1", "localhost", "::ffff:127.0.0.1"):
        assert is_loopback(host)
        check_admin_bind(host, None)
    for host in ("0.0.0.0", "::", "", "192.0.2.1", "my-host"):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="not a loopback address"):
            check_admin_bind(host, None)
        check_admin_bind(host, TOKEN)
    for token in ("short", TOKEN[:-1], TOKEN + " x", "\u00e9" * 20, "x" * 257):
        with pytest.raises(ConfigError, match="16-256 visible ASCII"):
            check_admin_bind("127.0.0.1", token)


def test_local_addresses_are_found_without_sending_anything() -> None:
    assert is_local_ip("127.0.0.1") and is_local_ip("0.0.0.0") and is_local_ip("::")
    assert not is_local_ip("192.0.2.1")  # TEST-NET-1: never assigned to this machine
    assert not is_local_ip("localhost")  # a name, not an IP literal


def test_self_loops_need_one_of_our_ports_and_a_local_address() -> None:
    assert self_loop("127.0.0.2", 7878, [7878, 9100])
    assert self_loop("localhost", 9100, [7878, 9100])
    assert not self_loop("127.0.0.1", 7001, [7878, 9100])
    assert not self_loop("192.0.2.1", 7878, [7878])
    # names resolve (only when the port is ours): "0" is 0.0.0.0, "127.1" is 127.0.0.1
    assert asyncio.run(resolved_self_loop("0", 7878, [7878]))
    assert asyncio.run(resolved_self_loop("127.1", 7878, [7878]))
    assert not asyncio.run(resolved_self_loop("no-such-host.invalid", 7001, [7878]))
