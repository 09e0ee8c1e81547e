"""Which hosts the fetcher may reach, and how it reaches them.

A search result is untrusted input: a page author or a compromised provider can
point it at ``http://127.0.0.1:8080/``, ``http://169.254.169.254/`` (a cloud's
metadata service) or at a public page that redirects there. So every connection the
fetcher opens is checked on the address it actually connects to: the host name is
resolved once, every address it resolves to is checked, and the connection goes to
a checked address (no second lookup, so no DNS-rebinding window). Redirects open
new connections, checked the same way.

Refused (``refusal``): loopback, private (RFC 1918, RFC 4193), link-local,
multicast, unspecified and reserved addresses, IPv4 and IPv6, and anything else
that is not a globally reachable unicast address. An IPv6 address that leads to an
IPv4 one (mapped ``::ffff:a.b.c.d``, 6to4, NAT64) is judged by that IPv4 address.
``allow_private_hosts`` (``--research-allow-private-hosts``) lifts the check, to
research an intranet.

``Network`` is how names are resolved and connections made; tests replace both,
so that a refusal is shown without a packet leaving the machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import httpcore

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]
"""``resolve(host, port) -> addresses`` (IPv4 or IPv6 text), in the order to try them;
raises ``OSError`` when the name does not resolve."""

Connector: TypeAlias = Callable[
    [str, int, "float | None"], "Awaitable[httpcore.AsyncNetworkStream]"
]
"""``connect(address, port, timeout) -> stream``: a TCP connection to an address
that was checked (``httpcore``'s network stream; TLS is started on it afterwards)."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (an IPv6 zone such as ``%eth0`` dropped), else None."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to: mapped (``::ffff:a.b.c.d``), 6to4
    (``2002::/16``) or NAT64 (``64:ff9b::/96``, what DNS64 answers on IPv6-only networks)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress) -> str | None:
    """Why the fetcher does not connect to ``address`` (``"loopback"``, ``"private"``
    ...), or ``None`` for a globally reachable unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:  # the IPv4 address decides (a public one is reachable)
            why = refusal(inner)
            return None if why is None else f"{why} (IPv4 {inner} inside IPv6)"
        if address.is_site_local:
            return "site-local"
    for why, test in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),  # IPv4 compatible ``::a.b.c.d`` too
        ("private", address.is_private),
    ):
        if test:
            return why
    if not address.is_global:
        return "non-public"
    return None


def refused_message(host: str, address: str, why: str) -> str:
    """The context note for a refused source: what the host is, and how to allow it."""
    where = address if parse_address(host) is not None else f"{host} resolves to {address}"
    return (
        f"refused: {where}, a {why} address "
        "(private addresses are not fetched; --research-allow-private-hosts allows them)"
    )


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host`` (``getaddrinfo``), in order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    addresses: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


async def direct_connect(
    address: str, port: int, timeout: float | None
) -> httpcore.AsyncNetworkStream:
    """A plain TCP connection to ``address`` (an IP address: nothing is resolved again)."""
    import httpcore

    return await httpcore.AnyIOBackend().connect_tcp(address, port, timeout=timeout)


@dataclass(frozen=True)
class Network:
    """How the fetcher reaches a host: ``resolve`` names to addresses, ``connect`` to
    one of them. The defaults are the system resolver and a direct TCP connection;
    replace them to use another resolver, or in tests."""

    resolve: Resolver = system_resolve
    connect: Connector = direct_connect
