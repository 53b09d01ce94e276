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

from kazoo.protocol.states import ZnodeStat

from recovery.leader.decide import Action, Finish, NoSlot
from zkstore.errors import CorruptRecord
from zkstore.jobs.dependencies import WAITING, Dependency, Seen, decide
from zkstore.jobs.records import JobResult
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import FAILED
from zkstore.layout import Layout
from zkstore.schedules.records import SchedulePaths, ScheduleState
from zkstore.schedules.runs import dependencies_of
from zkstore.strict import parse_time
from zkstore.zk import ZooKeeper


class Waiting(NoSlot):
    """The job waits for the jobs it names (``reason``); looked at again when one ends."""


class DependencyGate:
    """The dependencies of the jobs one leadership looks at."""

    def __init__(self, zk: ZooKeeper, layout: Layout, paths: SchedulePaths) -> None:
        self.zk = zk
        self.layout = layout
        self.paths = paths
        #: job named by a dependency -> the jobs waiting for it
        self._waiters: defaultdict[str, set[str]] = defaultdict(set)

    def check(self, job: JobSnapshot) -> Action | None:
        """None if ``job`` may start (no dependency, or all met); else the action: wait with
        the reason, or finish FAILED. Raises :class:`ValueError` for a handle whose
        dependencies no writer makes (the caller quarantines the job)."""
        if job.handle is None:
            return None
        dependencies = dependencies_of(job.handle.summary)
        if not dependencies:
            return None
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

    def _seen(self, dependencies: tuple[Dependency, ...]) -> dict[str, Seen]:
        """One pipelined round over every dependency's handle, result and quarantine entry,
        and each chained schedule's state and spec."""
        layout, paths = self.layout, self.paths
        reads: list[str] = []
        for dependency in dependencies:
            job_id = dependency.job_id
            reads += [layout.job_handle(job_id), layout.result(job_id)]
            reads.append(layout.quarantine_entry(job_id))
            if dependency.schedule is not None:
                reads += [paths.schedule(dependency.schedule), paths.state(dependency.schedule)]
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
            decided, gone = False, False
            if dependency.schedule is not None:
                spec, state = next(found), next(found)
                gone = spec is None
                decided = state is not None and _decided(
                    state, paths.state(dependency.schedule), dependency.window
                )
            seen[dependency.job_id] = Seen(
                present=handle is not None or quarantined is not None or unreadable,
                outcome=outcome,
                quarantined=quarantined is not None,
                window_decided=decided,
                schedule_gone=gone,
            )
        return seen


def _decided(found: tuple[bytes, ZnodeStat], path: str, window: str | None) -> bool:
    """True if the schedule's state shows ``window`` decided (its newest decided window is at
    or after it). An unreadable state decides nothing: the job waits."""
    try:
        state = ScheduleState.from_znode(found[0], found[1], path)
    except CorruptRecord:
        return False
    if state.last is None or window is None:
        return False
    return parse_time(state.last) >= parse_time(window)
