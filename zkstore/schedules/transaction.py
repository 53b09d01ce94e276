"""The transaction that fires one window of a schedule: ONE fenced leader transaction.

:func:`build_fire` builds it (pure: the caller has read what it needs)::

    fence   check(<leader's contender node>)                  NotLeader: a deposed leader
            absent(R/results/<run>)                           JobFinished: the run ran already
            absent(R/quarantine/<run>)                        JobQuarantined
    ops     check(R/schedules/<name>, spec version)           paused, changed or deleted since
            set(R/schedules/<name>/state, new state, version) the window decided, with history
            create(R/currentJobs/<run>, handle)               the run: at most one per window
            create(R/currentJobs/<run>/locks)                 (a live entry)
            [create(R/jobs/<previous>), create(.../cancel)]   --concurrency replace

so a window's run, the state that says it was fired and (replace) the previous run's cancel
exist together or not at all. A repeated fire of the window (a new leader that read the state
before the first fire committed, a retry after a lost answer) fails on the state's version, and,
whatever the state says, on the run's job id: ZooKeeper refuses a second
``currentJobs/<run>``, and a run that already ended has a result. A deposed leader's fire fails
on its fence, even after kazoo reconnected with a new session. A step that fires nothing
(windows skipped or missed) is the first two ops alone, under the leader's fence.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkstore.errors import JobFinished, JobQuarantined
from zkstore.handle import Handle
from zkstore.layout import Layout
from zkstore.ops import Check, Create, Fence, Op, SetData
from zkstore.schedules.records import SchedulePaths, ScheduleState
from zkstore.store import LOCKS


@dataclass(frozen=True)
class NewRun:
    """A run to create: its job id, the handle of its definition (the payload is written), and
    the ops that cancel the previous run (``--concurrency replace``)."""

    job_id: str
    handle: Handle
    cancel: tuple[Op, ...] = ()


@dataclass(frozen=True)
class Transaction:
    """The ops of one transaction and the fence they are committed under."""

    ops: tuple[Op, ...]
    fence: Fence


def build_fire(
    layout: Layout,
    paths: SchedulePaths,
    name: str,
    *,
    spec_version: int,
    state: ScheduleState,
    state_version: int,
    leader: Fence,
    run: NewRun | None = None,
) -> Transaction:
    """The fenced transaction that records ``state`` (the decisions of one step: see
    :func:`~zkstore.schedules.due.steps`) over the state at ``state_version``, while the spec is
    still at ``spec_version``, and creates ``run`` (None: a step that only records)."""
    ops: list[Op] = [
        Check(paths.schedule(name), spec_version),
        SetData(paths.state(name), state.to_bytes(), state_version),
    ]
    fence = leader
    if run is not None:
        node = layout.job_handle(run.job_id)
        ops += [Create(node, run.handle.to_bytes()), Create(f"{node}/{LOCKS}"), *run.cancel]
        fence = (
            leader
            + Fence.absent(
                layout.result(run.job_id),
                error=JobFinished,
                description=f"run {run.job_id} already has a result",
            )
            + Fence.absent(
                layout.quarantine_entry(run.job_id),
                error=JobQuarantined,
                description=f"run {run.job_id} is in quarantine",
            )
        )
    return Transaction(tuple(ops), fence)
