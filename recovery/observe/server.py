"""The daemon's HTTP server: aiohttp on a thread and an event loop of its own.

Why aiohttp: a well-kept server with its own HTTP parser (llhttp), HEAD for every GET route,
request-size limits and a clean start and stop; it is already in zkstore's tested set of
dependencies (s3fs needs it). Werkzeug's and the standard library's servers are the
``http.server`` module underneath, which their own documentation says is not for production.

The daemon starts the server before it connects to ZooKeeper (``/health`` says 503 until the
session is up) and stops it as it shuts down. The event loop only parses and routes: reads run on
the API's pool of threads (:mod:`recovery.observe.http_api`), so a slow ZooKeeper holds no request
but its own, and nothing here ever touches the daemon's loop thread. Connections are bounded
(:mod:`recovery.observe.guard`: how many, how long to send a request or take an answer).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import threading
from collections.abc import Callable

from aiohttp import web

from recovery.observe.access import AllowedHosts, Tokens
from recovery.observe.cluster_view import Observed
from recovery.observe.guard import ConnectionGuard, GuardedSite
from recovery.observe.http_api import Api
from recovery.observe.metrics import DaemonMetrics, LeadershipStats
from recovery.settings import READ_TOKEN_ENV, Bounds, HttpAddress
from zkstore.errors import ConfigError

__all__ = [
    "SHUTDOWN_TIMEOUT",
    "START_TIMEOUT",
    "HttpServer",
    "HttpSide",
    "is_loopback",
    "start_http",
]

logger = logging.getLogger(__name__)

START_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 2.0


class HttpServer:
    """Serves one aiohttp application on ``address`` until :meth:`stop`, at most
    ``bounds.http_max_connections`` connections at once, each given ``bounds.http_timeout`` to
    send a request or take a piece of its answer (``on_refused``: a connection refused)."""

    def __init__(
        self,
        app: web.Application,
        address: HttpAddress,
        bounds: Bounds | None = None,
        on_refused: Callable[[], None] = lambda: None,
    ) -> None:
        self.app = app
        self.address = address
        self.bounds = bounds or Bounds()
        self.bound: HttpAddress | None = None
        self._loop = asyncio.new_event_loop()
        self._on_refused = on_refused
        self._site: GuardedSite | None = None
        self._watch: asyncio.Task[None] | None = None
        # A daemon stopping waits this long at most for requests in flight (a log streaming).
        # The keep-alive timer closes a connection that sent no whole request head in time.
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            keepalive_timeout=self.bounds.http_timeout,
        )
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="http", daemon=True)

    def start(self) -> HttpAddress:
        """Bind and serve; returns the address bound. Raises :class:`ConfigError` if the
        address cannot be bound (in use, not ours)."""
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise ConfigError(f"HTTP server on {self.address} did not start")
        if self._error is not None:
            raise ConfigError(f"cannot serve HTTP on {self.address}: {self._error}")
        assert self.bound is not None
        return self.bound

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._bind())
        except OSError as exc:
            self._error = exc
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            if self._watch is not None:
                self._watch.cancel()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

    async def _bind(self) -> None:
        await self._runner.setup()
        site = GuardedSite(self._runner, self.address.host, self.address.port, self._guard)
        await site.start()
        self._site = site
        assert site.guard is not None
        self._watch = asyncio.get_running_loop().create_task(site.guard.watch())
        host, port = self._runner.addresses[0][:2]
        self.bound = HttpAddress(str(host), int(port))

    def _guard(self, server: web.Server) -> ConnectionGuard:
        return ConnectionGuard(
            server,
            limit=self.bounds.http_max_connections,
            timeout=self.bounds.http_timeout,
            on_refused=self._on_refused,
        )

    @property
    def guard(self) -> ConnectionGuard | None:
        return self._site.guard if self._site is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (idempotent): close the listening socket and open connections."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)


class HttpSide:
    """A daemon's HTTP API, metrics and page, served until :meth:`stop`."""

    def __init__(self, api: Api, server: HttpServer) -> None:
        self.api = api
        self.server = server

    @property
    def address(self) -> HttpAddress | None:
        return self.server.bound

    def stop(self) -> None:
        self.server.stop()
        self.api.close()


def start_http(daemon: Observed, stats: LeadershipStats) -> HttpSide | None:
    """Serve ``daemon``'s HTTP side where its settings say; None if they say off, or if the
    default address cannot be bound (a warning: the daemon runs without it). An address given
    explicitly that cannot be bound raises :class:`ConfigError`."""
    settings = daemon.settings
    if settings.http is None:
        return None
    metrics = DaemonMetrics(daemon, stats)
    api = Api(
        daemon,
        metrics,
        tokens=Tokens(settings.api_token, settings.api_read_token, settings.api_pool_tokens),
        hosts=AllowedHosts.of(settings.http_allowed_hosts, settings.http.host),
        workers=settings.bounds.http_workers,
        timeout=settings.bounds.http_timeout,
    )
    server = HttpServer(
        api.application(),
        settings.http,
        settings.bounds,
        on_refused=metrics.refused_connections.inc,
    )
    try:
        bound = server.start()
    except ConfigError as exc:
        api.close()
        if settings.http_required:
            raise
        logger.warning("%s; running without the HTTP API (--http HOST:PORT or off)", exc)
        return None
    logger.info("HTTP API, metrics and status page on http://%s/", bound)
    if settings.api_read_token is None and not is_loopback(settings.http.host):
        logger.warning(
            "serving HTTP on %s, beyond this host, without %s: anyone who can reach it reads "
            "job details, driver logs and control values, which may carry secrets",
            bound,
            READ_TOKEN_ENV,
        )
    return HttpSide(api, server)


def is_loopback(host: str) -> bool:
    """True if ``host`` (an address or a name) is reachable from this host only."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name may resolve to any address: assume the worst
