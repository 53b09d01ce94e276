"""How the leader carries out each action of :mod:`recovery.decide` for one job.

Every write is fenced on the leadership. Nothing here decides: an action is applied as it was
decided, and the job is looked at again through an event (never by calling back into the
reconcile loop, which would decide with a stale count of driver slots).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from recovery.coordinator import JobCoordinator
from recovery.decide import (
    Action,
    Adopt,
    CleanUp,
    Finish,
    QuarantineJob,
    ReleaseDead,
    Restart,
    Start,
    StopLaunch,
    Wait,
)
from recovery.launcher import DriverLauncher
from zkstore.errors import HandleExists
from zkstore.jobs.cleanup import clean_up
from zkstore.jobs.records import JobStatus
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import RESTARTING, STARTING, SUCCEEDED
from zkstore.ops import Check, Delete
from zkstore.strict import utc_now

if TYPE_CHECKING:
    from recovery.leader import LeaderProcess

logger = logging.getLogger(__name__)

HOST = socket.gethostname()

CLEANUP_RETRY = 2.0


class JobActions:
    """The leader's hands: one method per action, each for one job."""

    def __init__(self, leader: LeaderProcess, launcher: DriverLauncher) -> None:
        self.leader = leader
        self.cluster = leader.cluster
        self.fence = leader.fence
        self.settings = leader.settings
        self.launcher = launcher
        self._adoptions_reported: set[tuple[str, int]] = set()
        self._handlers: dict[type[Action], Callable[[JobSnapshot, Any], None]] = {
            Start: self._start,
            Adopt: self._adopt,
            ReleaseDead: self._release_dead,
            StopLaunch: self._stop_launch,
            Restart: self._restart,
            Finish: self._finish,
            CleanUp: self._clean_up,
            QuarantineJob: self._quarantine,
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
        stamp: dict[str, Any] = {"updated": utc_now(), "leader": self.leader.settings.daemon_id}
        return replace(base, **{**stamp, **changes, "version": None})

    # -- one method per action -----------------------------------------------------------------

    def _start(self, job: JobSnapshot, action: Start) -> None:
        assert job.status is not None and job.status.version is not None
        status = self.status(job, state=STARTING, attempt=action.attempt, not_before=None)
        written = self.cluster.state.put_status(
            job.job_id, status, expected_version=job.status.version, fence=self.fence
        )
        assert written.version is not None
        coordinator = self.leader.coordinators.setdefault(
            job.job_id, JobCoordinator(job.job_id, self.leader.loop)
        )
        coordinator.lazy_initialize(self.leader.context, self.leader.driver_exited)
        try:
            launch = self.launcher.launch(job.job_id, action.attempt, written.version)
        except OSError as exc:
            logger.error("job %s: cannot start a driver: %s", job.job_id, exc)
            self.leader.post(job.job_id)
            return
        coordinator.attach(launch)
        self.leader.watch_job(job.job_id)
        logger.info(
            "job %s: attempt %d started on %s, driver pid %d (%s); log %s",
            job.job_id,
            action.attempt,
            HOST,
            launch.process.pid,
            action.reason,
            launch.log_path,
        )

    def _adopt(self, job: JobSnapshot, action: Adopt) -> None:
        self.leader.watch_job(job.job_id)
        running = job.running
        assert running is not None
        key = (job.job_id, running.attempt)
        ours = self.leader.local(job.job_id).launched_attempt == running.attempt
        if key not in self._adoptions_reported and not ours:
            self._adoptions_reported.add(key)
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
        self.leader.post(job.job_id)

    def _wait(self, job: JobSnapshot, action: Wait) -> None:
        self.leader.watch_job(job.job_id, driver=job.driver_present or self._launched(job))
        if action.until is not None:
            delay = (action.until - datetime.now(UTC)).total_seconds()
            self.leader.post_at(time.monotonic() + max(0.0, delay), job.job_id)

    def _launched(self, job: JobSnapshot) -> bool:
        """True if this daemon started a driver of the job's current attempt."""
        launched = self.leader.local(job.job_id).launched_attempt
        return launched is not None and job.status is not None and launched == job.status.attempt

    def _stop_launch(self, job: JobSnapshot, action: StopLaunch) -> None:
        coordinator = self.leader.coordinators.get(job.job_id)
        if coordinator is not None and coordinator.live_launch is not None:
            logger.warning("job %s: %s; killing it", job.job_id, action.reason)
            coordinator.live_launch.process.kill()

    def _restart(self, job: JobSnapshot, action: Restart) -> None:
        assert job.status is not None and action.not_before is not None
        not_before = action.not_before.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        status = self.status(
            job,
            state=RESTARTING,
            failures=action.failures,
            lost=action.lost,
            last_error=action.error,
            not_before=not_before,
        )
        self.cluster.state.put_status(
            job.job_id, status, expected_version=job.status.version, fence=self.fence
        )
        last = action.error.splitlines()[-1] if action.error else "no error recorded"
        logger.warning("job %s: %s (%s)", job.job_id, action.reason, last)
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
                fence=self.fence,
            )
        logger.log(
            logging.INFO if action.outcome == SUCCEEDED else logging.WARNING,
            "job %s: %s after %d attempt(s)%s%s",
            job.job_id,
            action.outcome,
            attempts,
            f" (last on {job.outcome.host})" if job.outcome and job.outcome.host else "",
            f": {action.error.splitlines()[-1]}" if action.error else "",
        )
        self._clean(job.job_id)

    def _quarantine(self, job: JobSnapshot, action: QuarantineJob) -> None:
        self.cluster.quarantine.move_in(job.job_id, action.reason, fence=self.fence)
        logger.warning(
            "job %s: quarantined at attempt %s (%s)", job.job_id, job.attempt, action.reason
        )

    def _clean_up(self, job: JobSnapshot, action: CleanUp) -> None:
        self._clean(job.job_id)

    def _clean(self, job_id: str) -> None:
        if clean_up(self.cluster, job_id, fence=self.fence, keep_logs=self.settings.keep_logs):
            self.leader.job_done(job_id)
            logger.info("job %s: cleaned up (result kept in results/)", job_id)
        else:
            self.leader.post_at(time.monotonic() + CLEANUP_RETRY, job_id)
