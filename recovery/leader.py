"""The duties of one leadership grant, all performed on the daemon's loop thread.

On grant: publish ``R/leader/info``, watch ``R/currentJobs``, then reconcile every job: finish the
cleanup of dirty results first, then adopt jobs whose driver is alive and start the others
(definitions verified in parallel, with a bound). After that, every event about a job (a
submission, a driver's ``running`` node going away, a cancel request, a timer) reconciles that
job again. Every write carries the leadership's fence, so a deposed leader's writes fail inside
ZooKeeper.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from recovery.coordinator import JobCoordinator
from recovery.decide import (
    Action,
    Adopt,
    CleanUp,
    Finish,
    Initialize,
    Local,
    QuarantineJob,
    ReleaseDead,
    Restart,
    Start,
    StopLaunch,
    Wait,
    decide,
)
from recovery.election import LeaderElection
from recovery.launcher import DriverLauncher, Launch
from recovery.loop import Event, LeaderContext, Leadership, Loop
from recovery.settings import DaemonSettings
from zkstore.cluster import Cluster
from zkstore.errors import (
    ConflictError,
    CorruptHandle,
    HandleExists,
    HandleNotFound,
    NotLeader,
    PayloadError,
)
from zkstore.handle import utc_now
from zkstore.jobs.cleanup import clean_up
from zkstore.jobs.graph import JobGraphWatch
from zkstore.jobs.records import PENDING, RESTARTING, STARTING, JobStatus
from zkstore.jobs.snapshot import JobSnapshot, read_snapshots
from zkstore.ops import Check, Delete

logger = logging.getLogger(__name__)

JOB_CHANGED = "job-changed"
CLEANUP_RETRY = 2.0
VERIFY_PARALLELISM = 16


class LeaderProcess:
    """What one leadership does. Create one per grant; :meth:`stop` it on revocation."""

    def __init__(
        self,
        cluster: Cluster,
        settings: DaemonSettings,
        leadership: Leadership,
        loop: Loop,
        launcher: DriverLauncher,
        election: LeaderElection,
        coordinators: dict[str, JobCoordinator],
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.leadership = leadership
        self.fence = leadership.fence
        self.loop = loop
        self.launcher = launcher
        self.election = election
        self.coordinators = coordinators
        self.context = LeaderContext(loop, leadership)
        self._watch: JobGraphWatch | None = None
        self._watchers: dict[str, Callable[[object], None]] = {}
        self._dirty: set[str] = set()
        self._reported: set[tuple[str, str]] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Take over: publish who leads, watch submissions, recover every job."""
        started = time.monotonic()
        self.election.publish_info()
        for coordinator in self.coordinators.values():
            coordinator.lazy_initialize(self.context, self.driver_exited)
        self._watch = self.cluster.jobs.watch(
            lambda kind, job: self.loop.post(Event(JOB_CHANGED, job))
        )
        self._dirty = {r.job_id for r in self.cluster.results.dirty()}
        count = self.reconcile_all()
        logger.info(
            "leadership taken: %d job(s) recovered in %.2f s", count, time.monotonic() - started
        )

    def stop(self) -> None:
        self.leadership.revoke()
        if self._watch is not None:
            self._watch.stop()
        for coordinator in self.coordinators.values():
            coordinator.revoke()

    @property
    def active(self) -> bool:
        return self.leadership.active

    # -- events --------------------------------------------------------------------------------

    def driver_exited(self, launch: Launch) -> None:
        """A driver this daemon started is gone (called on the loop thread, fenced)."""
        self.reconcile([launch.job_id])

    def reconcile_all(self) -> int:
        """Look at every job that may need something; returns how many were looked at."""
        zk, layout = self.cluster.zk, self.cluster.layout
        ids = set(zk.children(layout.current_jobs)) | set(zk.children(layout.jobs)) | self._dirty
        self.reconcile(ids)
        return len(ids)

    def reconcile(self, job_ids: Iterable[str]) -> None:
        """Decide and act for each job; stops as soon as leadership ends."""
        ids = sorted(set(job_ids))
        if not ids or not self.active:
            return
        snapshots = read_snapshots(self.cluster.zk, self.cluster.layout, ids)
        now = datetime.now(UTC)
        # Driver slots are counted once and taken as starts are decided, so that a batch of
        # pending jobs (a new leader's recovery) never starts more than --max-drivers.
        running = self._drivers_running()
        plans: list[tuple[JobSnapshot, Action]] = []
        for snap in snapshots.values():
            action = decide(snap, self._local(snap.job_id, running), self.settings, now)
            running += isinstance(action, Start)
            plans.append((snap, action))
        plans.sort(key=lambda plan: not isinstance(plan[1], CleanUp))  # dirty results first
        plans = self._verify_starts(plans)
        for snapshot, action in plans:
            if not self.active:
                return
            self._apply(snapshot, action)

    def _drivers_running(self) -> int:
        return sum(1 for c in self.coordinators.values() if c.live_launch is not None)

    def _local(self, job_id: str, running: int) -> Local:
        coordinator = self.coordinators.get(job_id)
        launch = coordinator.launch if coordinator is not None else None
        if launch is None:
            return Local(drivers_running=running)
        return Local(
            launched_attempt=launch.attempt,
            launched_pid=launch.process.pid,
            launch_alive=launch.alive,
            launch_age=launch.age,
            exit_code=launch.exit_code,
            drivers_running=running,
        )

    def _verify_starts(
        self, plans: list[tuple[JobSnapshot, Action]]
    ) -> list[tuple[JobSnapshot, Action]]:
        """Verify the definition of every job about to start, in parallel; broken ones go to
        quarantine instead (without ever unpickling them here)."""
        starts = [snap.job_id for snap, action in plans if isinstance(action, Start)]
        if not starts:
            return plans

        def verify(job_id: str) -> str | None:
            try:
                self.cluster.jobs.handles.verify(job_id)
            except (PayloadError, CorruptHandle) as exc:
                return f"{type(exc).__name__}: {exc}"
            except HandleNotFound:
                return None
            return None

        with ThreadPoolExecutor(max_workers=min(VERIFY_PARALLELISM, len(starts))) as pool:
            problems = dict(zip(starts, pool.map(verify, starts), strict=True))
        return [
            (
                snap,
                QuarantineJob(reason=problem) if (problem := problems.get(snap.job_id)) else action,
            )
            for snap, action in plans
        ]

    # -- actions -------------------------------------------------------------------------------

    def _apply(self, job: JobSnapshot, action: Action) -> None:
        handlers: dict[type[Action], Callable[[JobSnapshot, Any], None]] = {
            Initialize: self._initialize,
            Start: self._start,
            Adopt: self._adopt,
            ReleaseDead: self._release_dead,
            Wait: self._wait,
            StopLaunch: self._stop_launch,
            Restart: self._restart,
            Finish: self._finish,
            CleanUp: self._clean_up,
            QuarantineJob: self._quarantine,
        }
        handler = handlers.get(type(action))
        if handler is None:
            return
        try:
            handler(job, action)
        except NotLeader:
            logger.warning("job %s: leadership lost while acting; stopping", job.job_id)
            self.leadership.revoke()
        except ConflictError as exc:
            # Somebody changed the job meanwhile: look at it again with fresh eyes.
            logger.info("job %s: %s; looking again", job.job_id, exc)
            self.loop.post(Event(JOB_CHANGED, job.job_id))

    def _status(self, job: JobSnapshot, **changes: object) -> JobStatus:
        base = job.status or JobStatus(version=None)
        values = {**base.as_dict(), "updated": utc_now(), "leader": self.settings.daemon_id}
        values.update(changes)
        values["version"] = None
        return JobStatus(**values)

    def _initialize(self, job: JobSnapshot, action: Initialize) -> None:
        status = self._status(job, state=PENDING, attempt=0, failures=0)
        self.cluster.state.put_status(job.job_id, status, expected_version=None, fence=self.fence)
        logger.info("job %s: submitted (%s)", job.job_id, job.name)
        self.reconcile([job.job_id])

    def _start(self, job: JobSnapshot, action: Start) -> None:
        assert job.status is not None and job.status.version is not None
        status = self._status(job, state=STARTING, attempt=action.attempt, not_before=None)
        written = self.cluster.state.put_status(
            job.job_id, status, expected_version=job.status.version, fence=self.fence
        )
        assert written.version is not None
        coordinator = self.coordinators.setdefault(
            job.job_id, JobCoordinator(job.job_id, self.loop)
        )
        coordinator.lazy_initialize(self.context, self.driver_exited)
        try:
            launch = self.launcher.launch(job.job_id, action.attempt, written.version)
        except OSError as exc:
            logger.error("job %s: cannot start a driver: %s", job.job_id, exc)
            self.loop.post(Event(JOB_CHANGED, job.job_id))
            return
        coordinator.attach(launch)
        self._watch_job(job.job_id)
        logger.info("job %s: attempt %d started (%s)", job.job_id, action.attempt, action.reason)

    def _adopt(self, job: JobSnapshot, action: Adopt) -> None:
        self._watch_job(job.job_id)
        running = job.running
        assert running is not None
        key = (job.job_id, f"adopt-{running.attempt}")
        if (
            key not in self._reported
            and self._local(job.job_id, 0).launched_attempt != running.attempt
        ):
            self._reported.add(key)
            logger.info(
                "job %s: adopted attempt %d (driver pid %d on %s)",
                job.job_id,
                running.attempt,
                running.pid,
                running.host,
            )

    def _release_dead(self, job: JobSnapshot, action: ReleaseDead) -> None:
        assert job.status is not None and job.status.version is not None
        layout = self.cluster.layout
        self.cluster.zk.commit(
            [
                Check(layout.status(job.job_id), job.status.version),
                Delete(layout.running(job.job_id)),
            ],
            fence=self.fence,
        )
        logger.info("job %s: %s", job.job_id, action.reason)
        self.reconcile([job.job_id])

    def _wait(self, job: JobSnapshot, action: Wait) -> None:
        self._watch_job(job.job_id)
        if action.until is not None:
            delay = (action.until - datetime.now(UTC)).total_seconds()
            self.loop.post_at(time.monotonic() + max(0.0, delay), Event(JOB_CHANGED, job.job_id))

    def _stop_launch(self, job: JobSnapshot, action: StopLaunch) -> None:
        coordinator = self.coordinators.get(job.job_id)
        if coordinator is not None and coordinator.live_launch is not None:
            logger.warning("job %s: %s; killing it", job.job_id, action.reason)
            coordinator.live_launch.process.kill()

    def _restart(self, job: JobSnapshot, action: Restart) -> None:
        assert job.status is not None and action.not_before is not None
        not_before = action.not_before.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        status = self._status(
            job,
            state=RESTARTING,
            failures=action.failures,
            last_error=action.error,
            not_before=not_before,
        )
        self.cluster.state.put_status(
            job.job_id, status, expected_version=job.status.version, fence=self.fence
        )
        logger.warning("job %s: %s (%s)", job.job_id, action.reason, action.error)
        self._wait(job, Wait(until=action.not_before))

    def _finish(self, job: JobSnapshot, action: Finish) -> None:
        attempts = job.status.attempt if job.status is not None else 0
        # HandleExists: recorded already (by us before a crash, or by a previous leader).
        with contextlib.suppress(HandleExists):
            self.cluster.results.create_dirty(
                job.job_id,
                action.outcome,
                attempts=attempts,
                error=action.error,
                name=job.name,
                summary=job.summary,
                cancel=job.cancel,
                log=job.log,
                fence=self.fence,
            )
        self._dirty.add(job.job_id)
        logger.info(
            "job %s: %s after %d attempt(s); cleaning up", job.job_id, action.outcome, attempts
        )
        self._clean(job.job_id)

    def _quarantine(self, job: JobSnapshot, action: QuarantineJob) -> None:
        self.cluster.quarantine.move_in(job.job_id, action.reason, fence=self.fence)
        logger.warning("job %s: quarantined (%s)", job.job_id, action.reason)

    def _clean_up(self, job: JobSnapshot, action: CleanUp) -> None:
        self._clean(job.job_id)

    def _clean(self, job_id: str) -> None:
        if clean_up(self.cluster, job_id, fence=self.fence):
            self._dirty.discard(job_id)
            self.coordinators.pop(job_id, None)
            self._watchers.pop(job_id, None)
            logger.info("job %s: cleaned up (result kept in results/)", job_id)
        else:
            self.loop.post_at(time.monotonic() + CLEANUP_RETRY, Event(JOB_CHANGED, job_id))

    def _watch_job(self, job_id: str) -> None:
        """Wake up when the job's driver goes away or a cancel is requested (re-armed per look)."""
        watcher = self._watchers.get(job_id)
        if watcher is None:
            watcher = functools.partial(self._on_watch, job_id)
            self._watchers[job_id] = watcher
        layout = self.cluster.layout
        self.cluster.zk.exists_many([layout.running(job_id), layout.cancel(job_id)], watch=watcher)

    def _on_watch(self, job_id: str, event: object) -> None:
        self.loop.post(Event(JOB_CHANGED, job_id))
