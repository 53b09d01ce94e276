"""Placement: the leader places each attempt on a member with a free slot.

Least loaded first, among the members whose labels satisfy what the job requires, and never on a
drained one; for a job that would take a warm driver JVM, a member whose record says it has one
ready comes before those without (then least loaded, as for any job).

A placement is an assignment ``R/assignments/<member>/<job>``, written by the leader
with the attempt's status in one fenced transaction; a member's load is the number of its
assignments. The fleet itself (members, labels, assignments) is read by
``recovery.shared.fleet_view``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from recovery.shared import fleet_view as shared
from recovery.shared.fleet_view import FleetView, Member, format_labels
from recovery.shared.jvm_settings import run_reason
from zkstore.errors import CorruptRecord, ZkStoreError
from zkstore.jobs.runspec import RunSpec
from zkstore.layout import Layout
from zkstore.records.fleet_records import Assignment, MemberInfo

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "WARM_FRESH",
    "Fleet",
    "MemberChanges",
    "read_assignment",
    "read_fleet",
    "refresh_warm",
    "would_take_warm",
]

logger = logging.getLogger(__name__)


#: Seconds the leader trusts what the member records it holds say of their warm JVMs when no
#: watch told it of a change (:class:`MemberChanges`): placing a job that would take one after
#: that, it reads them again all the same.
WARM_FRESH = 1.0


@dataclass
class Fleet(FleetView):
    """The fleet the leader places on.

    ``assignments`` is what ZooKeeper holds (as read, plus this leader's own writes since);
    each member's ``assigned`` also counts the placements decided in the current batch, and
    its ``warm_ready`` the warm JVMs they would take.
    """

    #: when the members' records were read (:func:`time.monotonic`)
    read_at: float = field(default_factory=time.monotonic)
    #: the placements of the batch that took a warm JVM, job to member: one not written after
    #: all gives it back (:meth:`untake`)
    warm_taken: dict[str, str] = field(default_factory=dict)

    def place(
        self,
        job_id: str,
        required: Mapping[str, str],
        among: Collection[str] | None = None,
        warm: bool = False,
    ) -> tuple[str | None, str]:
        """The member to run the job's next attempt on (one of ``among`` if given: the slots
        not kept for jobs ahead) and what the leader's log adds to why (its warm JVM), or None
        and why not. ``warm``: the job would take a warm JVM (its run options do not rule one
        out): a member with one ready first.

        Takes the slot at once (and the warm JVM, for ``warm``), so that the decisions of one
        batch never overfill a member nor count one JVM twice.
        """
        free, why = self._free(required)
        if among is not None:
            free = [m for m in free if m.daemon_id in among]
        if not free:
            return None, why
        chosen = min(
            free,
            key=lambda m: (
                warm and m.warm_ready == 0,
                len(m.assigned) / m.info.slots,
                -m.free,
                m.daemon_id,
            ),
        )
        self.take(chosen.daemon_id, job_id)
        if warm and chosen.warm_ready > 0:
            self._count_warm(chosen.daemon_id, -1)
            self.warm_taken[job_id] = chosen.daemon_id
            return chosen.daemon_id, "a warm driver ready there"
        return chosen.daemon_id, "no warm driver ready" if warm else ""

    def refresh(self, infos: Mapping[str, MemberInfo]) -> None:
        """Members' records read again (what they say of their warm JVMs); their drain marks
        and assignments are kept. A member not in ``infos`` is left as it was."""
        for daemon_id, info in infos.items():
            member = self.members.get(daemon_id)
            if member is not None:
                self.members[daemon_id] = replace(member, info=info)
        self.read_at = time.monotonic()
        self.warm_taken.clear()  # the records say now what is ready

    def refusal(self, required: Mapping[str, str]) -> str | None:
        """Why a job requiring ``required`` would not be placed now (None: it would be); takes
        nothing."""
        free, why = self._free(required)
        return None if free else why

    def _free(self, required: Mapping[str, str]) -> tuple[list[Member], str]:
        """The members that could take such a job now, or none and why."""
        able = [m for m in self.members.values() if not m.drained and m.matches(required)]
        if not able:
            wanted = f" with {format_labels(required)}" if required else ""
            return [], f"no daemon{wanted} is up (or all are drained)"
        free = [m for m in able if m.free > 0]
        if not free:
            slots = sum(m.info.slots for m in able)
            return [], f"all {slots} driver slot(s) of the daemons that can run it are in use"
        return free, ""

    def take(self, daemon_id: str, job_id: str) -> None:
        """Count the job against the member's slots (a placement decided, not yet written)."""
        member = self.members.get(daemon_id)
        if member is not None:
            self.members[daemon_id] = Member(
                member.info, member.drained, member.assigned | {job_id}
            )

    def untake(self, daemon_id: str, job_id: str) -> None:
        """The placement was not written after all: give the slot back, and the warm JVM it
        took (its next placement, within :data:`WARM_FRESH` of the read, found none there and
        went to a member without one)."""
        member = self.members.get(daemon_id)
        if member is not None and job_id not in self.assignments.get(daemon_id, ()):
            self.members[daemon_id] = Member(
                member.info, member.drained, member.assigned - {job_id}
            )
        if self.warm_taken.get(job_id) == daemon_id:
            del self.warm_taken[job_id]
            self._count_warm(daemon_id, +1)

    def _count_warm(self, daemon_id: str, change: int) -> None:
        """The member's ``warm_ready`` in this copy, changed by ``change`` (never below 0)."""
        member = self.members.get(daemon_id)
        if member is not None:
            info = replace(member.info, warm_ready=max(0, member.warm_ready + change))
            self.members[daemon_id] = replace(member, info=info)

    def assigned(self, daemon_id: str, job_id: str) -> None:
        """The assignment was written."""
        self.assignments.setdefault(daemon_id, set()).add(job_id)
        self.take(daemon_id, job_id)
        self.warm_taken.pop(job_id, None)

    def release(self, daemon_id: str, job_id: str) -> None:
        """The assignment was removed: its slot is free."""
        self.assignments.get(daemon_id, set()).discard(job_id)
        member = self.members.get(daemon_id)
        if member is not None:
            self.members[daemon_id] = Member(
                member.info, member.drained, member.assigned - {job_id}
            )

    def could_start(self, waiting: Iterable[tuple[str, Mapping[str, str]]]) -> list[str]:
        """The waiting jobs (job id, required labels; in the order they wait) that the free
        slots could take now: each of the first ones that a member with a free slot matches,
        one slot each. Nothing is taken: the leader looks at these again and places them."""
        free = {d: m.free for d, m in self.members.items() if not m.drained and m.free > 0}
        chosen: list[str] = []
        for job_id, required in waiting:
            if not free:
                break
            member = next((d for d in sorted(free) if self.members[d].matches(required)), None)
            if member is None:
                continue
            chosen.append(job_id)
            free[member] -= 1
            if free[member] == 0:
                del free[member]
        return chosen


def would_take_warm(run: RunSpec | None) -> bool:
    """Whether an attempt of a job whose handle keeps ``run`` would take a warm JVM where one
    is ready: nothing it keeps rules one out (the leader's hint: whether its code asks for
    Spark at all, and the daemon's own JVM defaults, are known only where it runs)."""
    return run is not None and run_reason(run, {}) is None


class MemberChanges:
    """Whether a member's record may have changed since the leader last read them all with a
    watch. Each such read (:func:`refresh_warm`) sets a one-shot data watch on every record,
    which fires on its change or deletion, or on a suspended connection (kazoo's ``NONE``
    event: read again too). ZooKeeper delivers a watch's event before anything of a later
    write: a job submitted after its daemon said a warm JVM was ready is looked at once the
    leader knows its copy is stale, so it reads the records again and sees the JVM (with a
    copy trusted for a second, the job went to a daemon without one)."""

    def __init__(self) -> None:
        self._changed = threading.Event()
        self._changed.set()  # nothing read with watches yet

    @property
    def changed(self) -> bool:
        return self._changed.is_set()

    def notice(self, event: Any = None) -> None:
        """The watch (kazoo's watch thread): a record changed, went, or the connection was
        suspended."""
        self._changed.set()

    def unwatched(self) -> None:
        """The fleet was read without watches: the next placement that prefers a warm JVM
        reads the records again, with them."""
        self._changed.set()

    def reading(self) -> None:
        """A read with watches begins: a change from here on fires one of them."""
        self._changed.clear()


def refresh_warm(
    fleet: Fleet, zk: ZooKeeper, layout: Layout, changes: MemberChanges | None = None
) -> None:
    """Read the members' records again (what they say of their warm JVMs) if one may have
    changed since they were read (``changes``), or they are older than :data:`WARM_FRESH`; an
    unreachable ZooKeeper leaves the fleet as it was (the placement is a preference: the
    batch's own reads say the outage)."""
    stale = changes is None or changes.changed
    if not stale and time.monotonic() - fleet.read_at < WARM_FRESH:
        return
    if changes is not None:
        changes.reading()
    try:
        watch = changes.notice if changes is not None else None
        fleet.refresh(shared.read_members(zk, layout, list(fleet.members), watch=watch))
    except ZkStoreError as exc:
        if changes is not None:
            changes.unwatched()
        logger.debug("members' warm drivers not read again: %s", exc)


def read_fleet(zk: ZooKeeper, layout: Layout) -> Fleet:
    """Members, drain marks and assignments, in three pipelined rounds."""
    view = shared.read_fleet(zk, layout)
    return Fleet(view.members, view.assignments)


def read_assignment(
    zk: ZooKeeper, layout: Layout, daemon_id: str, job_id: str
) -> Assignment | None:
    """One assignment, or None if it does not exist or cannot be read."""
    path = layout.assignment(daemon_id, job_id)
    found = zk.get_many([path])[0]
    if found is None:
        return None
    try:
        return Assignment.from_znode(found[0], found[1], path)
    except CorruptRecord as exc:
        logger.warning("unreadable assignment %s: %s", path, exc)
        return None
