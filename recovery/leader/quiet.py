"""The driver events that leave the leader nothing to decide, confirmed with a read, not a look.

A look reads a dozen nodes of its job. Two events of an ordinary attempt, one whose driver has
no limit to time and whose job was asked nothing (no stop: :meth:`QuietAttempts.expect`), need
none of that:

- its driver's start (``running`` created): the look would adopt it. One pipelined read of the
  ``running`` node and of the job's stop node confirms it, and arms the node's watch again. A
  node gone already (a short driver, over by then: the read sets no watch) is taken as its end.
- its driver's end (``running`` deleted, the outcome recorded with the delete): the look would
  wait until the member records the process's exit (:func:`recovery.leader.decide._exiting`),
  and the watch on the assignment, armed since the placement, tells of that record. One
  pipelined read of the outcome and the assignment confirms it; the look is left to that watch,
  or to the bound a look would set (the outcome's time and the launch deadline) if the member
  never says.

Anything else about such a job (its node gone already, garbage, not ephemeral, another attempt's,
no outcome, the exit recorded already, its member gone, the assignment's watch not armed, a stop
asked) makes it a look, as does any other event in the same turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from kazoo.protocol.states import ZnodeStat

from recovery.leader.role import LeaderRole
from recovery.leader.watches import JobWatcher, arming
from zkstore.errors import AccessDenied, CorruptRecord
from zkstore.records.fleet_records import Assignment
from zkstore.records.job_records import Outcome, RunningInfo

__all__ = ["Node", "QuietAttempts"]

Node = tuple[bytes, ZnodeStat] | None


class QuietAttempts:
    """The placed attempts whose start and end need no look (loop thread)."""

    def __init__(
        self, leader: LeaderRole, report_running: Callable[[str, RunningInfo], None]
    ) -> None:
        self.leader = leader
        self._report_running = report_running
        #: job -> the attempt expected (placed, nothing to decide at its start or end)
        self._expected: dict[str, int] = {}

    def expect(self, job_id: str, attempt: int) -> None:
        self._expected[job_id] = attempt

    def forget(self, job_id: str) -> None:
        """A look at the job, or its cleanup: whatever comes next about it is a look."""
        self._expected.pop(job_id, None)

    def expects(self, job_id: str) -> bool:
        return job_id in self._expected

    def confirm_starts(self, started: dict[str, JobWatcher]) -> set[str]:
        """Read each started driver's node (re-arming its watch) and the job's stop node; the
        jobs whose start is not what :meth:`expect` expected, to be looked at."""
        if not started:
            return set()
        layout = self.leader.cluster.layout
        ids = sorted(started)
        paths = [path for job_id in ids for path in (layout.running(job_id), layout.stop(job_id))]
        watches = {layout.running(job_id): started[job_id] for job_id in ids}
        with arming(watches.items()):
            found = self.leader.cluster.zk.get_many_or_denied(paths, watches=watches)
        looks, gone = set(), {}
        for n, job_id in enumerate(ids):
            running, stop = found[2 * n], found[2 * n + 1]
            if isinstance(running, AccessDenied) or isinstance(stop, AccessDenied):
                looks.add(job_id)  # made by the job's identity for itself: the look says so
                continue
            if running is None:  # a read of an absent node sets no watch
                started[job_id].armed.discard(layout.running(job_id))
                if stop is None:  # a short driver, over already: its end is what matters
                    gone[job_id] = started[job_id]
                    continue
            info = self._expected_driver(job_id, running) if stop is None else None
            if info is None:
                looks.add(job_id)
            else:
                self._report_running(job_id, info)
        return looks | self.confirm_exits(gone)

    def _expected_driver(self, job_id: str, node: Node) -> RunningInfo | None:
        """The driver of the expected attempt holding ``running`` in its own session; None for
        anything else."""
        if node is None or not node[1].ephemeralOwner:
            return None
        path = self.leader.cluster.layout.running(job_id)
        try:
            info = RunningInfo.from_znode(node[0], node[1], path)
        except CorruptRecord:
            return None
        return info if info.attempt == self._expected.get(job_id) else None

    def confirm_exits(self, ended: dict[str, JobWatcher]) -> set[str]:
        """Read each ended driver's outcome and its assignment (pipelined); the jobs whose end
        is not the expected attempt's outcome with its exit still to be recorded by a member
        that is up and whose assignment is watched, to be looked at. The others are looked at
        when that watch fires, or at the bound."""
        if not ended:
            return set()
        layout, fleet = self.leader.cluster.layout, self.leader.fleet
        looks, asked = set(), []
        for job_id, watcher in sorted(ended.items()):
            member = next((m for m, jobs in fleet.assignments.items() if job_id in jobs), None)
            path = layout.assignment(member, job_id) if member is not None else None
            if member in fleet.members and path in watcher.armed:
                asked.append((job_id, path))
            else:
                looks.add(job_id)
        paths = [p for job_id, path in asked for p in (layout.outcome(job_id), path)]
        found = self.leader.cluster.zk.get_many_or_denied(paths)
        now = self.leader.clock.now()
        for n, (job_id, path) in enumerate(asked):
            outcome, assignment = found[2 * n], found[2 * n + 1]
            if isinstance(outcome, AccessDenied) or isinstance(assignment, AccessDenied):
                looks.add(job_id)
                continue
            until = self._exiting_until(job_id, outcome, path, assignment)
            if until is None:
                looks.add(job_id)
                continue
            delay = (until - now).total_seconds()
            self.leader.post_at(time.monotonic() + max(0.0, delay), job_id)
        return looks

    def _exiting_until(
        self, job_id: str, outcome_node: Node, path: str, assignment_node: Node
    ) -> datetime | None:
        """When a look would stop waiting for the member to record the exit of the expected
        attempt's driver, which recorded its outcome; None if that is not the case."""
        attempt = self._expected.get(job_id)
        if outcome_node is None or assignment_node is None:
            return None
        try:
            outcome = Outcome.from_znode(*outcome_node, self.leader.cluster.layout.outcome(job_id))
            assignment = Assignment.from_znode(*assignment_node, path)
            finished = outcome.finished
        except CorruptRecord:
            return None
        if outcome.attempt != attempt or assignment.attempt != attempt or assignment.exited:
            return None
        return finished + timedelta(seconds=self.leader.settings.start_timeout)
