"""The daemons of the fleet as operators see them, and the drain mark they set (issue 61).

One view for every reader: ``zkstore daemons list --format json`` and ``GET /api/v1/cluster``
give a daemon the same JSON (:meth:`DaemonInfo.as_dict`), the status page renders the same
values, and ``zkstore daemons drain|undrain`` (and whatever else marks a daemon) write through
:func:`drain` and :func:`undrain`, never from a click function. Reading and marking both stay
here, apart from the command line and the HTTP side, which only show what these return.

A daemon is listed when it is up (its member record), when it is gone while attempts are still
placed on it (``lost``: until the leader has placed them again), or when it is drained and down
(so that it can be undrained).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from recovery.shared.fleet_view import Member, read_fleet
from zkstore.errors import CorruptRecord, DaemonNotFound, HandleExists, HandleNotFound
from zkstore.jobs import history
from zkstore.jobs.history import LeaderHistory
from zkstore.layout import Layout
from zkstore.records.fleet_records import DrainMark
from zkstore.records.strict import optional_time_text, utc_moment

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["DaemonInfo", "Marked", "drain", "read_daemons", "undrain"]


@dataclass(frozen=True)
class DaemonInfo:
    """One daemon of the fleet: its member record's values (None for a daemon that is down),
    whether it leads, and what is placed on it."""

    daemon_id: str
    host: str | None = None
    pid: int | None = None
    leader: bool = False
    slots: int = 0
    used: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    drained: bool = False
    #: the jobs placed on it
    jobs: tuple[str, ...] = ()
    #: when it started (None: down)
    started: datetime | None = None
    #: its member record is there (its session lives)
    up: bool = True
    #: gone from the fleet (its session ended) with attempts still placed on it
    lost: bool = False
    #: since when it is gone (the leader saw it leave: ``R/leader/history``), if known
    lost_since: datetime | None = None
    #: its zkstore release (None before 0.2.0), the fleet protocol it speaks, the oldest it serves
    release: str | None = None
    protocol: int | None = None
    min_protocol: int | None = None
    #: its ``--driver-user`` users out of its pool: name -> why
    users_out: dict[str, Any] = field(default_factory=dict)
    #: its resident memory (bytes) and its Python allocator's blocks, as it reports them
    rss: int | None = None
    heap_blocks: int | None = None
    #: its warm driver JVMs ready now, and the seconds from its start to its first one ready
    warm_ready: int | None = None
    warm_first_s: float | None = None

    @classmethod
    def of_member(cls, member: Member, leader_id: str | None) -> DaemonInfo:
        info = member.info
        return cls(
            daemon_id=member.daemon_id,
            host=info.host,
            pid=info.pid,
            leader=member.daemon_id == leader_id,
            slots=info.slots,
            used=len(member.assigned),
            labels=member.labels,
            drained=member.drained,
            jobs=tuple(sorted(member.assigned)),
            started=info.started,
            release=info.release,
            protocol=info.protocol,
            min_protocol=info.min_protocol,
            users_out=dict(info.users_out or {}),
            rss=info.rss,
            heap_blocks=info.heap_blocks,
            warm_ready=info.warm_ready,
            warm_first_s=None
            if info.warm_first_ms is None
            else round(info.warm_first_ms / 1000, 1),
        )

    def as_dict(self) -> dict[str, Any]:
        """The daemon's JSON, the same for the command line and the HTTP API."""
        return {
            "id": self.daemon_id,
            "host": self.host,
            "pid": self.pid,
            "leader": self.leader,
            "slots": self.slots,
            "used": self.used,
            "labels": self.labels,
            "drained": self.drained,
            "jobs": list(self.jobs),
            "started": optional_time_text(self.started),
            "up": self.up,
            "lost": self.lost,
            "lost_since": optional_time_text(self.lost_since),
            "release": self.release,
            "protocol": self.protocol,
            "min_protocol": self.min_protocol,
            "users_out": self.users_out,
            "rss": self.rss,
            "heap_blocks": self.heap_blocks,
            "warm_ready": self.warm_ready,
            "warm_first_s": self.warm_first_s,
        }


def read_daemons(zk: ZooKeeper, layout: Layout, leader_id: str | None) -> list[DaemonInfo]:
    """Every daemon the fleet knows (see the module), sorted by id; ``leader_id`` is the
    leading daemon's (from its record, which the caller reads once for all it shows)."""
    fleet = read_fleet(zk, layout)
    daemons = [DaemonInfo.of_member(m, leader_id) for m in fleet.members.values()]
    gone = {
        name: jobs for name, jobs in fleet.assignments.items() if jobs and name not in fleet.members
    }
    departed: dict[str, datetime] = {}
    if gone:
        try:
            known = history.read(zk, layout.leader_history, LeaderHistory)
        except CorruptRecord:
            known = None
        departed = known.departed_since() if known is not None else {}
    daemons += [
        DaemonInfo(
            daemon_id=name,
            used=len(jobs),
            jobs=tuple(sorted(jobs)),
            drained=name in fleet.drained,
            up=False,
            lost=True,
            lost_since=departed.get(name),
        )
        for name, jobs in gone.items()
    ]
    daemons += [
        DaemonInfo(daemon_id=name, drained=True, up=False)
        for name in fleet.drained - set(fleet.members) - set(gone)
    ]
    return sorted(daemons, key=lambda d: d.daemon_id)


class Marked(Enum):
    """What :func:`drain` or :func:`undrain` did."""

    #: the mark was set (drain) or lifted (undrain), and the daemon is up
    DONE = "done"
    #: the same, the daemon being down (the mark applies when it comes back)
    DONE_DOWN = "done, down"
    #: nothing to do: drained already (drain) or not drained (undrain)
    ALREADY = "already"


def drain(zk: ZooKeeper, layout: Layout, daemon_id: str, *, before_start: bool) -> Marked:
    """Mark ``daemon_id`` drained (``R/drained/<id>``, persistent: it outlives the daemon's
    restarts): the leader places no new attempt there. Raises :class:`DaemonNotFound` for an
    id the fleet does not know, unless ``before_start``."""
    if not before_start and not _known(zk, layout, daemon_id):
        raise _unknown(zk, layout, daemon_id)
    try:
        zk.create(
            layout.drain_mark(daemon_id), DrainMark(version=None, since=utc_moment()).to_bytes()
        )
    except HandleExists:
        return Marked.ALREADY
    return Marked.DONE if zk.exists(layout.member(daemon_id)) is not None else Marked.DONE_DOWN


def undrain(zk: ZooKeeper, layout: Layout, daemon_id: str) -> Marked:
    """Lift ``daemon_id``'s drain mark. Raises :class:`DaemonNotFound` for an id the fleet
    does not know."""
    try:
        zk.delete(layout.drain_mark(daemon_id))
    except HandleNotFound:
        if not _known(zk, layout, daemon_id):
            raise _unknown(zk, layout, daemon_id) from None
        return Marked.ALREADY
    return Marked.DONE if zk.exists(layout.member(daemon_id)) is not None else Marked.DONE_DOWN


def _known(zk: ZooKeeper, layout: Layout, daemon_id: str) -> bool:
    """True if the daemon is up, or the fleet knows it: attempts placed on it (its assignment
    directory, made when it registers), or a drain mark."""
    found = zk.exists_many(
        [
            layout.member(daemon_id),
            layout.member_assignments(daemon_id),
            layout.drain_mark(daemon_id),
        ]
    )
    return any(stat is not None for stat in found)


def _unknown(zk: ZooKeeper, layout: Layout, daemon_id: str) -> DaemonNotFound:
    try:
        up = sorted(zk.children(layout.members))
    except HandleNotFound:
        up = []
    return DaemonNotFound(
        f"no daemon {daemon_id!r} in this cluster (up: {', '.join(up) or 'none'}); to drain "
        "one that has not started yet, or whose records are gone, use --before-start",
        path=layout.member(daemon_id),
    )
