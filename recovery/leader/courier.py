"""The HTTP side of notifications: POST one outbox entry, bounded in every way a receiver could
stretch (invariant 15).

- **Where**: the receiver's name is resolved by :class:`CheckedResolver`, which hands aiohttp
  only the addresses :class:`~zkstore.lifecycle.destinations.Destinations` allows, so the POST
  goes to an address that was checked (no DNS rebinding); an address written in the URL is
  checked before any connection; redirects are never followed.
- **How long**: one deadline for the whole try (connect, send, answer).
- **How much**: the answer's status line and headers count (aiohttp bounds their sizes); of the
  body nothing is read, and the connection is closed at once: a 128 MB answer costs the sender
  a read buffer (:data:`READ_BUFFER`), not 128 MB.
- **What is kept**: the error stored for a failed try names its class (``HTTP 500``, ``timeout``,
  ``connection refused``, ``name not resolved``, ``refused destination``...), never a word the
  receiver sent.
- **Who waits for whom**: :class:`Lanes` keeps one queue per receiver (host and port), each
  served by at most ``per_host`` POSTs at once, and settles each entry as soon as its answer
  is in: a receiver that is slow or never answers delays its own events only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from zkstore.lifecycle.destinations import Destinations, destination_of, is_address
from zkstore.lifecycle.outbox import Pending, body

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "MAX_CONNECTIONS",
    "READ_BUFFER",
    "REFUSED",
    "USER_AGENT",
    "Answer",
    "Courier",
    "Lanes",
    "RefusedAddress",
]

logger = logging.getLogger(__name__)

USER_AGENT = "zkstore-notifier/1"
#: What the sender's connection buffers of an answer at most before it stops reading.
READ_BUFFER = 4096
#: Connections open at once, over every receiver.
MAX_CONNECTIONS = 64
REFUSED = "refused destination"


@dataclass(frozen=True)
class Answer:
    """How one POST went: ``ok`` for a 2xx; else the class of failure, the receiver's
    Retry-After, and whether the destination itself is refused (the entry is then dropped)."""

    ok: bool
    error: str | None = None
    retry_after: float | None = None
    refused: bool = False


class RefusedAddress(OSError):
    """Every address a receiver's name resolved to is refused (aiohttp wraps it)."""


def _resolver_class() -> type[Any]:
    from aiohttp.resolver import ThreadedResolver

    class CheckedResolver(ThreadedResolver):
        """aiohttp's resolver, less the addresses the rule refuses: the ones it returns are
        the ones connected to."""

        def __init__(self, rule: Destinations) -> None:
            super().__init__()
            self.rule = rule

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[Any]:
            found = await super().resolve(host, port, family)
            if self.rule.name_allowed(host):
                return list(found)
            kept = [item for item in found if self.rule.refusal(str(item["host"])) is None]
            if not kept:
                classes = sorted({str(self.rule.refusal(str(i["host"]))) for i in found})
                raise RefusedAddress(f"{REFUSED} ({', '.join(classes)} address)")
            return kept

    return CheckedResolver


class Courier:
    """One aiohttp session that POSTs outbox entries (use ``async with``). The session is
    opened by the first POST: a leader with nothing to notify never imports aiohttp nor builds
    its TLS context (about 0.15 s of CPU per leadership)."""

    def __init__(self, rule: Destinations, deadline: float, per_host: int) -> None:
        self.rule = rule
        self.deadline = deadline
        self.per_host = per_host
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Courier:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def _opened(self) -> aiohttp.ClientSession:
        """The session, opened now if no POST opened it yet (in the running event loop)."""
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(
                limit=MAX_CONNECTIONS,
                limit_per_host=self.per_host,
                resolver=_resolver_class()(self.rule),
                force_close=True,
            )
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.deadline),
                connector=connector,
                read_bufsize=READ_BUFFER,
                auto_decompress=False,
            )
        return self._session

    async def post(self, item: Pending) -> Answer:
        """One try of ``item``: its answer, classified (never raises but for cancellation)."""
        import aiohttp

        entry = item.entry
        host = urlsplit(entry.url).hostname or ""
        why = self.rule.refusal(host) if is_address(host) else None
        if why is not None and not self.rule.name_allowed(host):
            return Answer(ok=False, error=f"{REFUSED} ({why} address)", refused=True)
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": entry.key,
            "User-Agent": USER_AGENT,
        }
        session = self._opened()
        started = time.monotonic()
        try:
            async with session.post(
                entry.url, data=body(entry), headers=headers, allow_redirects=False
            ) as response:
                status = response.status
                retry_after = _retry_after(response.headers.get("Retry-After"))
                response.close()  # the body is never read: the status line is the answer
        except TimeoutError:
            return Answer(ok=False, error=f"timeout: no answer within {_took(started):.1f} s")
        except aiohttp.ClientConnectorError as exc:
            return _connect_failure(exc)
        except aiohttp.ServerDisconnectedError:
            return Answer(ok=False, error="connection closed by the receiver")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Answer(ok=False, error=f"connection failed ({type(exc).__name__})")
        if 200 <= status < 300:
            return Answer(ok=True)
        return Answer(ok=False, error=f"HTTP {status}", retry_after=retry_after)


def _connect_failure(exc: aiohttp.ClientConnectorError) -> Answer:
    cause = exc.__cause__ if exc.__cause__ is not None else exc.os_error
    if isinstance(cause, RefusedAddress):
        return Answer(ok=False, error=str(cause), refused=True)
    if isinstance(cause, socket.gaierror) or type(exc).__name__ == "ClientConnectorDNSError":
        return Answer(ok=False, error="name not resolved")
    if isinstance(exc.os_error, ConnectionRefusedError):
        return Answer(ok=False, error="connection refused")
    if type(exc).__name__.startswith(("ClientConnectorCertificate", "ClientConnectorSSL")):
        return Answer(ok=False, error="TLS handshake failed")
    return Answer(ok=False, error="connection failed")


def _took(started: float) -> float:
    return time.monotonic() - started


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (the delay form only), or None."""
    if value is None or not value.strip().isdigit() or len(value.strip()) > 9:
        return None
    return float(value.strip())


@dataclass
class _Lane:
    queue: asyncio.Queue[Pending] = field(default_factory=asyncio.Queue)
    workers: int = 0


class Lanes:
    """One queue per receiver, served by at most ``per_host`` workers each: ``post`` an entry,
    then ``settle`` it (record what came of it) before that worker takes the next. A worker
    ends when its queue is empty; :meth:`join` waits until every entry is settled."""

    def __init__(
        self,
        post: Callable[[Pending], Awaitable[Answer]],
        settle: Callable[[Pending, Answer], Awaitable[None]],
        per_host: int,
    ) -> None:
        self._post = post
        self._settle = settle
        self.per_host = per_host
        self._lanes: dict[str, _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: the names of the entries queued or in flight
        self.busy: set[str] = set()

    def submit(self, item: Pending) -> bool:
        """Queue ``item`` on its receiver's lane; False if it is queued or in flight already."""
        if item.name in self.busy:
            return False
        self.busy.add(item.name)
        key = destination_of(item.entry.url)
        lane = self._lanes.setdefault(key, _Lane())
        lane.queue.put_nowait(item)
        if lane.workers < self.per_host:
            lane.workers += 1
            task = asyncio.get_running_loop().create_task(self._work(key, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    async def _work(self, key: str, lane: _Lane) -> None:
        try:
            while not lane.queue.empty():
                item = lane.queue.get_nowait()
                try:
                    await self._settle(item, await self._post(item))
                finally:
                    self.busy.discard(item.name)
        finally:
            lane.workers -= 1
            if lane.workers == 0 and lane.queue.empty():
                self._lanes.pop(key, None)

    async def join(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
