"""The transaction that decides windows of a schedule: ONE fenced leader transaction.

:func:`build_fire` builds its schedule's part (pure: the caller has read what it needs)::

    fence   check(<leader's contender node>)                  NotLeader: a deposed leader
    ops     check(R/schedules/<name>, spec version)           paused, changed or deleted since
            set(R/schedules/<name>/state, new state, version) the window decided, with history

A step that fires a window publishes its run in the same transaction: the job store's one way
of making a job (:meth:`zkstore.jobs.graph.JobGraphStore.submit`, these ops its ``with_ops``)
adds::

            absent(R/results/<run>), absent(R/quarantine/<run>)  JobFinished, JobQuarantined
            create(R/currentJobs/<run>, handle)               the run: at most one per window
            create(R/currentJobs/<run>/locks)                 (a live entry)
            [create(R/jobs/<previous>), create(.../cancel)]   --concurrency replace

so a window's run, the state that says it was fired and (replace) the previous run's cancel
exist together or not at all. A repeated fire of the window (a new leader that read the state
before the first fire committed, a retry after a lost answer) fails on the state's version, and,
whatever the state says, on the run's job id: ZooKeeper refuses a second
``currentJobs/<run>``, and a run that already ended has a result. A deposed leader's fire fails
on its fence, even after kazoo reconnected with a new session. A step that fires nothing
(windows skipped or missed) is the schedule's part alone. Several steps that fire (a backlog,
``--concurrency allow``) may be one transaction: the schedule's part once, with the state
after the last of them, and each run's part (:meth:`~zkstore.jobs.graph.JobGraphStore.submit_many`).
"""

from __future__ import annotations

from dataclasses import dataclass

from zkstore.layout import Layout
from zkstore.schedules.schedule_records import ScheduleState
from zkstore.zookeeper.ops import Check, Fence, Op, SetData

__all__ = ["Transaction", "build_fire"]


@dataclass(frozen=True)
class Transaction:
    """The ops of one transaction and the fence they are committed under."""

    ops: tuple[Op, ...]
    fence: Fence


def build_fire(
    layout: Layout,
    name: str,
    *,
    spec_version: int,
    state: ScheduleState,
    state_version: int,
    leader: Fence,
) -> Transaction:
    """The fenced ops that record ``state`` (the decisions of one step: see
    :func:`~zkstore.schedules.due.steps`) over the state at ``state_version``, while the spec is
    still at ``spec_version``."""
    ops: tuple[Op, ...] = (
        Check(layout.schedule(name), spec_version),
        SetData(layout.schedule_state(name), state.to_bytes(), state_version),
    )
    return Transaction(ops, leader)
