"""Pools: named limits and priorities on the driver slots the leader gives jobs (issue 59).

``R/pools/<name>`` (:class:`Pool`) says how many of the pool's jobs may run at once
(``max_running``, None: no limit) and its ``priority`` (higher first; FIFO within one). A job
names its pool in its run options (``submit --pool``: :attr:`zkstore.jobs.runspec.RunSpec.pool`);
a job without one is in ``default``, which has no limit and priority 0 until somebody sets it.
A job whose pool has no record is placed as ``default``'s jobs are without one.

``zkstore pools set`` writes a record with compare-and-set at the version it read (a
concurrent change makes it read again, :data:`zkstore.zookeeper.retry.RACES`), and in the same
transaction writes a new random value to ``R/pools`` itself, whose data the leader watches:
one watch tells it that any pool changed. Writing one needs the fleet at protocol 4
(:data:`zkstore.protocol.POOLS`): a leader of protocol 3 would ignore the limits.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from zkstore.errors import ConfigError, CorruptRecord, HandleExists, HandleNotFound, VersionConflict
from zkstore.jobs.runspec import DEFAULT_POOL, POOL_NAME
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.layout import Layout
from zkstore.records.job_states import PENDING, RESTARTING, STARTING
from zkstore.records.record import Record
from zkstore.records.strict import utc_now
from zkstore.zookeeper.ops import Create, Delete, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "MAX_POOLS",
    "MAX_PRIORITY",
    "Pool",
    "check_name",
    "counts",
    "delete_pool",
    "pool_path",
    "read_pools",
    "set_pool",
]

logger = logging.getLogger(__name__)

#: The most pools a cluster holds (the leader reads them all on every change).
MAX_POOLS = 1000
#: Priorities run from 0 (``default``'s unless set) to MAX_PRIORITY.
MAX_PRIORITY = 1000


def check_name(name: str) -> str:
    """``name`` if it is a pool's name, else :class:`ConfigError`."""
    if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
        raise ConfigError(
            f"invalid pool name {str(name)[:60]!r}: use 1-63 characters of [a-z0-9_-], "
            "starting with a letter or digit"
        )
    return name


def pool_path(layout: Layout, name: str) -> str:
    return f"{layout.pools}/{check_name(name)}"


@dataclass(frozen=True)
class Pool(Record):
    """``R/pools/<name>``: how many of its jobs may run at once, and its priority."""

    name: str = DEFAULT_POOL
    #: None: no limit
    max_running: int | None = None
    priority: int = 0
    written: str = ""

    optional = frozenset({"max_running"})
    times = frozenset({"written"})

    def problem(self) -> str | None:
        if not POOL_NAME.fullmatch(self.name):
            return "its name is not a pool's"
        if self.priority > MAX_PRIORITY:
            return "its priority is out of range"
        return None

    def limit_shown(self) -> str:
        return "none" if self.max_running is None else str(self.max_running)

    def view(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "max_running": self.max_running,
            "priority": self.priority,
            "written": self.written,
            "version": self.version,
        }


def counts(snapshots: Iterable[JobSnapshot]) -> tuple[Counter[str], Counter[str]]:
    """Per pool, the jobs whose attempt is placed (running, being launched, or lost and not
    yet replaced: STARTING) and the jobs waiting for a start (PENDING, RESTARTING), from their
    statuses; what ``pools list`` and ``/metrics`` say."""
    running: Counter[str] = Counter()
    waiting: Counter[str] = Counter()
    for snap in snapshots:
        if snap.status is None or snap.result is not None or snap.quarantine is not None:
            continue
        pool = snap.run.pool_name if snap.run is not None else DEFAULT_POOL
        if snap.status.state == STARTING:
            running[pool] += 1
        elif snap.status.state in (PENDING, RESTARTING):
            waiting[pool] += 1
    return running, waiting


def read_pools(zk: ZooKeeper, layout: Layout) -> dict[str, Pool]:
    """Every pool's record, by name (none: no pool was ever set). One that cannot be read is
    logged and left out (its jobs are placed as a pool without a record is)."""
    try:
        names = sorted(zk.children(layout.pools))
    except HandleNotFound:
        return {}
    paths = [f"{layout.pools}/{name}" for name in names]
    pools: dict[str, Pool] = {}
    for name, path, found in zip(names, paths, zk.get_many(paths), strict=True):
        if found is None:
            continue
        try:
            pools[name] = Pool.from_znode(found[0], found[1], path)
        except CorruptRecord as exc:
            logger.warning("%s", exc)
    return pools


def set_pool(
    zk: ZooKeeper,
    layout: Layout,
    name: str,
    *,
    max_running: int | None = None,
    priority: int | None = None,
    no_limit: bool = False,
) -> Pool:
    """Create or change pool ``name`` (what is not given keeps its value; ``no_limit`` lifts
    the limit) with compare-and-set at the version read; returns what was written."""
    path = pool_path(layout, name)
    zk.ensure_path(layout.pools)

    def attempt() -> Pool:
        found = zk.get_if_exists(path)
        current = Pool(version=None, name=name)
        if found is not None:
            try:
                current = Pool.from_znode(found[0], found[1], path)
            except CorruptRecord as exc:
                logger.warning("%s; writing over it", exc)
        if found is None and len(zk.children(layout.pools)) >= MAX_POOLS:
            raise ConfigError(f"the cluster has {MAX_POOLS} pools already: delete one first")
        limit = (
            None if no_limit else max_running if max_running is not None else current.max_running
        )
        record = replace(
            current,
            name=name,
            max_running=limit,
            priority=current.priority if priority is None else priority,
            written=utc_now(),
        )
        op: Op = (
            Create(path, record.to_bytes())
            if found is None
            else SetData(path, record.to_bytes(), version=found[1].version)
        )
        try:
            results = zk.commit([op, _touch(layout)])
        except (HandleExists, VersionConflict, HandleNotFound) as exc:
            raise TryAgain(str(exc)) from exc  # changed meanwhile: read again
        version = 0 if found is None else getattr(results[0], "version", None)
        return record.with_version(version)

    return RACES.call(attempt, what=f"setting pool {name}", path=path)


def delete_pool(zk: ZooKeeper, layout: Layout, name: str) -> Pool:
    """Delete pool ``name``'s record at the version read (its jobs are then placed as a pool
    without a record: no limit, priority 0); :class:`HandleNotFound` if there is none."""
    path = pool_path(layout, name)

    def attempt() -> Pool:
        found = zk.get_if_exists(path)
        if found is None:
            raise HandleNotFound(f"no pool {name!r} (zkstore pools list)", path=path)
        record = Pool.from_znode(found[0], found[1], path)
        try:
            zk.commit([Delete(path, version=found[1].version), _touch(layout)])
        except VersionConflict as exc:
            raise TryAgain(str(exc)) from exc
        return record

    return RACES.call(attempt, what=f"deleting pool {name}", path=path)


def _touch(layout: Layout) -> SetData:
    """The write to ``R/pools`` that tells the leader's watch a pool changed (new data each
    time: the watch reports a change of value)."""
    return SetData(layout.pools, uuid.uuid4().hex.encode())
