"""Leader election under ``R/leader/election`` with a fence that ZooKeeper itself enforces.

Each daemon creates one EPHEMERAL_SEQUENTIAL contender node; the lowest sequence leads. A
contender watches only its predecessor, and the watch only posts an event: all the work happens
on the daemon's loop thread, with a deadline on every call.

Why not kazoo's ``Election``/``Lock``: nothing interrupts ``Election.run`` when the session is
lost, ``Lock.is_acquired`` stays True after the session expired and kazoo reconnected, and a
blocking ``acquire`` holds a thread that must stay free to react. Here, leadership is a fence:
every leader write carries ``check(<own contender node>)``. That node has a unique sequential
name and vanishes with the session, so a deposed leader's write fails inside ZooKeeper even
after kazoo silently opened a new session.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from recovery.shared import processes
from recovery.shared.processes import Liveness, ProcessIdentity
from zkstore.errors import (
    ConflictError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    NotLeader,
    OutcomeUnknown,
    VersionConflict,
)
from zkstore.jobs import history
from zkstore.jobs.history import LeaderHistory
from zkstore.layout import Layout
from zkstore.protocol import PROTOCOL
from zkstore.records.fleet_records import LeaderInfo, MemberInfo
from zkstore.records.strict import time_text, utc_moment
from zkstore.zookeeper.ops import Create, Delete, Fence
from zkstore.zookeeper.retry import RACES
from zkstore.zookeeper.zk import ZooKeeper, is_own_ephemeral

__all__ = ["Contender", "LeaderElection"]

logger = logging.getLogger(__name__)

_SEQUENCE_DIGITS = 10
_NAME_RE = re.compile(r"(?P<id>.+)-(?P<marker>[0-9a-f]{32})-n_(?P<seq>\d{10})")


def _sequence(name: str) -> int:
    return int(name[-_SEQUENCE_DIGITS:])


def _holder(data: bytes) -> ProcessIdentity | None:
    """The process a contender node names (None if it cannot be told: garbage, or written
    by a daemon older than the start time in it)."""
    try:
        found = json.loads(data)
        pid, ticks, boot = found["pid"], found.get("start_ticks"), found.get("boot_id")
        host = found["host"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(pid, int) and isinstance(host, str)):
        return None
    if not (isinstance(ticks, int) and isinstance(boot, str)):
        return None
    return ProcessIdentity(host, pid, ticks, boot)


@dataclass(frozen=True)
class Contender:
    """One contender node as seen in the election directory."""

    name: str
    daemon_id: str

    @property
    def sequence(self) -> int:
        return _sequence(self.name)


class LeaderElection:
    """This daemon's candidacy. Not thread-safe: call it from the loop thread only.

    ``notify`` is called (from kazoo's threads) when the predecessor goes away; the caller then
    calls :meth:`check` again from its own thread.
    """

    def __init__(
        self, zk: ZooKeeper, layout: Layout, daemon_id: str, notify: Callable[[], None]
    ) -> None:
        self.zk = zk
        self.layout = layout
        self.daemon_id = daemon_id
        self._notify = notify
        self._node: str | None = None

    @property
    def node(self) -> str | None:
        """Our contender node's full path, if we have one."""
        return self._node

    def contend(self) -> str:
        """Make sure we have a contender node in the current session; returns its path.

        The node's name carries a uuid, so a create whose answer was lost is recognised on retry
        instead of leaving a second (orphan) contender behind.
        """
        if self._node is not None and self.owns_node():
            return self._node
        self._clear_dead_self()
        marker = uuid.uuid4().hex
        prefix = f"{self.layout.election}/{self.daemon_id}-{marker}-n_"
        me = processes.this_process()
        data = json.dumps(
            {
                "id": self.daemon_id,
                "host": me.host,
                "pid": me.pid,
                "start_ticks": me.start_ticks,
                "boot_id": me.boot_id,
            }
        ).encode()
        try:
            node = self.zk.create(prefix, data, ephemeral=True, sequence=True, makepath=True)
        except OutcomeUnknown:
            found = self._find(marker)
            if found is None:
                raise
            node = found
        self._node = node
        logger.info("contending for leadership as %s", node.rsplit("/", 1)[1])
        return node

    def _clear_dead_self(self) -> None:
        """Delete the contender nodes of this daemon id that an earlier process of ours left
        and that is verifiably dead (this host and boot, no process with its pid and start
        time: a SIGKILL, an OOM kill): until its session expired, a dead leader's node would
        keep leadership vacant. The delete is conditional on the version read; what cannot be
        checked (another host, an older node without a start time) is left to its session."""
        try:
            names = self.zk.children(self.layout.election)
        except HandleNotFound:
            return
        ours = [n for n in names if (m := _NAME_RE.fullmatch(n)) and m["id"] == self.daemon_id]
        paths = [f"{self.layout.election}/{name}" for name in ours]
        for path, item in zip(paths, self.zk.get_many(paths), strict=True):
            holder = _holder(item[0]) if item is not None else None
            if holder is None or processes.probe(holder) is not Liveness.DEAD:
                continue
            assert item is not None
            logger.warning(
                "daemon %s: its earlier contender %s (pid %d on this host) is dead; removing "
                "it now instead of waiting for its session to expire",
                self.daemon_id,
                path.rsplit("/", 1)[1],
                holder.pid,
            )
            with contextlib.suppress(HandleNotFound, ConflictError):
                self.zk.delete(path, version=item[1].version)

    def _find(self, marker: str) -> str | None:
        for name in self.zk.children(self.layout.election):
            if marker in name:
                return f"{self.layout.election}/{name}"
        return None

    def owns_node(self) -> bool:
        """True if our contender node exists and belongs to the current session."""
        if self._node is None:
            return False
        return is_own_ephemeral(self.zk.exists(self._node), self.zk)

    def contenders(self) -> list[Contender]:
        names = self.zk.children(self.layout.election)
        ordered = sorted((n for n in names if n[-_SEQUENCE_DIGITS:].isdigit()), key=_sequence)
        return self._parse(ordered)

    @staticmethod
    def _parse(names: list[str]) -> list[Contender]:
        contenders = []
        for name in names:
            match = _NAME_RE.fullmatch(name)
            contenders.append(Contender(name, match.group("id") if match else name))
        return contenders

    def check(self, *, leading: bool = False) -> bool:
        """True if we lead now; otherwise watch our predecessor and return False.

        A contender about to take office (``leading`` False) steps aside for a contender whose
        daemon speaks a newer fleet protocol (it contends again, behind it); one that leads
        already stays: a newer daemon wins the next election, never deposes a working leader.
        Raises :class:`NotLeader` if our contender node is gone (the session expired): the caller
        must :meth:`contend` again.
        """
        while True:
            if self._node is None:
                raise NotLeader("not contending")
            ours = self._node.rsplit("/", 1)[1]
            names = [c.name for c in self.contenders()]
            if ours not in names:
                self._node = None
                raise NotLeader(f"contender node {ours} is gone (session expired?)")
            index = names.index(ours)
            if index == 0:
                newer = None if leading else self._newer_contender(names[1:])
                if newer is None:
                    return True
                self._step_aside(newer)
                continue
            predecessor = f"{self.layout.election}/{names[index - 1]}"
            if self.zk.exists(predecessor, watch=self._on_predecessor) is not None:
                return False

    def _newer_contender(self, others: list[str]) -> MemberInfo | None:
        """A contender whose daemon speaks a newer fleet protocol than this code, if any: it
        should lead, so that the records a newer protocol writes are acted on by a leader that
        reads them. Read only when this daemon would take office (never to depose a leader); a
        contender whose member record cannot be read counts as no newer."""
        ids = sorted({c.daemon_id for c in self._parse(others)} - {self.daemon_id})
        paths = [f"{self.layout.members}/{daemon_id}" for daemon_id in ids if "/" not in daemon_id]
        newest: MemberInfo | None = None
        for path, item in zip(paths, self.zk.get_many(paths), strict=True):
            if item is None:
                continue
            try:
                member = MemberInfo.from_znode(item[0], item[1], path)
            except CorruptRecord:
                continue
            if member.protocol > PROTOCOL and (newest is None or member.protocol > newest.protocol):
                newest = member
        return newest

    def _step_aside(self, newer: MemberInfo) -> None:
        """Leave the head of the queue to ``newer``: contend again, at its end."""
        logger.info(
            "not taking leadership: daemon %s (zkstore %s) speaks fleet protocol %d, this one "
            "%d; contending again behind it",
            newer.daemon_id,
            newer.release or "?",
            newer.protocol,
            PROTOCOL,
        )
        self.resign()
        self.contend()

    def _on_predecessor(self, event: object) -> None:
        self._notify()

    def fence(self) -> Fence:
        """The fence of this leadership's writes: our contender node must still exist."""
        if self._node is None:
            raise NotLeader("not contending")
        return Fence.check(self._node, error=NotLeader, description="no longer the leader")

    def publish_info(
        self, since: datetime | None = None, recovered: datetime | None = None
    ) -> None:
        """Write ``R/leader/info`` (EPHEMERAL, fenced) so that anyone can see who leads, since
        when, and (once its first pass over every job is done) when it had ``recovered`` them.

        A record replaced meanwhile (a predecessor's, or garbage) is replaced again
        (:data:`~zkstore.zookeeper.retry.RACES`); when that keeps failing, or ZooKeeper refuses (a
        node planted there with children), the leader leads without it and says so at ERROR.
        Raises :class:`NotLeader` (the fence) and :class:`~zkstore.errors.StoreUnavailable`.
        """
        info = LeaderInfo(
            version=None,
            daemon_id=self.daemon_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            since=since or utc_moment(),
            contender=(self._node or "").rsplit("/", 1)[-1],
            recovered=recovered,
        ).to_bytes()
        path = self.layout.leader_info

        def publish_once() -> None:
            stat = self.zk.exists(path)
            ops: list[Create | Delete] = [Create(path, info, ephemeral=True)]
            if stat is not None:
                ops.insert(0, Delete(path, stat.version))
            self.zk.commit(ops, fence=self.fence())

        try:
            RACES.call(
                publish_once,
                what=f"publishing {path}",
                retry_on=(HandleExists, HandleNotFound, VersionConflict),
                path=path,
            )
        except NotLeader:
            raise
        except ConflictError as exc:  # spent, or refused (a node planted with children)
            logger.error("leading without a leader record (who leads is not shown): %s", exc)
        if recovered is None:  # taking office (not the later note that it recovered every job)
            self._remember_term(time_text(since or utc_moment()))

    def _remember_term(self, since: str) -> None:
        """This term in ``R/leader/history`` (for people: never blocks the leadership)."""
        contender = (self._node or "").rsplit("/", 1)[-1] or self.daemon_id
        history.remember(
            self.zk,
            self.layout.leader_history,
            LeaderHistory,
            lambda known: known.with_term(contender, self.daemon_id, since),
            fence=self.fence(),
            what="the leader history",
        )

    def resign(self) -> None:
        """Give up the candidacy (and leadership) by deleting our contender node."""
        node, self._node = self._node, None
        if node is None:
            return
        with contextlib.suppress(HandleNotFound):
            self.zk.delete(node)
        logger.info("resigned candidacy %s", node.rsplit("/", 1)[1])
