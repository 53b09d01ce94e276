"""How the leader carries out each action of :mod:`recovery.leader.decide` for one job.

Every write is fenced on the leadership. Nothing here decides: an action is applied as it was
decided, and the job is looked at again through an event (never by calling back into the
reconcile loop, which would decide with a stale view of the fleet's slots).

A Start places the attempt: the status (STARTING, the attempt, the member) and the assignment
``R/assignments/<member>/<job>`` are written in one transaction, and the member launches the
driver. When an attempt ends (restart, finish, quarantine), its assignment is removed, which frees
the member's slot. A failed or lost attempt's artifacts are released when the restart is
recorded, and again (whatever is left) before the next attempt is placed. A finished job's result
is recorded (and its slot freed) at once; its cleanup is kept in :attr:`JobActions.finished`
until the leader has placed what the freed slots can take (:mod:`recovery.leader.finished`).

Why one module: one method per action of :mod:`.decide`, all on one fenced writer, so that
each action reads side by side with the decision that asked for it and every write carries the
same fence; a module per action would repeat the writer and hide that they share it.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from recovery.leader.decide import (
    Action,
    Adopt,
    CleanUp,
    EndAttempt,
    Finish,
    NoSlot,
    QuarantineJob,
    RecordStopped,
    ReleaseSlot,
    Restart,
    Start,
    Wait,
)
from recovery.leader.finished import RETRY, FinishedJobs
from recovery.leader.role import LeaderRole
from recovery.leader.signednotify import SignedNotify
from zkstore.cluster import quotas
from zkstore.cluster.cleanup import clean_up
from zkstore.errors import HandleExists, HandleNotFound, NotLeader, ZkStoreError
from zkstore.jobs import history
from zkstore.jobs.definition import ORIGIN
from zkstore.jobs.history import AttemptEntry
from zkstore.jobs.job_artifacts import release_dead_attempts
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.stops import EndRequest
from zkstore.lifecycle import outbox
from zkstore.lifecycle.lifecycle_ops import EndNode, clear_end_ops, end_ops, stopped_ops
from zkstore.protocol import ATTEMPT_PROVENANCE, PINNED_REQUESTS
from zkstore.records.fleet_records import Assignment
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import RESTARTING, STARTING, STOPPED, SUCCEEDED, TIMED_OUT
from zkstore.records.result_records import JobResult
from zkstore.records.strict import time_text, to_millisecond
from zkstore.zookeeper.ops import Create, Delete, Op, SetData, without_existing
from zkstore.zookeeper.throttle import Throttle

__all__ = ["HOST", "JobActions"]

logger = logging.getLogger(__name__)

HOST = socket.gethostname()


class JobActions:
    """The leader's hands: one method per action, each for one job."""

    def __init__(self, leader: LeaderRole) -> None:
        self.leader = leader
        self.cluster = leader.cluster
        self.fence = leader.fence
        self.settings = leader.settings
        #: the attempt of each live job whose driver was said to run (dropped with the job)
        self._said_running: dict[str, int] = {}
        self._reasons: list[tuple[str, list[Op]]] = []
        #: each placement of the batch: the job, the action, its ops, and the history's entry
        #: when the ops make the history (else the entry is told after, by a write of its own)
        self._starts: list[tuple[JobSnapshot, Start, list[Op], AttemptEntry]] = []
        #: the jobs whose results this leadership recorded, their cleanups still to run
        self.finished = FinishedJobs()
        #: the quota ZooKeeper enforces on each job's node, made with its first placement
        self.quotas = quotas.Quotas(self.cluster.zk, self.cluster.layout)
        #: an event not sent (its job's bound reached) is said once a minute per job
        self._refusals = Throttle(logger)
        #: the jobs' own notification URLs, as their signed definitions say them
        self._signed_notify = SignedNotify(self.cluster.jobs)
        self._handlers: dict[type[Action], Callable[[JobSnapshot, Any], None]] = {
            Start: self._start,
            Adopt: self._adopt,
            Restart: self._restart,
            Finish: self._finish,
            CleanUp: self._clean_up,
            QuarantineJob: self._quarantine,
            ReleaseSlot: lambda job, _: self._release_assignment(job),
            EndAttempt: self._end_attempt,
            RecordStopped: self._record_stopped,
        }

    def apply(self, job: JobSnapshot, action: Action) -> None:
        """Carry out ``action`` for ``job``; raises what the store raises."""
        if isinstance(action, Wait):
            self._wait(job, action)
            return
        handler = self._handlers.get(type(action))
        if handler is not None:
            handler(job, action)

    def status(self, job: JobSnapshot, **changes: object) -> JobStatus:
        """The job's status with ``changes``, stamped by this leader (not yet written)."""
        base = job.status or JobStatus(version=None)
        stamp: dict[str, Any] = {
            "updated": self.leader.clock.moment(),
            "leader_id": self.leader.settings.daemon_id,
        }
        return replace(base, **{**stamp, **changes, "version": None})

    # -- one method per action -----------------------------------------------------------------

    def _start(self, job: JobSnapshot, action: Start) -> None:
        assert job.status is not None and job.status.version is not None
        assert action.daemon_id is not None
        layout = self.cluster.layout
        if action.attempt > 1:  # a resumed attempt never sees what a dead one left
            try:
                release_dead_attempts(self.cluster.artifacts(job.job_id), fence=self.fence)
            except BaseException:
                self.leader.fleet.untake(action.daemon_id, job.job_id)
                raise
        ended: dict[str, Any] = {}
        if action.ended is not None:
            previous = action.ended
            ended = {"failures": previous.failures, "lost": previous.lost}
            ended["last_error"] = previous.error
            ended["streak_failures"] = previous.streak_failures
            ended["streak_lost"] = previous.streak_lost
            ended["ended"] = previous.ended
            logger.warning("job %s: %s (%s)", job.job_id, action.reason, _last_line(previous.error))
        if action.resume:  # a fresh count: the user resumed it
            ended = {"failures": 0, "lost": 0, "streak_failures": 0, "streak_lost": 0}
            ended["ended"] = None
            logger.info("job %s: resumed (attempt %d)", job.job_id, action.attempt)
        status = self.status(
            job,
            state=STARTING,
            attempt=action.attempt,
            daemon_id=action.daemon_id,
            not_before=None,
            reason=None,
            **ended,
        )
        status_path = layout.status(job.job_id)
        assignment = Assignment(
            version=None,
            job_id=job.job_id,
            daemon_id=action.daemon_id,
            attempt=action.attempt,
            status_version=0 if action.new else job.status.version + 1,
            assigned=status.updated,
        )
        path = layout.assignment(action.daemon_id, job.job_id)
        placed = AttemptEntry(action.attempt, action.daemon_id, status.updated)
        if job.handle is not None and self.leader.protocol.allows(ATTEMPT_PROVENANCE):
            # where the code came from (the file given at submit or resume), else what it runs
            target = job.summary.get(ORIGIN) or job.summary.get("entry")
            placed = replace(
                placed,
                definition=job.handle.sha256,
                target=target if isinstance(target, str) else None,
            )
        ops: list[Op] = [
            Create(status_path, status.to_bytes())
            if action.new  # a new job's: its status is made by its placement
            else SetData(status_path, status.to_bytes(), job.status.version),
            Create(path, assignment.to_bytes()),
            *self._clear_end_ops(job),
        ]
        if action.make_dir:
            ops.insert(0, Create(layout.job_dir(job.job_id)))
        if action.ended is not None:
            ops += self._notify(job, *self._attempt_event(job, action.ended))
        fleet = self.leader.fleet
        if action.daemon_id not in fleet.assignments:
            # The member's directory is made by the member as it registers; a placement may come
            # first (or after the directory of an earlier incarnation was collected).
            ops.insert(1, Create(layout.member_assignments(action.daemon_id)))
            fleet.assignments[action.daemon_id] = set()
        elif job.job_id in fleet.assignments[action.daemon_id]:
            ops.insert(1, Delete(path))  # an earlier attempt's, on the same member
        told = action.attempt == 1  # a first placement makes the history in its transaction
        if told:
            ops.append(history.first_placement_op(layout.history(job.job_id), placed))
            if self.quotas.ready():  # its first driver runs under the quota, never before it
                ops += quotas.create_ops(layout, job.job_id, self.quotas.quota)
        self._starts.append((job, action, ops, placed))

    def flush_starts(self) -> None:
        """Write the batch's placements in one pipelined round; a placement that found the job
        or the member changed is looked at again."""
        starts, self._starts = self._starts, []
        if not starts:
            return
        errors = self.cluster.zk.commit_many([ops for _, _, ops, _ in starts], fence=self.fence)
        layout = self.cluster.layout
        for (job, action, ops, placed), first in zip(starts, errors, strict=True):
            assert action.daemon_id is not None
            error, told = self._committed_again(
                job, action.daemon_id, ops, action.attempt == 1, first
            )
            if error is not None:
                self.leader.fleet.untake(action.daemon_id, job.job_id)
                if isinstance(error, NotLeader):
                    raise error
                logger.info("job %s: not placed (%s); looking again", job.job_id, error)
                self.leader.post(job.job_id)
                continue
            if action.new:
                logger.info("job %s: submitted (%s)", job.job_id, job.name)
            self.leader.fleet.assigned(action.daemon_id, job.job_id)
            path = layout.assignment(action.daemon_id, job.job_id)
            self.leader.watch_job(job.job_id, layout.running(job.job_id), path)
            self.leader.expect_start(job, action.attempt)
            if action.ended is not None and job.status is not None:
                self._remember_end(job, _ending(job, action.ended), action.ended.error)
            if not told:
                self._remember(job.job_id, replace(placed, placed=self.leader.clock.moment()))
            logger.info(
                "job %s: attempt %d placed on %s (%s)",
                job.job_id,
                action.attempt,
                action.daemon_id,
                action.reason,
            )

    def _committed_again(
        self,
        job: JobSnapshot,
        daemon_id: str,
        ops: list[Op],
        told: bool,
        error: ZkStoreError | None,
    ) -> tuple[ZkStoreError | None, bool]:
        """A placement's error, and whether its ops told the history (``told``: they were
        meant to, as a first placement's are). One that
        failed only on a node there already that it can do without is committed again without
        it: the job's node (made since the listing that said it was not, by a control change,
        a stop or a schedule's run), the member's directory of assignments (made by the member
        as it registered, after the leader read the fleet) and the history (planted: a first
        placement never finds one; the entry is then told by the write that replaces it)."""
        layout = self.cluster.layout
        optional = {layout.job_dir(job.job_id), layout.history(job.job_id)}
        optional.add(layout.member_assignments(daemon_id))
        optional |= quotas.optional_paths(layout, job.job_id)
        while (again := without_existing(ops, error, optional)) is not None:
            ops, there = again
            optional.discard(there)
            told = told and there != layout.history(job.job_id)
            error = self.cluster.zk.commit_many([ops], fence=self.fence)[0]
        return error, told

    def _adopt(self, job: JobSnapshot, action: Adopt) -> None:
        running = job.running
        assert running is not None
        self.leader.watch_job(job.job_id, self.cluster.layout.running(job.job_id))
        if action.until is not None:  # one of its limits passes then
            delay = (action.until - self.leader.clock.now()).total_seconds()
            self.leader.post_at(time.monotonic() + max(0.0, delay), job.job_id)
        self.report_running(job.job_id, running)

    def forget(self, job_id: str) -> None:
        """The job's cleanup is done: nothing of it is kept."""
        self._said_running.pop(job_id, None)

    def report_running(self, job_id: str, running: RunningInfo) -> None:
        """Say once per attempt that its driver runs."""
        if self._said_running.get(job_id) != running.attempt:
            self._said_running[job_id] = running.attempt
            logger.info(
                "job %s: attempt %d runs (driver pid %d on %s)",
                job_id,
                running.attempt,
                running.pid,
                running.host,
            )

    def _wait(self, job: JobSnapshot, action: Wait) -> None:
        layout = self.cluster.layout
        paths = []
        if job.driver_present or (job.status is not None and job.status.state == STARTING):
            paths.append(layout.running(job.job_id))
        member = job.status.daemon_id if job.status is not None else None
        if member is not None and job.status is not None and job.status.state == STARTING:
            paths.append(layout.assignment(member, job.job_id))
        self.leader.watch_job(job.job_id, *paths)
        if isinstance(action, NoSlot):
            self._note_reason(job, action.reason)
        if action.until is not None:
            delay = (action.until - self.leader.clock.now()).total_seconds()
            self.leader.post_at(time.monotonic() + max(0.0, delay), job.job_id)

    def _note_reason(self, job: JobSnapshot, reason: str) -> None:
        """Say why a job waits, in its status (written with the batch's other reasons)."""
        status = job.status
        if status is None or status.version is None or status.reason == reason:
            return
        updated = self.status(job, reason=reason)
        path = self.cluster.layout.status(job.job_id)
        self._reasons.append((job.job_id, [SetData(path, updated.to_bytes(), status.version)]))

    def flush_reasons(self) -> None:
        """Write the waiting reasons of the batch in one pipelined round (a conflict is fine:
        the job changed, and will be looked at again)."""
        reasons, self._reasons = self._reasons, []
        if not reasons:
            return
        errors = self.cluster.zk.commit_many([ops for _, ops in reasons], fence=self.fence)
        if any(isinstance(error, NotLeader) for error in errors):
            raise NotLeader("leadership lost while noting why jobs wait")

    def _restart(self, job: JobSnapshot, action: Restart) -> None:
        assert job.status is not None and job.status.version is not None
        assert action.not_before is not None
        not_before = to_millisecond(action.not_before)
        status = self.status(
            job,
            state=RESTARTING,
            failures=action.failures,
            lost=action.lost,
            last_error=action.error,
            not_before=not_before,
            daemon_id=None,
            streak_failures=action.streak_failures,
            streak_lost=action.streak_lost,
            ended=action.ended,
        )
        ops: list[Op] = [
            SetData(self.cluster.layout.status(job.job_id), status.to_bytes(), job.status.version),
            *self._clear_end_ops(job),
            *self._notify(job, *self._attempt_event(job, action)),
        ]
        self.cluster.zk.commit(ops + self._unassign_ops(job), fence=self.fence)
        self._unassigned(job)
        self._remember_end(job, _ending(job, action), action.error or action.reason)
        logger.warning("job %s: %s (%s)", job.job_id, action.reason, _last_line(action.error))
        try:  # at once, not only before the next start: the backoff may be long
            release_dead_attempts(self.cluster.artifacts(job.job_id), fence=self.fence)
        finally:
            self._wait(job, Wait(until=action.not_before))

    def _finish(self, job: JobSnapshot, action: Finish) -> None:
        attempts = job.status.attempt if job.status is not None else 0
        events = [(action.outcome, action.error)]
        if action.ended == TIMED_OUT:  # its last attempt timed out: said as well
            events.insert(0, (outbox.TIMED_OUT, action.error))
        notify = self._notify(job, *events)
        # The assignment goes with the result (one write to the log, not two), unless the
        # fleet knew of one that is gone already: then the result alone.
        unassign = self._unassign_ops(job)

        recorded: list[JobResult] = []

        def record(extra_ops: list[Op]) -> bool:
            try:
                created = self.cluster.results.create_dirty(
                    job.job_id,
                    action.outcome,
                    attempts=attempts,
                    extra_ops=extra_ops,
                    finished=self.leader.clock.moment(),  # ZooKeeper's time, as retention's
                    error=action.error,
                    name=job.name,
                    summary=job.summary,
                    # dated by ZooKeeper, as the leader counted it (not by its writer)
                    cancel=None
                    if job.cancel is None or job.cancel_asked is None
                    else replace(job.cancel, requested=job.cancel_asked),
                    log=job.log,
                    daemon=_last_daemon(job),
                    failures=job.status.failures if job.status is not None else None,
                    lost=job.status.lost if job.status is not None else None,
                    fence=self.fence,
                )
            except HandleExists:  # recorded already (by us before a crash, or a previous leader)
                return False
            recorded.append(created)
            return True

        try:
            unassigned = record([*notify, *unassign]) and bool(unassign)
        except HandleNotFound as exc:
            if not unassign or exc.path != unassign[0].path:
                raise
            record(notify)
            unassigned = True
        if unassigned:
            self._unassigned(job)
        logger.log(
            logging.INFO if action.outcome == SUCCEEDED else logging.WARNING,
            "job %s: %s after %d attempt(s)%s%s",
            job.job_id,
            action.outcome,
            attempts,
            f" (last on {job.outcome.host})" if job.outcome and job.outcome.host else "",
            f": {action.error.splitlines()[-1]}" if action.error else "",
        )
        ended = self._end_entry(job, action.outcome, action.error)
        result = recorded[0] if recorded else None
        self.finished.add(
            job, lambda: self._clean(job, unassigned=unassigned, ended=ended, result=result)
        )

    def _quarantine(self, job: JobSnapshot, action: QuarantineJob) -> None:
        self.cluster.quarantine.move_in(
            job.job_id,
            action.reason,
            fence=self.fence,
            extra_ops=self._notify(job, (outbox.QUARANTINED, action.reason)),
        )
        if not job.driver_present:  # a live driver's slot stays counted until it is gone
            self._release_assignment(job)
        self.leader.job_quarantined(job.job_id)
        logger.warning(
            "job %s: quarantined at attempt %s (%s)", job.job_id, job.attempt, action.reason
        )

    def _end_attempt(self, job: JobSnapshot, action: EndAttempt) -> None:
        """Write the ``end`` request (fenced on the leadership and on the attempt's status
        version); the member carries it out, the job is looked at again when it did."""
        assert job.status is not None and job.status.version is not None
        if job.end_foreign:
            # No request of ours can be written over it; its member ends the driver as the
            # job's own request (recovery.member.ender), and the end is counted then.
            logger.warning(
                "job %s: attempt %d is not ended by the leader: its end node is the job's own, "
                "made so that the cluster cannot replace it (its member ends the driver)",
                job.job_id,
                action.attempt,
            )
            self._wait(job, Wait())
            return
        grace = self.settings.end_grace if action.grace is None else action.grace
        request = EndRequest(
            version=None,
            attempt=action.attempt,
            reason=action.why,
            requested=self.leader.clock.moment(),
            grace_ms=round(grace * 1000),
            detail=action.detail,
            leader=self.settings.daemon_id,
        )
        ops = end_ops(
            self.cluster.layout,
            job.job_id,
            request,
            status_version=job.status.version,
            existing=_end_node(job),
            pin=self.leader.protocol.allows(PINNED_REQUESTS),
        )
        self.cluster.zk.commit(ops, fence=self.fence)
        logger.warning(
            "job %s: ending attempt %d (%s: %s)",
            job.job_id,
            action.attempt,
            action.why,
            action.detail,
        )
        self._wait(job, Wait())

    def _record_stopped(self, job: JobSnapshot, action: RecordStopped) -> None:
        """STOPPED: the status, no assignment (the slot is free), the ``end`` request gone; all
        checked against a ``running`` node."""
        assert job.status is not None and job.status.version is not None
        status = self.status(
            job,
            state=STOPPED,
            daemon_id=None,
            not_before=None,
            reason=None,
            last_error=action.error or job.status.last_error,
        )
        ops = stopped_ops(
            self.cluster.layout,
            job.job_id,
            status.to_bytes(),
            status_version=job.status.version,
            end=_end_node(job),
        )
        events = self._notify(job, (outbox.STOPPED, action.error or action.reason))
        note = self._stopped_note(job, action)  # read before the commit: nothing after it fails
        self.cluster.zk.commit(ops + self._unassign_ops(job) + events, fence=self.fence)
        self._unassigned(job)
        self._remember_end(job, history.STOPPED, note)
        logger.warning(
            "job %s: STOPPED at attempt %d (%s)", job.job_id, job.status.attempt, action.reason
        )

    def _stopped_note(self, job: JobSnapshot, action: RecordStopped) -> str:
        """A stopped attempt's line in the history: who stopped it (``jobs stop``) and the
        checkpoint it resumes from, then what the decision said (an outcome it ended with)."""
        stop = job.stop
        who = "stopped" if stop is None else f"stopped by {stop.by or 'someone'} (jobs stop)"
        if stop is not None and stop.reason:
            who += f": {stop.reason}"
        newest = job.newest_checkpoint or self.cluster.checkpoints(job.job_id).newest_handle()
        number = newest.summary.get("checkpoint_id") if newest is not None else None
        where = (
            "no checkpoint: it resumes from the start"
            if newest is None
            else f"it resumes from checkpoint {number} (taken {time_text(newest.created)})"
        )
        return f"{who}; {where}" + (f"; {action.error}" if action.error else "")

    # -- the job's history, for people (never blocks what it tells of) ---------------------------

    def _remember(self, job_id: str, entry: AttemptEntry) -> None:
        path = self.cluster.layout.history(job_id)
        history.note_attempt(self.cluster.zk, path, entry, fence=self.fence, job_id=job_id)

    def _remember_end(self, job: JobSnapshot, outcome: str, note: str | None) -> None:
        """The end of the job's current attempt (none if it never had one)."""
        entry = self._end_entry(job, outcome, note)
        if entry is not None:
            self._remember(job.job_id, entry)

    def _tell_end(self, job_id: str, entry: AttemptEntry) -> None:
        """Tell the end of the last attempt in the history of a job whose cleanup did not
        finish, while the record is there (a cleanup that got as far as deleting the records
        kept the history, with the end, beside the logs)."""
        try:
            there = self.cluster.zk.exists(self.cluster.layout.history(job_id)) is not None
        except ZkStoreError:  # unreachable: the write says why, or fails the same way
            there = True
        if there:
            self._remember(job_id, entry)

    def _end_entry(self, job: JobSnapshot, outcome: str, note: str | None) -> AttemptEntry | None:
        """The history's entry for the end of the job's current attempt (None: it never had
        one), with the driver JVM its outcome says it had."""
        status = job.status
        if status is None or status.attempt < 1:
            return None
        daemon = status.daemon_id or "?"
        outcome = outcome if outcome in history.ENDINGS else history.FAILED
        reported = job.outcome if job.outcome and job.outcome.attempt == status.attempt else None
        jvm = reported.jvm if reported is not None else None  # what its driver said it had
        return AttemptEntry(
            status.attempt,
            daemon,
            status.updated,
            outcome,
            self.leader.clock.moment(),
            note,
            jvm=jvm,
        )

    # -- notifications ---------------------------------------------------------------------------

    def _attempt_event(self, job: JobSnapshot, ended: Restart) -> list[tuple[str, str | None]]:
        """The event of an attempt that ended and is retried: timed out, lost or failed (none
        for an end that counts as neither: a stop resumed before it was recorded)."""
        status = job.status
        if status is None:
            return []
        if ended.ended == TIMED_OUT:
            return [(outbox.TIMED_OUT, ended.error)]
        if ended.lost > status.lost:
            return [(outbox.ATTEMPT_LOST, ended.error)]
        if ended.failures > status.failures:
            return [(outbox.ATTEMPT_FAILED, ended.error)]
        return []

    def _notify(self, job: JobSnapshot, *events: tuple[str, str | None]) -> list[Op]:
        """The outbox entries of ``events`` (state, reason) of the job's current attempt, for
        the daemon's ``--notify`` and the job's own URL: committed with the state change. An
        event past the job's (or the outbox's) bound is not written, and said so."""
        signed = self._signed_notify.url(job)
        urls: list[str | None] = [*self.settings.notify, signed]
        targets = outbox.notification_targets(urls)
        if not targets:
            return []
        counts = self.leader.outbox_counts
        admitted = [e for e in events if counts.admit(job.job_id, e[0], len(targets))]
        for state, _ in sorted(set(events) - set(admitted)):
            own = signed or next(iter(targets), None)
            if own is not None:  # said on the job: the user's URL first, else the daemon's
                self.leader.conditions.refused(
                    job.job_id,
                    state,
                    own,
                    f"{counts.waiting(job.job_id)} of its events wait undelivered (at most "
                    f"{counts.per_job} a job: the leader's --notify-max-per-job)",
                )
            self._refusals.log(
                job.job_id,
                logging.WARNING,
                "job %s: its %s event is not sent: %d of its events wait undelivered in the "
                "outbox (at most %d a job, --notify-max-per-job; %d in all)",
                job.job_id,
                state,
                counts.waiting(job.job_id),
                counts.per_job,
                counts.total,
            )
        attempt = job.status.attempt if job.status is not None else 0
        at = self.leader.clock.moment()
        return outbox.notification_ops(
            self.cluster.layout,
            [
                outbox.Event(
                    job_id=job.job_id,
                    attempt=attempt,
                    state=state,
                    at=at,
                    reason=reason,
                    name=job.name,
                    cluster=self.cluster.config.cluster_id,
                )
                for state, reason in admitted
            ],
            targets,
            created=at,
        )

    def _clear_end_ops(self, job: JobSnapshot) -> list[Op]:
        """Remove the ``end`` request of an attempt that is over (it was read with the job)."""
        return clear_end_ops(self.cluster.layout, job.job_id, _end_node(job))

    def _clean_up(self, job: JobSnapshot, action: CleanUp) -> None:
        self.leader.requests_seen.forget(job.job_id)
        kept = self.finished.take(job.job_id)  # this leadership recorded its result
        if kept is not None:
            kept()
        else:
            self._clean(job)

    def _clean(
        self,
        job: JobSnapshot,
        *,
        unassigned: bool = False,
        ended: AttemptEntry | None = None,
        result: JobResult | None = None,
    ) -> None:
        """Clean up the job; ``ended``: the end of its last attempt, not yet in its history,
        which goes beside its logs with the rest, written to the record only if the records
        stay (the cleanup is not done: the record is kept then, and told); ``result``: the one
        just recorded, not read again."""
        if not unassigned:
            self._release_assignment(job)
        done = False
        try:
            kept = None
            if ended is not None:
                path = self.cluster.layout.history(job.job_id)
                kept = history.with_end(self.cluster.zk, path, ended, job_id=job.job_id)
            done = clean_up(
                self.cluster,
                job.job_id,
                fence=self.fence,
                keep_logs=self.settings.keep_logs,
                history=kept,
                result=result,
                quota=self.quotas.ready(),
                now=self.leader.clock.moment(),  # ZooKeeper's time, as retention's
            )
        finally:
            if ended is not None and not done:
                self._tell_end(job.job_id, ended)
        if done:
            self.leader.job_done(job.job_id)
            logger.info("job %s: cleaned up (result kept in results/)", job.job_id)
        else:
            self.leader.post_at(time.monotonic() + RETRY, job.job_id)

    # -- assignments -----------------------------------------------------------------------------

    def _unassign_ops(self, job: JobSnapshot) -> list[Op]:
        """The op that removes the job's assignment, if it has one."""
        member = job.status.daemon_id if job.status is not None else None
        if member is None or job.job_id not in self.leader.fleet.assignments.get(member, ()):
            return []
        return [Delete(self.cluster.layout.assignment(member, job.job_id))]

    def _unassigned(self, job: JobSnapshot) -> None:
        member = job.status.daemon_id if job.status is not None else None
        if member is not None:
            self.leader.fleet.release(member, job.job_id)

    def _release_assignment(self, job: JobSnapshot) -> None:
        ops = self._unassign_ops(job)
        if ops:
            errors = self.cluster.zk.commit_many([ops], fence=self.fence)
            if isinstance(errors[0], NotLeader):
                raise errors[0]
        self._unassigned(job)


def _ending(job: JobSnapshot, ended: Restart) -> str:
    """How the attempt that ``ended`` describes ended, in the history's words."""
    status = job.status
    if status is not None and ended.lost > status.lost:
        return history.LOST
    return history.FAILED


def _last_line(error: str | None) -> str:
    return error.splitlines()[-1] if error else "no error recorded"


def _last_daemon(job: JobSnapshot) -> str | None:
    """The daemon the job's last attempt was placed on (None if it is not placed now: a job
    cancelled while it waited to restart)."""
    return job.status.daemon_id if job.status is not None else None


def _end_node(job: JobSnapshot) -> EndNode | None:
    """The job's ``end`` node to replace or remove: at its own version, at -1 (any) for one
    that could not be read or parsed (made by the job's identity, or garbage), None if there
    is none."""
    if job.end_foreign:
        return None  # the job's own, which the cluster may not delete: left where it is
    if job.end is not None:
        assert job.end.version is not None
        return EndNode(job.end.version, pinned=job.end_pinned)
    return EndNode(-1) if "end" in job.errors else None
