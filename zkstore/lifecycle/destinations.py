"""Where notifications may go: global addresses, and what the operator allows besides.

A webhook URL comes from whoever submits a job (``submit --notify``), and the daemon that POSTs
it sits inside the cluster's network: without a rule, a job could make the leader POST to a
cloud's metadata service (169.254.169.254), to an admin endpoint on loopback or anywhere on the
private network, and read the answers' classes as a port scanner. So a destination is refused if
its address is loopback, link-local (169.254/16, fe80::/10), private (RFC 1918, fc00::/7),
multicast, unspecified, reserved or otherwise not global, unless the operator lists it in
``--notify-allowed-hosts`` / ``ZKSTORE_NOTIFY_ALLOWED_HOSTS`` (comma-separated: host names, which
are then allowed whatever they resolve to, addresses, or CIDR blocks; for development,
``127.0.0.1``).

The check is made **after resolving the name**, and the sender connects to the addresses it
checked (its resolver hands the HTTP client only those): a name that resolves to a global
address when checked and to a private one a moment later (DNS rebinding) cannot switch the
destination. Redirects are never followed. An IPv4 address written inside an IPv6 one
(``::ffff:127.0.0.1``) is judged as the IPv4 address.

``submit --notify`` refuses a URL that names a forbidden address or a name that resolves to one
(one line, exit 2; a name that does not resolve there is left to the sender); the sender drops
an entry whose destination is refused with a line at ERROR (an entry a ZooKeeper writer planted).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from zkstore.errors import ConfigError, RefusedDestination
from zkstore.jobs.stops import redact_url

__all__ = [
    "ALLOWED_ENV",
    "Address",
    "Destinations",
    "Network",
    "Resolve",
    "address_class",
    "destination_of",
    "is_address",
]

ALLOWED_ENV = "ZKSTORE_NOTIFY_ALLOWED_HOSTS"
_ALLOWED_BY = f"{ALLOWED_ENV} (the daemons' --notify-allowed-hosts)"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``socket.getaddrinfo``'s shape: (family, type, proto, canonname, sockaddr)
Resolve = Callable[[str, int], Sequence[tuple[Any, ...]]]


def address_class(address: Address) -> str | None:
    """Why ``address`` is no place for a notification (``"loopback"``, ``"private"``...), or
    None for a global address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind, refused in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("non-global", not address.is_global),
    ):
        if refused:
            return kind
    return None


@dataclass(frozen=True)
class Destinations:
    """The rule of one process: global addresses, plus the ``allowed`` names and networks."""

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, value: str | Iterable[str]) -> Destinations:
        """From ``--notify-allowed-hosts`` (comma-separated, repeatable): names, addresses or
        CIDR blocks; :class:`ConfigError` for anything else."""
        items = [value] if isinstance(value, str) else list(value)
        names: set[str] = set()
        networks: list[Network] = []
        for item in (part.strip() for entry in items for part in entry.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _normal(item)
            if not name or not all(c.isalnum() or c in "-._" for c in name):
                raise ConfigError(
                    f"--notify-allowed-hosts: {item[:60]!r} is not a host name, an address or "
                    "a CIDR block"
                )
            names.add(name)
        return cls(frozenset(names), tuple(networks))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Destinations:
        """The rule ``ZKSTORE_NOTIFY_ALLOWED_HOSTS`` gives (none: global addresses only)."""
        return cls.parse((os.environ if environ is None else environ).get(ALLOWED_ENV, ""))

    def name_allowed(self, host: str) -> bool:
        return _normal(host) in self.names

    def refusal(self, address: str) -> str | None:
        """Why a connection to ``address`` is refused (its class), or None if it may go."""
        try:
            parsed = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return "not an address"
        if any(parsed in network for network in self.networks):
            return None
        mapped = parsed.ipv4_mapped if isinstance(parsed, ipaddress.IPv6Address) else None
        if mapped is not None and any(mapped in network for network in self.networks):
            return None
        return address_class(parsed)

    def check_url(
        self, url: str, resolve: Resolve | None = None, *, allowed_by: str | None = None
    ) -> None:
        """Refuse (:class:`RefusedDestination`, one line) a URL whose host is a forbidden
        address or a name resolving to one; a name that does not resolve here passes (the
        sender checks again, at every connection). ``allowed_by`` names what allows more
        (default: the variable and the daemons' flag)."""
        host, port = _host_port(url)
        if self.name_allowed(host):
            return
        if is_address(host):
            addresses = [host]
        else:
            try:
                found = (resolve or _resolve)(host, port)
            except (OSError, UnicodeError):
                return
            addresses = [str(info[4][0]) for info in found]
        for address in addresses:
            why = self.refusal(address)
            if why is not None:
                shown = address if address == host else f"{host} ({address})"
                raise RefusedDestination(
                    f"--notify {redact_url(url)}: {shown} is a {why} address; notifications go "
                    f"to global addresses only, unless {allowed_by or _ALLOWED_BY} lists it"
                )


def destination_of(url: str) -> str:
    """A receiver's name as notifications are queued by: ``host:port``."""
    host, port = _host_port(url)
    return f"{_normal(host)}:{port}"


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port


def _normal(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")


def is_address(host: str) -> bool:
    """True for an IP address literal (``10.0.0.5``, ``[::1]``)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _resolve(host: str, port: int) -> Sequence[tuple[Any, ...]]:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
