"""``--after``: a job whose handle names dependencies starts only once they ended as required.

Before the first attempt of such a job is placed, the leader reads what the store shows of each
job it names (one pipelined round: its handle, its result, its quarantine entry; for a schedule's
run that is absent, the schedule's state) and applies the pure
:func:`zkstore.jobs.dependencies.decide`: READY places the attempt; WAITING leaves the job
PENDING with the reason in its status; FAILED records the job's result FAILED with the reason as
its error (as when its attempts are used up). A job is looked at again when a job it waits for
ends (an index kept per leadership, rebuilt as jobs are looked at) and on every periodic
reconcile. Nothing is written here: the caller's actions are fenced as for any job, so a crash at
any line leaves the job PENDING and the next look decides again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from kazoo.protocol.states import ZnodeStat

from recovery.leader.decide import Action, Finish, NoSlot
from zkstore.errors import ConfigError, CorruptRecord
from zkstore.jobs.dependencies import WAITING, Dependency, Seen, decide
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.layout import Layout
from zkstore.records.job_states import FAILED
from zkstore.records.result_records import JobResult
from zkstore.schedules.runs import dependencies_of, split_run_id
from zkstore.schedules.schedule_records import FIRED, ScheduleSpec, ScheduleState

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["DependencyGate", "Waiting"]


class Waiting(NoSlot):
    """The job waits for the jobs it names (``reason``); looked at again when one ends."""


class DependencyGate:
    """The dependencies of the jobs one leadership looks at."""

    def __init__(self, zk: ZooKeeper, layout: Layout) -> None:
        self.zk = zk
        self.layout = layout
        #: job named by a dependency -> the jobs waiting for it
        self._waiters: defaultdict[str, set[str]] = defaultdict(set)

    def check(self, job: JobSnapshot) -> Action | None:
        """None if ``job`` may start (no dependency, or all met); else the action: wait with
        the reason, or finish FAILED. Raises :class:`ValueError` for a handle whose
        dependencies no writer makes (the caller quarantines the job)."""
        if job.handle is None:
            return None
        if job.run is None:
            raise ValueError("its run options are garbled")
        dependencies = dependencies_of(job.handle.summary, job.run)
        if not dependencies:
            return None
        dependencies = self._as_runs(dependencies)
        verdict = decide(dependencies, self._seen(dependencies))
        if verdict.state == WAITING:
            for dependency in dependencies:
                self._waiters[dependency.job_id].add(job.job_id)
            return Waiting(reason=verdict.reason or "waiting for the jobs it runs after")
        self.forget(job.job_id)
        if verdict.state == FAILED:
            return Finish(outcome=FAILED, error=verdict.reason, reason="a dependency cannot be met")
        return None

    def waiters(self, job_id: str) -> set[str]:
        """The jobs waiting for ``job_id``, forgotten here: it ended or was made (they are
        looked at again, and wait again if they must)."""
        return self._waiters.pop(job_id, set())

    def forget(self, job_id: str) -> None:
        for waiting in self._waiters.values():
            waiting.discard(job_id)

    def _as_runs(self, dependencies: tuple[Dependency, ...]) -> tuple[Dependency, ...]:
        """``--after NAME-<stamp>`` of a schedule's run its schedule has not made yet: a
        dependency on that schedule's window (the job waits until the window is decided, as
        ``--after-schedule`` does), not on a job that does not exist (which fails at once).
        One pipelined round, for the dependencies that look like runs only."""
        candidates = [
            (d, found)
            for d in dependencies
            if d.schedule is None and (found := split_run_id(d.job_id)) is not None
        ]
        if not candidates:
            return dependencies
        reads = []
        for dependency, (name, _) in candidates:
            reads += [
                self.layout.job_handle(dependency.job_id),
                self.layout.result(dependency.job_id),
                self.layout.quarantine_entry(dependency.job_id),
                self.layout.schedule(name),
            ]
        stats = iter(self.zk.exists_many(reads))
        runs: dict[str, Dependency] = {}
        for dependency, (name, window) in candidates:
            handle, result, quarantined, spec = next(stats), next(stats), next(stats), next(stats)
            if handle is None and result is None and quarantined is None and spec is not None:
                runs[dependency.job_id] = replace(dependency, schedule=name, window=window)
        return tuple(runs.get(d.job_id, d) for d in dependencies)

    def _seen(self, dependencies: tuple[Dependency, ...]) -> dict[str, Seen]:
        """One pipelined round over every dependency's handle, result and quarantine entry,
        and each chained schedule's state and spec."""
        layout = self.layout
        reads: list[str] = []
        for dependency in dependencies:
            job_id = dependency.job_id
            reads += [layout.job_handle(job_id), layout.result(job_id)]
            reads.append(layout.quarantine_entry(job_id))
            if dependency.schedule is not None:
                reads += [
                    layout.schedule(dependency.schedule),
                    layout.schedule_state(dependency.schedule),
                ]
        found = iter(self.zk.get_many(reads))
        seen: dict[str, Seen] = {}
        for dependency in dependencies:
            handle, result, quarantined = next(found), next(found), next(found)
            outcome, unreadable = None, False
            if result is not None:
                try:
                    outcome = JobResult.from_znode(
                        result[0], result[1], layout.result(dependency.job_id)
                    ).outcome
                except CorruptRecord:
                    unreadable = True  # never taken for absent: the job waits
            decided, gone, fate, no_window = False, False, None, False
            if dependency.schedule is not None:
                spec, state = next(found), next(found)
                gone = spec is None
                decided, fate = (
                    _decided(state, layout.schedule_state(dependency.schedule), dependency.window)
                    if state is not None
                    else (False, None)
                )
                if spec is not None and not decided:
                    path = layout.schedule(dependency.schedule)
                    no_window = not _is_window(spec, path, dependency.window)
            seen[dependency.job_id] = Seen(
                present=handle is not None or quarantined is not None or unreadable,
                outcome=outcome,
                quarantined=quarantined is not None,
                window_decided=decided,
                schedule_gone=gone,
                window_fate=fate,
                no_such_window=no_window,
            )
        return seen


def _is_window(found: tuple[bytes, ZnodeStat], path: str, window: datetime | None) -> bool:
    """Whether ``window`` is one of the schedule's windows as its spec says now (a run id
    names a time, any time). An unreadable spec, or one this host cannot time (an unknown
    time zone), says yes: the job waits, as for an undecided window."""
    if window is None:
        return True
    try:
        timing = ScheduleSpec.from_znode(found[0], found[1], path).timing()
    except (CorruptRecord, ConfigError):
        return True
    return timing.next_after(window - timedelta(seconds=1)) == window


def _decided(
    found: tuple[bytes, ZnodeStat], path: str, window: datetime | None
) -> tuple[bool, str | None]:
    """Whether the schedule's state shows ``window`` decided (its newest decided window is at
    or after it), and what its history says of it (``skipped: <why>``, ``missed``; None if it
    has no entry for it). An unreadable state decides nothing: the job waits."""
    try:
        state = ScheduleState.from_znode(found[0], found[1], path)
    except CorruptRecord:
        return False, None
    if state.last is None or window is None:
        return False, None
    if state.last < window:
        return False, None
    for entry in state.history:
        if entry.window <= window <= entry.last and entry.outcome != FIRED:
            told = entry.outcome.lower()
            return True, f"{told}: {entry.reason}" if entry.reason else told
    return True, None
