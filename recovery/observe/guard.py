"""The HTTP side's bounds on connections (invariant 15): how many may be open, and how long
one may take to send its request or to take its answer.

- **Open connections** are at most ``limit`` (``--http-max-connections``): one more is answered
  ``503`` with ``Retry-After`` and closed cleanly (the answer written, the sending side shut, what
  the client sends meanwhile read and dropped, then closed: no reset that would lose the answer).
- **Reading a request**: a connection that has not sent a whole request head within ``timeout``
  of its opening (or of its previous answer) is closed (aiohttp's keep-alive timer, which is
  armed from the connection's start and closes a connection waiting for a request); a body is
  read within ``timeout`` too (:mod:`recovery.observe.http_api`, 408).
- **Writing an answer**: a connection whose unsent answer has not shrunk for ``timeout`` (a
  client that stopped reading) is aborted by :meth:`ConnectionGuard.watch`, so that its
  handler's write returns and the connection is let go.

Reads of ZooKeeper and storage never run on the event loop but on the API's bounded pool of
workers (:mod:`recovery.observe.http_api`), whose queue is bounded too: a request past it is
answered 503 at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

__all__ = ["LINGER", "REFUSAL", "WATCH_PERIOD", "ConnectionGuard", "GuardedSite", "Refusal"]

WATCH_PERIOD = 1.0
#: how long a refused connection is kept for its client to read the 503 before it is closed
LINGER = 2.0
_BODY = json.dumps(
    {"error": "too many connections to this daemon; try again", "status": 503}
).encode()
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: application/json\r\n"
    + f"Content-Length: {len(_BODY)}\r\n".encode()
    + b"Retry-After: 1\r\nConnection: close\r\n\r\n"
    + _BODY
)


class Refusal(asyncio.Protocol):
    """One connection past the limit: answered 503 and closed cleanly."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(REFUSAL)
        if transport.can_write_eof():
            transport.write_eof()
        self._timer = asyncio.get_running_loop().call_later(LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        return None  # read and dropped: a close with unread data would reset the connection

    def eof_received(self) -> bool:
        if self._transport is not None:
            self._transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


class ConnectionGuard:
    """The protocol factory of a guarded site: aiohttp's handler for each connection while
    fewer than ``limit`` are open, a :class:`Refusal` past it (``on_refused`` counts it)."""

    def __init__(
        self,
        server: web.Server,
        *,
        limit: int,
        timeout: float,
        on_refused: Callable[[], None] = lambda: None,
    ) -> None:
        self.server = server
        self.limit = limit
        self.timeout = timeout
        self._on_refused = on_refused
        #: per connection: its unsent bytes when they last shrank, and when
        self._writes: dict[int, tuple[int, float]] = {}

    @property
    def open(self) -> int:
        return len(self.server.connections)

    def __call__(self) -> asyncio.Protocol:
        if self.open >= self.limit:
            self._on_refused()
            return Refusal()
        return self.server()

    async def watch(self) -> None:
        """Abort the connections whose answer has not moved for ``timeout`` (runs until
        cancelled)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(WATCH_PERIOD, self.timeout / 4))
            self.check(loop.time())

    def check(self, now: float) -> int:
        """One look at every connection; how many were aborted."""
        aborted, seen = 0, set()
        for handler in self.server.connections:
            transport: Any = handler.transport
            if transport is None:
                continue
            key = id(handler)
            seen.add(key)
            size = transport.get_write_buffer_size()
            before = self._writes.get(key)
            if size == 0:
                self._writes.pop(key, None)
            elif before is None or size < before[0]:
                self._writes[key] = (size, now)  # it moved: the deadline starts again
            elif now - before[1] > self.timeout:
                transport.abort()
                self._writes.pop(key, None)
                aborted += 1
        for key in set(self._writes) - seen:
            del self._writes[key]
        return aborted


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site with :class:`ConnectionGuard` as its protocol factory."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard_of: Any) -> None:
        super().__init__(runner, host, port, reuse_address=True)
        self._guard_of = guard_of
        self.guard: ConnectionGuard | None = None

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self.guard = self._guard_of(server)
        self._server = await asyncio.get_running_loop().create_server(
            self.guard,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1]
