"""Who may ask a daemon's HTTP side what: the names it answers to, and its two tokens.

**Host names (DNS rebinding).** A web page on ``evil.example`` can make the browser resolve
that name to ``127.0.0.1`` (or to the daemon's address inside a network) and then read the
answers as if they came from its own origin. The browser still sends ``Host: evil.example``,
so a daemon answers only requests whose ``Host`` names it:

- ``localhost``, and any IP address literal (``127.0.0.1``, ``[::1]``, ``10.0.0.5``): a
  rebinding attack needs a DNS name the attacker controls, and an address is not one, so load
  balancers, Prometheus and probes that address a daemon by IP need no configuration;
- the names given with ``--http-allowed-hosts`` (``ZKSTORE_HTTP_ALLOWED_HOSTS``), exactly (any
  case, any port, a trailing dot ignored), ``.example.com`` for that domain and every name under
  it, or ``*`` for any name (behind a proxy that checks it); without the option, the name the
  daemon listens on (``--http zk1.internal:8780``).

A request without a ``Host`` header (HTTP/1.0) is answered: browsers always send one. Any other
request is refused with **421 Misdirected Request**, the status HTTP has for "this server does
not answer for that authority" (RFC 9110, 15.5.20): it says the name is wrong, not the
credentials (401, 403), so no client mistakes it for an auth failure and retries with a token.

**Tokens.** ``ZKSTORE_API_TOKEN`` grants changes (and reads); ``ZKSTORE_API_READ_TOKEN``, when
set, is required to read what may carry secrets: job details and lists (errors), driver logs,
control values and history. Both come from the daemon's environment only, are compared in
constant time, and never logged or echoed.

**Tokens of pools.** A line ``TOKEN pool=etl,reporting`` of ``--api-token-file`` is a token
that acts on (cancels, controls) and reads (details, logs, control, outputs) only the jobs of
those pools, lists only them, and changes nothing else (schedules: the cluster-wide token's);
another pool's job is a 403. Where it lands: the API checks the job's pool, read from its own
records, before any route about one job runs (:meth:`Tokens.scope`, then
:mod:`recovery.observe.http_api`'s middleware), so a route added later is covered without a word
of its own. With such tokens configured, the reads a read token guards are guarded as if one
were set: a scoped token would be no limit if anyone could read every job's logs.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from recovery.settings import ANY_HOST, PoolToken, is_address, normal_host

__all__ = ["EVERY_POOL", "LOCAL_NAMES", "AllowedHosts", "ApiError", "Scope", "Tokens"]

#: Names every daemon answers to (with any port): the loopback name. Addresses are always
#: answered (see the module's docstring).
LOCAL_NAMES = frozenset({"localhost"})
_HOST_HEADER = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[^:\[\]]*)(:(?P<port>[0-9]{1,5}))?")


class ApiError(Exception):
    """A client error with its HTTP status; the message is safe to show."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


@dataclass(frozen=True)
class AllowedHosts:
    """The names a daemon answers to (see the module's docstring)."""

    names: frozenset[str]

    @classmethod
    def of(cls, given: Iterable[str] | None, listen_host: str) -> AllowedHosts:
        """``given`` names (None: the name the daemon listens on), and the local ones."""
        names = set(given) if given is not None else {normal_host(listen_host)}
        return cls(frozenset(names | LOCAL_NAMES))

    def allows(self, header: str | None) -> bool:
        """True if a request with ``Host: header`` is answered."""
        if header is None or ANY_HOST in self.names:
            return True
        match = _HOST_HEADER.fullmatch(header.strip().lower())
        if match is None or (match.group("port") and int(match.group("port")) > 65535):
            return False
        name = normal_host(match.group("name"))
        if is_address(name):
            return True
        return name in self.names or any(
            n.startswith(".") and (name == n[1:] or name.endswith(n)) for n in self.names
        )

    def check(self, header: str | None) -> None:
        if not self.allows(header):
            raise ApiError(
                421,
                "this daemon does not answer for that host name (zkstore daemon "
                "--http-allowed-hosts NAME)",
            )


@dataclass(frozen=True)
class Scope:
    """What a request's token may reach: every job (``pools`` None) or the jobs of
    ``pools``."""

    pools: frozenset[str] | None = None

    def allows(self, pool: str) -> bool:
        return self.pools is None or pool in self.pools

    def refusal(self, job_id: str, pool: str) -> ApiError:
        return ApiError(
            403,
            f"this token acts on the jobs of pool(s) {', '.join(sorted(self.pools or ()))} "
            f"only; {job_id} is in pool {pool}",
        )


#: the scope of a request without a scoped token (what the change and read tokens decide)
EVERY_POOL = Scope()


class Tokens:
    """The change token, the optional read token and the pool-scoped change tokens of a
    daemon's API."""

    def __init__(
        self, change: str | None, read: str | None = None, pools: tuple[PoolToken, ...] = ()
    ) -> None:
        self._change = change.encode() if change else None
        self._read = read.encode() if read else None
        self._pools = [(t.token.encode(), t.pools) for t in pools]

    @property
    def reads_guarded(self) -> bool:
        return self._read is not None or bool(self._pools)

    def _given(self, authorization: str) -> bytes | None:
        scheme, _, given = authorization.partition(" ")
        return given.strip().encode() if scheme.lower() == "bearer" else None

    def _matches(self, given: bytes | None, token: bytes | None) -> bool:
        # Both compared whatever the first gave: the time taken says nothing of which matched.
        return given is not None and token is not None and hmac.compare_digest(given, token)

    def scope(self, authorization: str) -> Scope:
        """The pools a request's token is limited to (:data:`EVERY_POOL` unless it is a
        scoped token). Every scoped token is compared, whichever matches."""
        given = self._given(authorization)
        found = [pools for token, pools in self._pools if self._matches(given, token)]
        return Scope(found[0]) if found else EVERY_POOL

    def authorize_change(self, authorization: str, scope: Scope = EVERY_POOL) -> None:
        """Only with the change token configured, and only with that token; or with a scoped
        token whose ``scope`` the caller checked against the job changed."""
        if scope.pools is not None:
            return
        if self._change is None:
            raise ApiError(403, "changes through the API are disabled: no ZKSTORE_API_TOKEN is set")
        if not self._matches(self._given(authorization), self._change):
            raise _unauthorized()

    def authorize_read(self, authorization: str) -> None:
        """Free unless a read token (or a scoped token) is configured; then the read, the
        change or a scoped token."""
        if not self.reads(authorization):
            raise _unauthorized()

    def reads(self, authorization: str) -> bool:
        """True if ``authorization`` may read what the read token guards (a scoped token:
        the jobs of its pools, which the caller keeps to)."""
        if not self.reads_guarded:
            return True
        given = self._given(authorization)
        read, change = self._matches(given, self._read), self._matches(given, self._change)
        return read or change or self.scope(authorization).pools is not None


def _unauthorized() -> ApiError:
    return ApiError(
        401, "a valid bearer token is required", {"WWW-Authenticate": 'Bearer realm="zkstore"'}
    )
