"""Checks on what the command line and the admin API give the balancer.

Backend ids and hosts end up in /metrics labels, /status and log lines, so they are held
to a safe character set: no id or host can add a line or a label to either. The admin
API may only listen beyond loopback with a token. A backend must not be the balancer
itself: every request would then loop through it until its deadline.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable

from lblab.config import check_id, check_token
from lblab.errors import ConfigError
from lblab.wire_asyncio import within

_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?")
"""DNS labels; ``_`` too, as /etc/hosts and inventories use it."""
TOKEN_ENV = "LBLAB_ADMIN_TOKEN"
RESOLVE_TIMEOUT_S = 2.0


def check_backend_id(backend_id: str) -> None:
    """A backend id is an id of the one grammar (``lblab.config.ID_PATTERN``)."""
    check_id(backend_id, "backend id")


def check_host(host: str, field: str) -> None:
    """An IP address or a DNS name, nothing else."""
    if _ip(host) is None and not HOSTNAME.fullmatch(host):
        raise ConfigError(f"{field}: {host!r} is not an IP address or a host name")


def check_admin_bind(host: str, token: str | None) -> None:
    """Refuse an admin API reachable beyond this machine without a token, and bad tokens."""
    if token is not None:
        check_token(token, "--admin-token", TOKEN_ENV)
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"--admin-host {host!r} is not a loopback address, so anyone who reaches it could "
            f"change the balancer: give --admin-token (or {TOKEN_ENV}), or keep 127.0.0.1"
        )


def is_loopback(host: str) -> bool:
    """True for a loopback IP literal or ``localhost`` (a name that may resolve elsewhere is not)."""
    if host.lower() == "localhost":
        return True
    ip = _ip(host)
    return ip is not None and ip.is_loopback


def is_local_ip(host: str) -> bool:
    """True if connecting to this IP literal reaches this machine: loopback, unspecified,
    or one of its own addresses (a socket can be bound to it; nothing is sent)."""
    ip = _ip(host)
    if ip is None:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((str(ip), 0))
        except OSError:
            return False
    return True


def self_loop(host: str, port: int, own_ports: Iterable[int]) -> bool:
    """True if ``host:port`` names one of this node's listening ports (no name lookup)."""
    return port in set(own_ports) and (host.lower() == "localhost" or is_local_ip(host))


async def resolved_self_loop(host: str, port: int, own_ports: Iterable[int]) -> bool:
    """``self_loop`` for a host name too: every address it resolves to is checked."""
    ports = set(own_ports)
    if port not in ports:
        return False
    if host.lower() == "localhost" or _ip(host) is not None:
        return self_loop(host, port, ports)
    loop = asyncio.get_running_loop()
    try:
        infos = await within(
            RESOLVE_TIMEOUT_S, loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        )
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            f"cannot resolve {host!r} ({exc or 'timed out'}); give an IP address or a "
            "name that resolves"
        ) from None
    return any(is_local_ip(str(info[4][0])) for info in infos)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
