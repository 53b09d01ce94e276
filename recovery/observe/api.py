"""The HTTP routes of a daemon (aiohttp): health, leadership, a JSON API, metrics, the page.

::

    GET  /health                   200 while this daemon's ZooKeeper session is live, else 503
    GET  /leader                   200 on the leader, 503 elsewhere (for load balancers)
    GET  /metrics                  Prometheus text format
    GET  /                         the status page
    GET  /api/v1/cluster           leader, daemons, jobs by state, this daemon
    GET  /api/v1/jobs[?all=true]   like ``zkstore jobs list [--all] --format json``
    GET  /api/v1/jobs/<id>         like ``zkstore jobs show <id> --format json``
    GET  /api/v1/jobs/<id>/logs    text: ``?attempt=N`` (default the latest), ``?tail=N`` lines
    POST /api/v1/jobs/<id>/cancel  with ``Authorization: Bearer <ZKSTORE_API_TOKEN>``;
                                   body: nothing, or ``{"reason": "..."}``

HEAD works wherever GET does. Every daemon answers, leader or not, from ZooKeeper and storage,
read on a small pool of threads of the HTTP server's own: no handler ever waits for the daemon's
loop thread, and only the token-guarded routes write (what any client could write with the CLI).
Errors are JSON ``{"error": "..."}`` with the status of their kind (400 bad request, 401/403
auth, 404 unknown job, 409 conflict, 503 ZooKeeper or storage unavailable); no traceback ever
reaches a client. The token is compared in constant time and never logged or echoed.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from recovery.client import Client
from recovery.observe.metrics import DaemonMetrics
from recovery.observe.page import CSP, render, render_unavailable
from recovery.observe.view import Observed, finished, read_jobs, read_view
from zkstore.cli.jobs import describe, job_details
from zkstore.cluster import Cluster
from zkstore.errors import (
    ConfigError,
    ConflictError,
    HandleNotFound,
    StoreUnavailable,
    ZkStoreError,
)
from zkstore.jobs.logs import AttemptLog, JobLogs
from zkstore.jobs.snapshot import read_snapshots
from zkstore.layout import validate_job_id

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Request bodies are a reason or a small JSON object; anything bigger is refused (413).
MAX_BODY_BYTES = 64 * 1024
MAX_REASON_CHARS = 1000
MAX_TAIL_LINES = 100_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """A client error with its HTTP status; the message is safe to show."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def _status_of(exc: ZkStoreError) -> int:
    if isinstance(exc, HandleNotFound):
        return 404
    if isinstance(exc, ConfigError):
        return 400
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, StoreUnavailable):
        return 503
    return 500


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response({"error": message, "status": status}, status=status, headers=headers)


def _json(data: Any, status: int = 200) -> web.Response:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return web.Response(text=text + "\n", status=status, content_type="application/json")


class Api:
    """The routes of one daemon. ``token`` enables the mutations (None: they answer 403)."""

    def __init__(
        self,
        daemon: Observed,
        metrics: DaemonMetrics,
        *,
        token: str | None,
        workers: int = 2,
    ) -> None:
        self.daemon = daemon
        self.metrics = metrics
        self._token = token.encode() if token else None
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http-read")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        get = app.router.add_get
        get("/", self.page)
        get("/health", self.health)
        get("/leader", self.leader)
        get("/metrics", self.prometheus)
        get("/api/v1/cluster", self.cluster_info)
        get("/api/v1/jobs", self.jobs)
        get("/api/v1/jobs/{job_id}", self.job)
        get("/api/v1/jobs/{job_id}/logs", self.logs)
        app.router.add_post("/api/v1/jobs/{job_id}/cancel", self.cancel)
        # The control endpoints of the dynamic-control issue go here, each guarded by
        # self._authorize(request) like cancel.
        return app

    # -- plumbing ------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        try:
            response = await handler(request)
        except ApiError as exc:
            response = error_response(exc.status, str(exc), exc.headers)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, wrong method, too big
            response = error_response(exc.status, exc.reason, _allow(exc))
        except ZkStoreError as exc:
            response = error_response(_status_of(exc), f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("HTTP %s %s failed", request.method, request.path)
            response = error_response(500, "internal error (the daemon's log has the details)")
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        self.metrics.observe(request.method, route, response.status, time.monotonic() - started)
        return response

    async def _run(self, func: Callable[[], T]) -> T:
        """Run a blocking read on the HTTP server's pool (never on the event loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, func)

    def _cluster(self) -> Cluster:
        cluster = self.daemon.cluster
        if cluster is None or not cluster.zk.connected:
            raise ApiError(503, "this daemon has no ZooKeeper session right now")
        return cluster

    def _authorize(self, request: web.Request) -> None:
        """Only with the token configured, and only with that token (constant-time compare)."""
        if self._token is None:
            raise ApiError(403, "changes through the API are disabled: no ZKSTORE_API_TOKEN is set")
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token
        ):
            raise ApiError(
                401,
                "a valid bearer token is required",
                {"WWW-Authenticate": 'Bearer realm="zkstore"'},
            )

    # -- health and leadership -----------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        cluster = self.daemon.cluster
        live = cluster is not None and cluster.zk.connected
        body = {
            "daemon": self.daemon.settings.daemon_id,
            "zookeeper": "connected" if live else "disconnected",
            "leader": self.daemon.is_leader,
        }
        return _json(body, 200 if live else 503)

    async def leader(self, request: web.Request) -> web.Response:
        leading = self.daemon.is_leader
        body = {"daemon": self.daemon.settings.daemon_id, "leader": leading}
        return _json(body, 200 if leading else 503)

    # -- reads ---------------------------------------------------------------------------------

    async def prometheus(self, request: web.Request) -> web.Response:
        body = await self._run(partial(generate_latest, self.metrics.registry))
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def page(self, request: web.Request) -> web.Response:
        settings = self.daemon.settings
        cluster_id = settings.store.cluster_id
        try:
            view = await self._run(partial(read_view, self._cluster()))
            text = render(
                view,
                daemon_id=settings.daemon_id,
                leading=self.daemon.is_leader,
                cluster_id=cluster_id,
            )
            status = 200
        except (ApiError, StoreUnavailable) as exc:
            text, status = render_unavailable(cluster_id, settings.daemon_id, str(exc)), 503
        response = web.Response(text=text, status=status, content_type="text/html")
        response.headers["Content-Security-Policy"] = CSP
        return response

    async def cluster_info(self, request: web.Request) -> web.Response:
        view = await self._run(partial(read_view, self._cluster()))
        settings = self.daemon.settings
        return _json(
            {
                "cluster_id": settings.store.cluster_id,
                "root": settings.store.base_path,
                "this_daemon": {"id": settings.daemon_id, "leader": self.daemon.is_leader},
                "leader": view.leader,
                "daemons": [d.as_dict() for d in view.daemons],
                "jobs": dict(sorted(view.states().items())),
                "quarantined": sorted(j.job_id for j in view.jobs.values() if j.quarantined),
            }
        )

    async def jobs(self, request: web.Request) -> web.Response:
        show_all = _flag(request, "all")
        snapshots = await self._run(partial(read_jobs, self._cluster()))
        items = [describe(s) for s in snapshots.values() if show_all or not finished(s)]
        return _json(items)

    async def job(self, request: web.Request) -> web.Response:
        job_id = request.match_info["job_id"]
        return _json(await self._run(partial(job_details, self._cluster(), job_id)))

    async def logs(self, request: web.Request) -> web.StreamResponse:
        job_id = validate_job_id(request.match_info["job_id"])
        attempt = _number(request, "attempt", 1, 10**9)
        tail = _number(request, "tail", 0, MAX_TAIL_LINES)
        cluster = self._cluster()
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        found = await self._run(logs.attempts)
        if not found:
            known = await self._run(partial(read_snapshots, cluster.zk, cluster.layout, [job_id]))
            if job_id not in known:
                raise ApiError(404, f"no job {job_id!r} in this cluster")
        if attempt is None:
            log = found[max(found)] if found else AttemptLog(0)
        elif attempt in found:
            log = found[attempt]
        else:
            raise ApiError(404, f"no logs of attempt {attempt} of {job_id}")
        return await self._send_log(request, logs, log, tail)

    async def _send_log(
        self, request: web.Request, logs: JobLogs, log: AttemptLog, tail: int | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/plain; charset=utf-8",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'",
                "X-Zkstore-Attempt": str(log.attempt),
                "X-Zkstore-Log-Complete": "true" if log.ended else "false",
            }
        )
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        try:
            if tail is not None:
                await response.write(await self._run(partial(logs.tail, log, tail)))
            else:
                for chunk in log.chunks:  # streamed: a log of any size, one chunk in memory
                    await response.write(await self._run(partial(logs.read_chunk, chunk)))
        except ZkStoreError as exc:
            # The status line is sent already: say it in the text, where the reader looks.
            logger.warning("serving the log of %s: %s", logs.job_id, exc)
            await response.write(f"\n[zkstore: the rest is unavailable: {exc}]\n".encode())
        await response.write_eof()
        return response

    # -- changes (token only) ------------------------------------------------------------------

    async def cancel(self, request: web.Request) -> web.Response:
        self._authorize(request)
        body = await _json_body(request)
        reason = body.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
            raise ApiError(400, f'"reason" must be a string of at most {MAX_REASON_CHARS} chars')
        job_id = validate_job_id(request.match_info["job_id"])
        client = Client(cluster=self._cluster())
        cancel = await self._run(partial(client.cancel, job_id, reason=reason))
        return _json({"job_id": job_id, "cancel_requested": cancel.requested}, 202)


async def _json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (``{}`` for an empty body); 400 for anything else."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the body must be a JSON object")
    return value


def _flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name)
    if value is None:
        return False
    if value.lower() not in _FLAGS:
        raise ApiError(400, f"{name} must be true or false")
    return _FLAGS[value.lower()]


_FLAGS = {"": True, "true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _number(request: web.Request, name: str, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    if not re.fullmatch(r"[0-9]{1,12}", raw) or not low <= int(raw) <= high:
        raise ApiError(400, f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def _allow(exc: web.HTTPException) -> dict[str, str] | None:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else None
