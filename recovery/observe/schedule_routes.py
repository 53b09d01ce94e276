"""The HTTP routes of schedules, beside the jobs' (:mod:`recovery.observe.http_api`)::

    GET    /api/v1/schedules                like ``zkstore schedules list --format json``
    GET    /api/v1/schedules/<name>         like ``zkstore schedules show NAME --format json``
    POST   /api/v1/schedules/<name>/pause   (change token) like ``schedules pause``
    POST   /api/v1/schedules/<name>/resume  (change token) like ``schedules resume``
    DELETE /api/v1/schedules/<name>         (change token) like ``schedules delete --yes``

Reads need the read token when one is set, as the job routes do. Creating a schedule stays with
the command line (it builds and uploads a job definition). Every answer is the JSON of
:mod:`zkstore.schedules.schedule_view`; a schedule that does not exist is a 404.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from aiohttp import web

from zkstore.schedules import schedule_service
from zkstore.schedules import schedule_view as view
from zkstore.schedules.runs import validate_name
from zkstore.schedules.schedule_store import ScheduleStore

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["Api", "ScheduleRoutes"]

T = TypeVar("T")


class Api(Protocol):
    """What the routes use of :class:`recovery.observe.http_api.Api` (which builds them)."""

    def _cluster(self) -> Cluster: ...

    async def _run(self, func: Callable[[], T]) -> T: ...

    def _authorize(self, request: web.Request) -> None: ...

    def _authorize_read(self, request: web.Request) -> None: ...


class ScheduleRoutes:
    """The schedule routes of one daemon's :class:`~recovery.observe.http_api.Api`."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/api/v1/schedules", self.list)
        app.router.add_get("/api/v1/schedules/{name}", self.show)
        app.router.add_post("/api/v1/schedules/{name}/pause", partial(self.set_paused, True))
        app.router.add_post("/api/v1/schedules/{name}/resume", partial(self.set_paused, False))
        app.router.add_delete("/api/v1/schedules/{name}", self.delete)

    def _store(self) -> ScheduleStore:
        cluster = self.api._cluster()
        return ScheduleStore.for_config(cluster.config, cluster.zk)

    async def list(self, request: web.Request) -> web.Response:
        self.api._authorize_read(request)
        cluster = self.api._cluster()
        rows = await self.api._run(partial(view.listing, self._store(), cluster.layout))
        return _json(rows)

    async def show(self, request: web.Request) -> web.Response:
        self.api._authorize_read(request)
        name = validate_name(request.match_info["name"])
        cluster = self.api._cluster()
        found = await self.api._run(partial(view.showing, self._store(), cluster.layout, name))
        return _json(found)

    async def set_paused(self, paused: bool, request: web.Request) -> web.Response:
        self.api._authorize(request)
        name = validate_name(request.match_info["name"])
        store = self._store()
        await self.api._run(partial(schedule_service.set_paused, store, name, paused))
        cluster = self.api._cluster()
        return _json(await self.api._run(partial(view.showing, store, cluster.layout, name)))

    async def delete(self, request: web.Request) -> web.Response:
        self.api._authorize(request)
        name = validate_name(request.match_info["name"])
        await self.api._run(partial(schedule_service.delete, self._store(), name))
        return _json({"name": name, "deleted": True})


def _json(data: Any) -> web.Response:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return web.Response(text=text + "\n", content_type="application/json")
