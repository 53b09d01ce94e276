r"""Firing a schedule's windows: the leader's side.

:class:`Firer` (phase B calls :meth:`Firer.fire` on the leader's loop at each window and on
takeover) reads a schedule, :func:`~zkstore.schedules.due.plan`\ s its windows, and commits one
fenced transaction per step (:func:`~zkstore.schedules.transaction.build_fire`), re-planning
from fresh reads after a lost race. With ``--concurrency allow``, up to
:data:`TRANSACTION_WINDOWS` steps in a row that fire are one transaction (issue 60.3): their
runs' definitions written at once, then every run published with the same fences as alone
(the leader's, the spec's version, the state's, each run's no result and no quarantine entry),
all or none; a batch refused for one run (its id taken) is committed a step at a time, and
when other work waits on the leader's loop a pass fires one window before it gives way, as
before.

The run's definition is a copy of the schedule's, under the run's own prefix and signed with
the run's job key, written before the transaction (invariant 1: a crash in between leaves an
orphan payload that ``handles lingering`` finds, never a handle without its payload): the run's
driver holds its own key only, and a run stays readable after its schedule is changed or
deleted. Its handle's summary says ``schedule`` and ``scheduled`` (the window): the run records
its scheduled time, in its result too once it ends.

After a crash at any line, each window is decided once or not at all: the state, the run and
its history entry are one transaction. A lost answer is read back (is the run's handle ours?)
and, if not applied, sent again; unresolved, :class:`~zkstore.errors.OutcomeUnknown` is raised
and the payload kept.

Why one module: a batch of windows and a single window are one path (the same plan, fences,
lost-answer read-back and fall-back from batch to single), and splitting them would put the
all-or-none rule in two places.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zkstore.errors import (
    ForeignPython,
    HandleExists,
    HandleNotFound,
    JobFinished,
    JobQuarantined,
    OutcomeUnknown,
    OutOfBounds,
    PayloadError,
    VersionConflict,
    ZkStoreError,
)
from zkstore.jobs import request_pins
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.dependencies import ENDED, MAX_AFTER, Dependency
from zkstore.jobs.graph import JobGraphStore
from zkstore.jobs.runspec import RunSpec
from zkstore.jobs.stored import stored_summary
from zkstore.layout import Layout
from zkstore.payloads.store import is_marked
from zkstore.records.handle import MAX_HANDLE_BYTES, SummaryValue
from zkstore.records.job_records import CancelRequest
from zkstore.records.strict import to_millisecond, utc_now
from zkstore.schedules.counting import shortest_gap
from zkstore.schedules.due import (
    FIRE_BATCH,
    Plan,
    PreviousRun,
    Step,
    admit,
    entries,
    fired,
    plan,
    skipped,
    steps,
)
from zkstore.schedules.runs import AFTER_SCHEDULE, is_run_of, run_id, run_summary
from zkstore.schedules.schedule_limits import interval_refusal
from zkstore.schedules.schedule_records import (
    ALLOW,
    FIRED,
    HistoryEntry,
    ScheduleSpec,
    ScheduleState,
)
from zkstore.schedules.schedule_store import ScheduleStore, commit_settled
from zkstore.schedules.timing import format_time
from zkstore.schedules.transaction import Transaction, build_fire
from zkstore.zookeeper.ops import Create, Fence, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain
from zkstore.zookeeper.zk import MAX_ZNODE_BYTES, ZooKeeper

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["MAX_ROUNDS", "TRANSACTION_WINDOWS", "FireReport", "Firer"]

logger = logging.getLogger(__name__)

#: Plans per call of :meth:`Firer.fire` at most (together they fire up to its ``limit``).
MAX_ROUNDS = 5
#: Windows fired in one transaction at most: a run's handle is at most MAX_HANDLE_BYTES, so
#: 16 of them leave half of a transaction's 64 KB to the schedule's state (a group that
#: would not fit is cut in two all the same).
TRANSACTION_WINDOWS = 16


@dataclass
class FireReport:
    """What one call of :meth:`Firer.fire` did: runs created, windows skipped at fire time
    (concurrency, a job id taken) with why, windows recorded without a run (paused, missed),
    the schedule's next window, and whether windows up to now are left to decide (``more``:
    the call's ``limit`` ran out; call again)."""

    name: str
    fired: list[tuple[datetime, str]] = field(default_factory=list)
    skipped: list[tuple[datetime, str]] = field(default_factory=list)
    recorded: int = 0
    next: datetime | None = None
    more: bool = False


@dataclass(frozen=True)
class _Round:
    """What every step of one plan shares."""

    spec: ScheduleSpec
    leader: Fence
    now: datetime
    report: FireReport


class Firer:
    """The leader's firing of schedules over one cluster's session. Call from the leader's
    thread only; every write carries the ``leader`` fence given to :meth:`fire`."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        jobs: JobGraphStore,
        schedules: ScheduleStore,
        *,
        on_step: Callable[[str], None] | None = None,
        min_interval: int = 1,
        pinned: Callable[[], bool] = lambda: False,
    ) -> None:
        self.zk = zk
        #: whether a replaced run's cancel gets its pin (:mod:`zkstore.jobs.request_pins`)
        self.pinned = pinned
        #: the shortest interval between two windows this firer fires (a cluster's bound)
        self.min_interval = min_interval
        self.layout = layout
        self.jobs = jobs
        self.schedules = schedules
        self._on_step = on_step
        self._definitions: dict[str, tuple[str, JobDefinition]] = {}

    @classmethod
    def for_cluster(
        cls, cluster: Cluster, schedules: ScheduleStore, *, min_interval: int = 1
    ) -> Firer:
        return cls(
            cluster.zk,
            cluster.layout,
            cluster.jobs,
            schedules,
            on_step=cluster.step,
            min_interval=min_interval,
            pinned=cluster.pins_requests,
        )

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    def fire(
        self,
        name: str,
        leader: Fence,
        now: datetime | None = None,
        *,
        limit: int = FIRE_BATCH,
        rounds: int = MAX_ROUNDS,
        give_way: Callable[[], bool] | None = None,
    ) -> FireReport:
        """Decide and record every window of schedule ``name`` due at ``now`` (default: the
        clock), firing at most ``limit`` windows in at most ``rounds`` plans, and none after
        ``give_way`` says other work waits (asked after each fire): call again once
        ``report.next`` has come (and soon if a backlog is left: ``report.more``).

        Raises :class:`~zkstore.errors.NotLeader` (stop leading), :class:`HandleNotFound` (the
        schedule is gone), :class:`~zkstore.errors.CorruptRecord` (its records are garbage), a
        :class:`~zkstore.errors.PayloadError` (its definition cannot be read: no window is
        decided), :class:`~zkstore.errors.OutOfBounds` (its windows are closer than
        ``min_interval``: none is decided), :class:`OutcomeUnknown` or
        :class:`~zkstore.errors.StoreUnavailable`. A crash at any line leaves each window decided
        once or not at all.
        """
        moment = now or datetime.now(UTC)
        report = FireReport(name)

        def one_round() -> Plan:
            return self._round(name, leader, moment, limit - len(report.fired), report, give_way)

        for _ in range(rounds):
            decided = RACES.call(
                one_round,
                what=f"firing schedule {name}",
                path=self.schedules.layout.schedule_state(name),
            )
            report.more = decided.more
            if not decided.more or len(report.fired) >= limit:
                break
            if give_way is not None and give_way():
                break
        return report

    def _round(
        self,
        name: str,
        leader: Fence,
        now: datetime,
        limit: int,
        report: FireReport,
        give_way: Callable[[], bool] | None = None,
    ) -> Plan:
        schedule = self.schedules.get(name)
        gap = shortest_gap(schedule.spec.timing())
        if gap < self.min_interval:
            raise OutOfBounds(
                f"{interval_refusal(gap, self.min_interval)} (--schedule-min-interval): none "
                "is fired"
            )
        decided = plan(schedule.spec, schedule.state, now, limit=limit)
        report.next = decided.next
        context = _Round(schedule.spec, leader, now, report)
        state = schedule.state
        for group in _together(schedule.spec, steps(decided)):
            if len(group) > 1 and give_way is not None and give_way():
                # other work waits already: one window, as ever, then it goes first
                self._commit_step(context, state, group[0])
                return replace(decided, more=True)
            state = self._commit_steps(context, state, group)
            fires = any(step.fire is not None for step in group)
            if fires and give_way is not None and give_way():
                return replace(decided, more=True)  # the rest is planned again, later
        return decided

    def _commit_steps(
        self, context: _Round, state: ScheduleState, group: list[Step]
    ) -> ScheduleState:
        """Commit steps that each fire a window in ONE transaction (the same fences as each
        alone: the leader's, the spec's version, the state's, and each run's own); the state
        after them. A group that would not fit ZooKeeper's request limit is cut in two; one
        whose run id is taken, or whose definition cannot be read, is committed a step at a
        time, where each case is decided as for a window alone."""
        if len(group) == 1:
            return self._commit_step(context, state, group[0])
        spec, report = context.spec, context.report
        decided: list[HistoryEntry] = []
        runs: list[tuple[JobDefinition, dict[str, SummaryValue]]] = []
        try:
            for step in group:
                assert step.fire is not None
                job = run_id(spec.name, step.fire)
                runs.append(self._run_of(spec, step.fire, job, None))
                decided += [*entries(step.before), fired(step.fire, job)]
        except PayloadError:
            return self._commit_each(context, state, group)
        new = state.recording(tuple(decided), context.now)
        recorded = self._transaction(context, state, new)
        if (
            sum(len(op.data) for op in recorded.ops if isinstance(op, SetData))
            + len(group) * MAX_HANDLE_BYTES
            > MAX_ZNODE_BYTES
        ):
            half = len(group) // 2
            state = self._commit_steps(context, state, group[:half])
            return self._commit_steps(context, state, group[half:])
        try:
            self.jobs.submit_many(runs, fence=recorded.fence, with_ops=recorded.ops)
        except OutcomeUnknown:
            raise  # the handles may be published: their payloads are kept
        except (HandleExists, JobFinished, JobQuarantined):
            return self._commit_each(context, state, group)
        except ZkStoreError as exc:
            _conflict(exc)
            raise
        self._step("fire:committed")
        for step, (definition, _) in zip(group, runs, strict=True):
            logger.info(
                "schedule %s: fired its window %s as job %s",
                spec.name,
                step.fire,
                definition.job_id,
            )
            assert step.fire is not None
            report.fired.append((step.fire, definition.job_id))
        report.recorded += sum(e.count for e in decided if e.outcome != FIRED)
        assert state.version is not None
        return new.with_version(state.version + 1)

    def _commit_each(
        self, context: _Round, state: ScheduleState, group: list[Step]
    ) -> ScheduleState:
        for step in group:
            state = self._commit_step(context, state, step)
        return state

    def _commit_step(self, context: _Round, state: ScheduleState, step: Step) -> ScheduleState:
        """Commit one step of the plan; the state as it is after it."""
        spec, report = context.spec, context.report
        before = entries(step.before)
        if step.fire is None:
            return self._record(context, state, before)
        window = step.fire
        job = run_id(spec.name, window)
        previous = None if spec.concurrency == ALLOW else self._previous(state.last_run)
        admission = admit(spec.concurrency, previous)
        if not admission.fire:
            assert admission.reason is not None
            return self._skip(context, state, before, window, admission.reason)
        try:
            definition, summary = self._run_of(spec, window, job, admission.replace)
        except ForeignPython:
            raise  # written by another Python: a leader that can read it will fire the window
        except PayloadError as exc:  # damaged for good: every window would fail the same way
            reason = f"the schedule's definition cannot be read: {exc}"
            logger.error("schedule %s: window %s not fired: %s", spec.name, window, reason)
            return self._skip(context, state, before, window, reason)
        new = state.recording((*before, fired(window, job)), context.now)
        cancel = self._cancel_ops(admission.replace, spec.name, job, window, context.now)
        recorded = self._transaction(context, state, new)
        try:  # the one way a job is made (invariant 1, the publish's fences), with the window
            self.jobs.submit(
                definition,
                summary=summary,
                fence=recorded.fence,
                with_ops=(*recorded.ops, *cancel),
            )
        except OutcomeUnknown:
            raise  # the handle may be published: its payload is kept
        except (HandleExists, JobFinished, JobQuarantined) as exc:
            if isinstance(exc, HandleExists) and exc.path != self.layout.job_handle(job):
                raise TryAgain(f"the previous run's cancel changed meanwhile: {exc}") from exc
            return self._taken(context, state, before, window)
        except ZkStoreError as exc:
            _conflict(exc)
            raise
        self._step("fire:committed")
        logger.info("schedule %s: fired its window %s as job %s", spec.name, window, job)
        report.fired.append((window, job))
        report.recorded += sum(entry.count for entry in before)
        assert state.version is not None
        return new.with_version(state.version + 1)

    def _transaction(
        self, context: _Round, state: ScheduleState, new: ScheduleState
    ) -> Transaction:
        spec = context.spec
        assert spec.version is not None and state.version is not None
        return build_fire(
            self.schedules.layout,
            spec.name,
            spec_version=spec.version,
            state=new,
            state_version=state.version,
            leader=context.leader,
        )

    def _record(
        self, context: _Round, state: ScheduleState, decided: tuple[HistoryEntry, ...]
    ) -> ScheduleState:
        """Record decisions that create no run (one transaction, fenced)."""
        new = state.recording(decided, context.now)
        transaction = self._transaction(context, state, new)
        assert state.version is not None
        version, name = state.version, context.spec.name
        try:
            commit_settled(
                self.zk,
                list(transaction.ops),
                fence=transaction.fence,
                applied=lambda: self._state_version(name) not in (None, version),
            )
        except ZkStoreError as exc:
            _conflict(exc)
            raise
        self._step("fire:recorded")
        context.report.recorded += sum(e.count for e in decided if e.outcome != FIRED)
        return new.with_version(version + 1)

    def _skip(
        self,
        context: _Round,
        state: ScheduleState,
        before: tuple[HistoryEntry, ...],
        window: datetime,
        reason: str,
    ) -> ScheduleState:
        """Record ``window`` as skipped with ``reason`` (after ``before``)."""
        context.report.skipped.append((window, reason))
        return self._record(context, state, (*before, skipped(window, reason)))

    def _taken(
        self,
        context: _Round,
        state: ScheduleState,
        before: tuple[HistoryEntry, ...],
        window: datetime,
    ) -> ScheduleState:
        """The run's job id exists (current, finished or quarantined): the window was fired
        already (the state was lost or reset), or another job took the id."""
        name = context.spec.name
        job = run_id(name, window)
        summary = self._summary_of(job)
        problem = (
            "its summary names another schedule or window"
            if summary is None or not is_run_of(summary, name, window)
            else self._not_a_copy(context.spec, job)
        )
        if problem is not None:
            reason = (
                f"blocked: the job id {job} is taken by a job that is not this schedule's run "
                f"({problem}); remove it (zkstore jobs cancel {job}, or zkstore quarantine "
                f"purge {job} --yes, then zkstore jobs forget {job}) and a later window fires"
            )
            logger.error("schedule %s: window %s: %s", name, window, reason)
            return self._skip(context, state, before, window, reason)
        logger.warning("schedule %s: its run %s of %s exists already", name, job, window)
        context.report.fired.append((window, job))
        return self._record(context, state, (*before, fired(window, job)))

    def _not_a_copy(self, spec: ScheduleSpec, job: str) -> str | None:
        """Why the live job ``job`` is not this schedule's run, or None if it is: its payload
        verifies as the job's (its prefix, size, sha256 and signature, which only a holder of
        the cluster key can make for that id) and holds the schedule's code. A job's code
        that planted the id (its own key signs nothing of another id) is not taken for the
        run. A finished or quarantined run is judged by its summary (the leader's records)."""
        try:
            handle = self.jobs.handles.get_handle(job)
        except HandleNotFound:
            return None  # finished or quarantined: its summary said it is the run
        try:
            found = self.jobs.verify_definition(job, handle)
        except PayloadError as exc:
            return f"its definition does not verify: {exc}"
        mine = self._definition(spec)
        if (found.code, found.source, found.function_name) != (
            mine.code,
            mine.source,
            mine.function_name,
        ):
            return "its code is not the schedule's"
        return None

    # -- reads -----------------------------------------------------------------------------------

    def _summary_of(self, job: str) -> dict[str, SummaryValue] | None:
        """The summary the job was submitted with (its handle, its result's or its quarantine
        entry's copy); None if unreadable."""
        return stored_summary(self.zk, self.layout, job)

    def _previous(self, job: str | None) -> PreviousRun | None:
        if job is None:
            return None
        current, result, quarantined = self.zk.exists_many(
            [
                self.layout.job_handle(job),
                self.layout.result(job),
                self.layout.quarantine_entry(job),
            ]
        )
        if result is not None:
            return PreviousRun(job, live=False, state="ended")
        if quarantined is not None:
            return PreviousRun(job, live=False, state="in quarantine")
        if current is not None and not is_marked(current):
            return PreviousRun(job, live=True, state="not ended yet")
        return PreviousRun(job, live=False, state="gone")

    def _state_version(self, name: str) -> int | None:
        stat = self.zk.exists(self.schedules.layout.schedule_state(name))
        return None if stat is None else int(stat.version)

    # -- the run's definition --------------------------------------------------------------------

    def _definition(self, spec: ScheduleSpec) -> JobDefinition:
        """The schedule's verified definition (read once per version of it)."""
        handle = spec.handle
        key = f"{handle.uri} {handle.sha256}"
        cached = self._definitions.get(spec.name)
        if cached is None or cached[0] != key:
            cached = (key, self.schedules.definition(spec))
            self._definitions[spec.name] = cached
        return cached[1]

    def _run_of(
        self, spec: ScheduleSpec, window: datetime, job: str, replaced: str | None
    ) -> tuple[JobDefinition, dict[str, SummaryValue]]:
        """The run's copy of the definition (its own id and submission time; published under
        the run's prefix, signed with its key, by the job store) and what its summary adds: its
        schedule and window, what it waits for."""
        copy = replace(self._definition(spec), job_id=job, submitted=utc_now())
        summary: dict[str, SummaryValue] = dict(run_summary(spec.name, window))
        if spec.after_schedule is not None:
            summary[AFTER_SCHEDULE] = spec.after_schedule
        if replaced is not None:  # in the run options (fleet protocol 4), else flat as before
            run = copy.run.with_after(tuple(self._replacing(replaced)))
            summary.update(run.summary_fields(typed=getattr(copy, "typed_run", False)))
        return copy, summary

    def _replacing(self, previous: str) -> list[Dependency]:
        """What a ``replace`` run waits for: the previous run to end, and whatever that run
        was itself still waiting for (a previous run that has not started yet is waiting for
        the one before it, whose driver may still be stopping: cancelling the waiting one ends
        it at once, and the new run must not start beside that driver). Only the runs without
        a result yet are kept, so the chain stays as short as the runs still alive."""
        chain = [Dependency(previous, ENDED)]
        summary = stored_summary(self.zk, self.layout, previous) or {}
        try:
            inherited = [d for d in RunSpec.from_summary(summary).after if d.state == ENDED]
        except ValueError:
            inherited = []
        ended = self.zk.exists_many([self.layout.result(d.job_id) for d in inherited])
        chain += [d for d, stat in zip(inherited, ended, strict=True) if stat is None]
        return chain[:MAX_AFTER]

    def _cancel_ops(
        self, previous: str | None, name: str, job: str, window: datetime, now: datetime
    ) -> tuple[Op, ...]:
        """``--concurrency replace``: the ops that ask the previous run to stop (none if it
        was asked already), requested at ``now``: the firing leader's time (ZooKeeper's), from
        which the leader counts the run's cancel grace."""
        if previous is None:
            return ()
        job_dir, cancel = self.layout.job_dir(previous), self.layout.cancel(previous)
        dir_stat, cancel_stat = self.zk.exists_many([job_dir, cancel])
        if cancel_stat is not None:
            return ()
        request = CancelRequest(
            version=None,
            requested=to_millisecond(now),
            by=f"schedule {name}",
            reason=f"replaced by {job}, its run of {format_time(window)} (--concurrency replace)",
        )
        ops: list[Op] = [] if dir_stat is not None else [Create(job_dir)]
        return (*ops, *request_pins.made_ops(cancel, request.to_bytes(), pinned=self.pinned()))


def _together(spec: ScheduleSpec, planned: list[Step]) -> list[list[Step]]:
    """The plan's steps as transactions: with ``--concurrency allow``, up to
    :data:`TRANSACTION_WINDOWS` fires in a row in one (a step that only records, and every
    step of ``forbid`` and ``replace``, whose admission reads the previous run, alone)."""
    groups: list[list[Step]] = []
    for step in planned:
        previous = groups[-1] if groups else None
        if (
            spec.concurrency == ALLOW
            and step.fire is not None
            and previous is not None
            and previous[-1].fire is not None
            and len(previous) < TRANSACTION_WINDOWS
        ):
            previous.append(step)
        else:
            groups.append([step])
    return groups


def _conflict(exc: ZkStoreError) -> None:
    """Turn a lost race (the state or the spec changed since they were read: another write of
    this leader's, an operator's pause, a deleted schedule) into a re-plan."""
    if isinstance(exc, VersionConflict | HandleNotFound):
        raise TryAgain(f"the schedule changed while it was fired: {exc}") from exc
