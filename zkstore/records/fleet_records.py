"""The fleet's records: a daemon's membership (``R/members``), the leader's placements
(``R/assignments``), who leads (``R/leader/info``) and a daemon's drain mark
(``R/drained``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zkstore.records.record import EPOCH, Record
from zkstore.records.strict import (
    check_text,
)

__all__ = ["LABEL", "Assignment", "DrainMark", "LeaderInfo", "MemberInfo"]


#: A daemon's label key or value (``--label key=value``).
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}")


@dataclass(frozen=True)
class MemberInfo(Record):
    """``R/members/<id>``: EPHEMERAL, one per daemon, held in the daemon's own session."""

    daemon_id: str = ""
    host: str = ""
    pid: int = 0
    slots: int = 1
    started: datetime = EPOCH
    labels: dict[str, Any] | None = None
    #: the daemon process's start time and boot (see :class:`RunningInfo`)
    start_ticks: int | None = None
    boot_id: str | None = None
    #: the fleet protocols the daemon serves (:mod:`zkstore.protocol`) and its release; a
    #: record without them is a daemon older than the fleet protocol: protocol 1
    speaks: int | None = None
    serves_from: int | None = None
    release: str | None = None
    #: the digest of the settings the daemon would enforce as a leader
    #: (:func:`zkstore.cluster.cluster_settings.settings_digest`); a daemon older than them has none
    settings: str | None = None
    #: its driver users out of its pool (``--driver-user``), name -> why (a process left
    #: running as it, or what could not be removed of what a driver left); read by people
    #: only (``daemons list``): a reader of an older release ignores it
    users_out: dict[str, Any] | None = None
    #: the daemon's own memory as it last reported it (:mod:`recovery.shared.memory`): its
    #: resident set in bytes and the blocks its Python allocator holds; an older daemon's
    #: record has neither, and an older reader ignores them
    rss: int | None = None
    heap_blocks: int | None = None
    #: its warm driver JVMs (``--warm-drivers``) ready for an attempt now, as it last said
    #: (the leader prefers a daemon with one for a job that would take one); and the seconds
    #: (in milliseconds) from its start to its first one ready. None: no warm drivers (not
    #: yet), or a daemon older than them (an older reader ignores both)
    warm_ready: int | None = None
    warm_first_ms: int | None = None

    optional = frozenset(
        {
            "labels",
            "start_ticks",
            "boot_id",
            "speaks",
            "serves_from",
            "release",
            "settings",
            "users_out",
            "rss",
            "heap_blocks",
            "warm_ready",
            "warm_first_ms",
        }
    )
    wide = frozenset({"start_ticks", "rss", "heap_blocks"})  # see RunningInfo
    times = frozenset({"started"})
    #: (not stored as ``protocol``: that field marks a record written at a newer protocol)
    stored = {"daemon_id": "member_id"}

    @property
    def protocol(self) -> int:
        """The newest fleet protocol this daemon speaks (1 for a daemon older than them)."""
        return self.speaks if self.speaks is not None else 1

    @property
    def min_protocol(self) -> int:
        """The oldest fleet protocol this daemon can serve."""
        return self.serves_from if self.serves_from is not None else 1

    @classmethod
    def _values(cls, raw: dict[str, Any]) -> dict[str, Any]:
        values = super()._values(raw)
        for key, value in (values.get("labels") or {}).items():
            if not isinstance(value, str) or not LABEL.fullmatch(key) or not LABEL.fullmatch(value):
                raise ValueError(f"label {key!r:.40} is not key=value of [A-Za-z0-9._/-]")
        for key, value in (values.get("users_out") or {}).items():
            if not isinstance(value, str):
                raise ValueError(f"users_out {key!r:.40} is not text")
            check_text(key, "a user's name")
            check_text(value, "why a user is out")
        return values


@dataclass(frozen=True)
class Assignment(Record):
    """``R/assignments/<member>/<job>``: the leader placed ``attempt`` of the job on the member.

    Written by the leader in one transaction with the status (STARTING, the member, a new
    version); the driver's ``running`` transaction checks that status version, so a member that
    launches an attempt it no longer owns is refused by ZooKeeper. ``exited`` is how the driver
    process ended, as its member saw it.
    """

    job_id: str = ""
    daemon_id: str = ""
    attempt: int = 0
    status_version: int = 0
    assigned: datetime = EPOCH
    exited: str | None = None

    optional = frozenset({"exited"})
    times = frozenset({"assigned"})
    stored = {"daemon_id": "member_id"}


@dataclass(frozen=True)
class LeaderInfo(Record):
    """``R/leader/info``: EPHEMERAL, who leads (``daemon_id``, stored as ``id``; ``host``,
    ``pid``), ``since`` when, its ``contender`` node, and (once its first pass over every job is
    done) when it had ``recovered`` them. Written by the leader, fenced on its contender node."""

    daemon_id: str = ""
    host: str = ""
    pid: int = 0
    since: datetime = EPOCH
    contender: str = ""
    recovered: datetime | None = None

    optional = frozenset({"recovered"})
    times = frozenset({"since", "recovered"})
    stored = {"daemon_id": "id"}


@dataclass(frozen=True)
class DrainMark(Record):
    """``R/drained/<daemon>``: persistent, present while the daemon takes no new attempts
    (``zkstore daemons drain``); only its presence counts, ``since`` is for people."""

    since: datetime = EPOCH

    times = frozenset({"since"})
