"""The HTTP routes of a daemon (aiohttp): health, leadership, a JSON API, metrics, the page.

::

    GET  /health                   200 while this daemon's ZooKeeper session is live, else 503
    GET  /leader                   200 on the leader, 503 elsewhere (for load balancers)
    GET  /metrics                  Prometheus text format
    GET  /                         the status page
    GET  /jobs/<id>                a job's page: its definition, state, timeline, latest log
    GET  /api/v1/cluster           leader, daemons, jobs by state, this daemon
    GET  /api/v1/cluster/settings  the settings the leader enforces (zkstore cluster settings)
    GET  /api/v1/jobs[?all=true]   like ``zkstore jobs list [--all] --format json``
    GET  /api/v1/jobs/<id>         like ``zkstore jobs show <id> --format json``
    GET  /api/v1/jobs/<id>/logs    text: ``?attempt=N`` (default the latest), ``?tail=N`` lines
    GET  /api/v1/jobs/<id>/control like ``zkstore control get <id> --format json``
    GET  /api/v1/jobs/<id>/control/history   like ``zkstore control history`` (``?last=N``)
    GET  /api/v1/schedules[/<name>] like ``zkstore schedules list|show`` (:mod:`.schedule_routes`,
                                   with its token-guarded pause, resume and delete)

With ``ZKSTORE_API_READ_TOKEN`` set, the job list and details, a job's page, logs and control
GETs need ``Authorization: Bearer`` with it (or the change token), and the status page shows
jobs only with it (without: the leader, the daemons and the count by state). Every route
answers only requests whose ``Host`` is a name of the daemon (421 otherwise: DNS rebinding, see
:mod:`recovery.observe.access`).

With ``Authorization: Bearer <ZKSTORE_API_TOKEN>`` (changes; each answers what it stored):

    POST /api/v1/jobs/<id>/cancel  body: nothing, or ``{"reason": "..."}``
    PUT  /api/v1/jobs/<id>/control ``{"values": {KEY: scalar}, "unset": [KEY], "replace": false,
                                   "expect_version": N}`` (all optional but one change); 409
                                   if ``expect_version`` is not the stored version, 400 for a
                                   key the job did not declare or a value of the wrong type
    POST /api/v1/jobs/<id>/control/pause | resume | checkpoint   body: nothing, or
                                   ``{"expect_version": N}``
    POST /api/v1/jobs/<id>/control/log-level  ``{"level": "DEBUG", "expect_version": N}``

A change is acknowledged by the job's driver afterwards: poll ``GET .../control`` (its
``applied.version`` reaches the change's ``version``), as ``zkstore control set --wait`` does.

HEAD works wherever GET does. Every daemon answers, leader or not, from ZooKeeper and storage,
read on a small pool of threads of the HTTP server's own: no handler ever waits for the daemon's
loop thread, and only the token-guarded routes write (what any client could write with the CLI).
Errors are JSON ``{"error": "..."}`` with the status of their kind: the ``http_status`` of a
zkstore error's class (:mod:`zkstore.errors`: 400 bad input, 404 unknown job, 409 conflict, 413
over a limit, 502 garbage or refused credentials upstream, 503 ZooKeeper or storage
unavailable, 504 a wait ran out), else 400 for a body the strict JSON parser refuses, 401/403
auth, 421 not our host name; no traceback ever reaches a client. The tokens are
compared in constant time and never logged or echoed.

Why one module: the routes are one table (the paths above), each handler beside its route, and
what every route shares (the access check, the bounded queue of the two workers, the JSON
errors) is applied in one place; the views and services they render live apart.
"""

from __future__ import annotations

import asyncio
import dataclasses
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

from recovery.observe.access import EVERY_POOL, AllowedHosts, ApiError, Scope, Tokens
from recovery.observe.cluster_view import Observed, finished, read_jobs, read_view
from recovery.observe.jobpage import read_job_page, render_job_page, render_missing
from recovery.observe.metrics import DaemonMetrics
from recovery.observe.page import CSP, render, render_unavailable
from recovery.observe.schedule_routes import ScheduleRoutes
from zkstore.cluster import Cluster, triage
from zkstore.cluster import fleet_protocol as fleet
from zkstore.cluster.cluster_settings import differing, key_for, read_settings, view
from zkstore.errors import (
    HandleNotFound,
    JobNotFound,
    StoreUnavailable,
    ZkStoreError,
)
from zkstore.jobs.job_state_store import who
from zkstore.jobs.logs import AttemptLog, JobLogs
from zkstore.jobs.snapshot import JobSnapshot, read_snapshot
from zkstore.layout import validate_job_id
from zkstore.records.strict import load_object, time_text
from zkstore.service.control_service import COMMANDS, ControlService
from zkstore.service.job_view import describe, job_details
from zkstore.service.output_view import list_outputs, show_output

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BODY_DEPTH",
    "MAX_REASON_CHARS",
    "MAX_TAIL_LINES",
    "QUEUED_PER_WORKER",
    "UNQUEUED",
    "Api",
    "Handler",
    "error_response",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Request bodies are a reason or a small JSON object; anything bigger is refused (413).
MAX_BODY_BYTES = 64 * 1024
#: Requests served at once per worker of the pool (the rest of them wait for one); past that a
#: request is answered 503 at once (the routes that read nothing are always answered).
QUEUED_PER_WORKER = 8
UNQUEUED = frozenset({"/health", "/leader"})
#: The deepest body any route takes: ``{"values": {KEY: scalar}}``.
MAX_BODY_DEPTH = 2
MAX_REASON_CHARS = 1000
MAX_TAIL_LINES = 100_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: what a request's token reaches (:class:`Scope`), and whether its job's pool was checked
_SCOPE = "zkstore.scope"
_CHECKED = "zkstore.scope-checked"


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response({"error": message, "status": status}, status=status, headers=headers)


def _json(data: Any, status: int = 200) -> web.Response:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return web.Response(text=text + "\n", status=status, content_type="application/json")


class Api:
    """The routes of one daemon. ``tokens`` guard the changes (no change token: they answer
    403) and, with a read token, the reads that may carry secrets; only requests whose ``Host``
    is one of ``hosts`` are answered (421 otherwise)."""

    def __init__(
        self,
        daemon: Observed,
        metrics: DaemonMetrics,
        *,
        tokens: Tokens,
        hosts: AllowedHosts,
        workers: int = 4,
        timeout: float = 15.0,
    ) -> None:
        self.daemon = daemon
        self.metrics = metrics
        self.tokens = tokens
        self.hosts = hosts
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http-read")
        #: requests being served at most (on the pool or waiting for it); past it: 503
        self.capacity = workers * QUEUED_PER_WORKER
        #: the longest a request's body may take to arrive
        self.timeout = timeout
        self._active = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        get = app.router.add_get
        get("/", self.page)
        get("/jobs/{job_id}", self.job_page)
        get("/health", self.health)
        get("/leader", self.leader)
        get("/metrics", self.prometheus)
        get("/api/v1/cluster", self.cluster_info)
        get("/api/v1/cluster/settings", self.cluster_settings)
        get("/api/v1/jobs", self.jobs)
        get("/api/v1/jobs/{job_id}", self.job)
        get("/api/v1/jobs/{job_id}/logs", self.logs)
        get("/api/v1/jobs/{job_id}/control", self.control)
        get("/api/v1/jobs/{job_id}/control/history", self.control_history)
        get("/api/v1/jobs/{job_id}/outputs", self.outputs)
        get("/api/v1/jobs/{job_id}/outputs/{name}", self.output)
        app.router.add_post("/api/v1/jobs/{job_id}/cancel", self.cancel)
        app.router.add_put("/api/v1/jobs/{job_id}/control", self.control_set)
        app.router.add_post("/api/v1/jobs/{job_id}/control/{command}", self.control_command)
        ScheduleRoutes(self).add_to(app)
        return app

    # -- plumbing ------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        counted = request.path not in UNQUEUED
        try:
            self.hosts.check(request.headers.get("Host"))
            if counted and self._active >= self.capacity:
                raise ApiError(
                    503,
                    f"busy: {self._active} requests are being served; try again",
                    {"Retry-After": "1"},
                )
            self._active += counted
            try:
                await self._check_scope(request)
                response = await handler(request)
            finally:
                self._active -= counted
        except ApiError as exc:
            response = error_response(exc.status, str(exc), exc.headers)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, wrong method, too big
            response = error_response(exc.status, exc.reason, _allow(exc))
        except ZkStoreError as exc:
            response = error_response(exc.http_status, f"{type(exc).__name__}: {exc}")
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

    async def _check_scope(self, request: web.Request) -> None:
        """A pool-scoped token (:mod:`recovery.observe.access`): a route about one job runs
        only for a job of its pools, whatever the route (403 otherwise, 404 for no such job);
        the request remembers the scope checked, which lets its change through."""
        scope = self.tokens.scope(request.headers.get("Authorization", ""))
        request[_SCOPE] = scope
        if scope.pools is None or "job_id" not in request.match_info:
            return
        job_id = validate_job_id(request.match_info["job_id"])
        pool = await self._run(partial(_pool_of_job, self._cluster(), job_id))
        if not scope.allows(pool):
            raise scope.refusal(job_id, pool)
        request[_CHECKED] = True

    def _scope(self, request: web.Request) -> Scope:
        scope = request.get(_SCOPE)
        return scope if isinstance(scope, Scope) else EVERY_POOL

    def _authorize(self, request: web.Request) -> None:
        """A change: only with the change token configured, and only with that token; or with
        a scoped token, on a job of its pools (checked by :meth:`_check_scope`)."""
        scope = self._scope(request)
        if scope.pools is not None and not request.get(_CHECKED):
            raise ApiError(
                403,
                f"this token acts on the jobs of pool(s) {', '.join(sorted(scope.pools))} only",
            )
        self.tokens.authorize_change(request.headers.get("Authorization", ""), scope)

    def _authorize_read(self, request: web.Request) -> None:
        """A read that may carry secrets: with a read token configured, it or the change token."""
        self.tokens.authorize_read(request.headers.get("Authorization", ""))

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
        """The status page; its jobs (their errors) only where the API would show them."""
        settings = self.daemon.settings
        cluster_id = settings.store.cluster_id
        jobs = self.tokens.reads(request.headers.get("Authorization", ""))
        scope = self._scope(request)
        try:
            view = await self._run(partial(read_view, self._cluster()))
            if scope.pools is not None:  # its pools' jobs only
                kept = {k: j for k, j in view.jobs.items() if scope.allows(pool_of(j))}
                pools = {k: p for k, p in view.pools.items() if scope.allows(k)}
                view = dataclasses.replace(view, jobs=kept, pools=pools)
            text = render(
                view,
                daemon_id=settings.daemon_id,
                leading=self.daemon.is_leader,
                cluster_id=cluster_id,
                jobs=jobs,
            )
            status = 200
        except (ApiError, StoreUnavailable) as exc:
            text, status = render_unavailable(cluster_id, settings.daemon_id, str(exc)), 503
        response = web.Response(text=text, status=status, content_type="text/html")
        response.headers["Content-Security-Policy"] = CSP
        return response

    async def job_page(self, request: web.Request) -> web.Response:
        """The job's page (HTML; what it shows may carry secrets: a read token guards it)."""
        self._authorize_read(request)
        settings = self.daemon.settings
        daemon_id, cluster_id = settings.daemon_id, settings.store.cluster_id
        leading = self.daemon.is_leader
        job_id = validate_job_id(request.match_info["job_id"])
        try:
            data = await self._run(partial(read_job_page, self._cluster(), job_id))
            text = render_job_page(
                data, daemon_id=daemon_id, leading=leading, cluster_id=cluster_id
            )
            status = 200
        except JobNotFound:
            text = render_missing(
                job_id, daemon_id=daemon_id, leading=leading, cluster_id=cluster_id
            )
            status = 404
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

    async def cluster_settings(self, request: web.Request) -> web.Response:
        """The settings the leader published (``zkstore cluster settings --format json``);
        404 while none has."""
        return _json(await self._run(partial(_published_settings, self._cluster())))

    async def jobs(self, request: web.Request) -> web.Response:
        self._authorize_read(request)
        show_all = _flag(request, "all")
        scope = self._scope(request)
        snapshots = await self._run(partial(read_jobs, self._cluster()))
        items = [
            describe(s)
            for s in snapshots.values()
            if (show_all or not finished(s)) and scope.allows(pool_of(s))
        ]
        return _json(items)

    async def job(self, request: web.Request) -> web.Response:
        self._authorize_read(request)
        job_id = request.match_info["job_id"]
        return _json(await self._run(partial(job_details, self._cluster(), job_id)))

    async def logs(self, request: web.Request) -> web.StreamResponse:
        self._authorize_read(request)
        job_id = validate_job_id(request.match_info["job_id"])
        attempt = _number(request, "attempt", 1, 10**9)
        tail = _number(request, "tail", 0, MAX_TAIL_LINES)
        cluster = self._cluster()
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        found = await self._run(logs.attempts)
        if not found:
            await self._run(partial(read_snapshot, cluster.zk, cluster.layout, job_id))
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

    async def control(self, request: web.Request) -> web.Response:
        self._authorize_read(request)
        job_id = validate_job_id(request.match_info["job_id"])
        service = ControlService(self._cluster())
        return _json((await self._run(partial(service.view, job_id))).as_dict())

    async def control_history(self, request: web.Request) -> web.Response:
        self._authorize_read(request)
        job_id = validate_job_id(request.match_info["job_id"])
        last = _number(request, "last", 1, 10**6)
        service = ControlService(self._cluster())
        return _json(await self._run(partial(service.history, job_id, last=last)))

    async def outputs(self, request: web.Request) -> web.Response:
        """``zkstore outputs list``'s JSON."""
        self._authorize_read(request)
        job_id = validate_job_id(request.match_info["job_id"])
        return _json(await self._run(partial(list_outputs, self._cluster(), job_id)))

    async def output(self, request: web.Request) -> web.Response:
        """``zkstore outputs show``'s JSON: the committed parts only."""
        self._authorize_read(request)
        job_id = validate_job_id(request.match_info["job_id"])
        name = request.match_info["name"]
        return _json(await self._run(partial(show_output, self._cluster(), job_id, name)))

    # -- changes (token only) ------------------------------------------------------------------

    async def cancel(self, request: web.Request) -> web.Response:
        self._authorize(request)
        body = await _json_body(request, self.timeout)
        if set(body) - {"reason"}:
            raise ApiError(400, f"unknown field(s): {', '.join(sorted(set(body) - {'reason'}))}")
        reason = body.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
            raise ApiError(400, f'"reason" must be a string of at most {MAX_REASON_CHARS} chars')
        job_id = validate_job_id(request.match_info["job_id"])
        cancel = await self._run(partial(triage.cancel, self._cluster(), job_id, reason=reason))
        return _json({"job_id": job_id, "cancel_requested": time_text(cancel.requested)}, 202)

    async def control_set(self, request: web.Request) -> web.Response:
        self._authorize(request)
        body = await _json_body(request, self.timeout)
        unknown = set(body) - {"values", "unset", "replace", "expect_version"}
        if unknown:
            raise ApiError(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        values = body.get("values", {})
        unset = body.get("unset", [])
        replace = body.get("replace", False)
        if not isinstance(values, dict):
            raise ApiError(400, '"values" must be an object of keys and JSON scalars')
        if not isinstance(unset, list) or not all(isinstance(k, str) for k in unset):
            raise ApiError(400, '"unset" must be a list of keys')
        if not isinstance(replace, bool):
            raise ApiError(400, '"replace" must be true or false')
        if not values and not unset:
            raise ApiError(400, 'give "values" or "unset"')
        return await self._change(
            request, values, _expect_version(body), replace=replace, remove=tuple(unset)
        )

    async def control_command(self, request: web.Request) -> web.Response:
        self._authorize(request)
        command = request.match_info["command"]
        body = await _json_body(request, self.timeout)
        allowed = {"expect_version", "level"} if command == "log-level" else {"expect_version"}
        unknown = set(body) - allowed
        if unknown:
            raise ApiError(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        builtin = COMMANDS.get(command)
        if builtin is None:
            raise ApiError(404, f"no control command {command!r}: {', '.join(COMMANDS)}")
        level = body.get("level")
        if builtin.takes_level and not isinstance(level, str):
            raise ApiError(400, '"level" must be a log level (DEBUG, INFO, WARN, ...)')
        updates = builtin.values(level if isinstance(level, str) else None)
        return await self._change(request, updates, _expect_version(body))

    async def _change(
        self,
        request: web.Request,
        updates: dict[str, Any],
        expect_version: int | None,
        *,
        replace: bool = False,
        remove: tuple[str, ...] = (),
    ) -> web.Response:
        """Store a control change as ``zkstore control set`` does (without waiting), recorded
        in the job's history as made through this daemon's API."""
        job_id = validate_job_id(request.match_info["job_id"])
        service = ControlService(self._cluster(), by=f"{who()} (HTTP API)")
        change = await self._run(
            partial(
                service.change,
                job_id,
                updates,
                expect_version=expect_version,
                replace=replace,
                remove=remove,
            )
        )
        return _json(change.as_dict())


async def _json_body(request: web.Request, timeout: float) -> dict[str, Any]:
    """The request's JSON object (``{}`` for an empty body); 400 for anything else, 408 if it
    does not arrive within ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            raw = await request.read()
    except TimeoutError:
        raise ApiError(408, f"the body did not arrive within {timeout:g} s") from None
    if not raw.strip():
        return {}
    try:
        # zkstore's strict parser: bounded size and depth, whatever the nesting (a body nested
        # thousands deep is a 400 like any other, never a RecursionError).
        return load_object(raw, max_bytes=MAX_BODY_BYTES, max_depth=MAX_BODY_DEPTH)
    except ValueError as exc:
        raise ApiError(400, f"the body must be a JSON object: {exc}") from None


def _expect_version(body: dict[str, Any]) -> int | None:
    version = body.get("expect_version")
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ApiError(400, '"expect_version" must be a whole number from 0')
    return version


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


def pool_of(job: JobSnapshot) -> str:
    """The job's pool, from its run options (``default`` without any); an empty name, which no
    pool has, if they cannot be read: a scoped token reaches no such job."""
    return job.run.pool_name if job.run is not None else ""


def _pool_of_job(cluster: Cluster, job_id: str) -> str:
    return pool_of(read_snapshot(cluster.zk, cluster.layout, job_id))


def _published_settings(cluster: Cluster) -> dict[str, Any]:
    """What ``GET /api/v1/cluster/settings`` answers; :class:`HandleNotFound` (404) while no
    leader has published them."""
    record = read_settings(cluster.zk, cluster.layout, key=key_for(cluster.config))
    if record is None:
        raise HandleNotFound(
            "no leader has published the cluster's settings yet", path=cluster.layout.settings
        )
    members, _ = fleet.live_members(cluster.zk, cluster.layout)
    return view(record, differing(record, members))
