"""The duties of one leadership grant, all performed on the daemon's loop thread.

On grant: publish ``R/leader/info``, watch ``R/currentJobs``, then reconcile every job: finish the
cleanup of dirty results first, then adopt jobs whose driver is alive and start the others. After
that, every event about a job (a submission, a driver's ``running`` node going away, a cancel
request, a timer, a driver slot freed) reconciles that job again. Every write carries the
leadership's fence, so a deposed leader's writes fail inside ZooKeeper.

One job never blocks the others (invariant 6): each job's decision and action run under a guard
that turns anything unexpected into "this job is broken" (a log line with the job id, and
quarantine); only an outage or the loss of leadership stops a batch.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime

from recovery.actions import JobActions
from recovery.coordinator import JobCoordinator
from recovery.decide import Action, CleanUp, Initialize, Local, NoSlot, QuarantineJob, Start, decide
from recovery.election import LeaderElection
from recovery.launcher import DriverLauncher, Launch
from recovery.loop import Event, LeaderContext, Leadership, Loop
from recovery.settings import DaemonSettings
from zkstore.cluster import Cluster
from zkstore.errors import ConflictError, NotLeader, StoreUnavailable
from zkstore.jobs.graph import JobGraphWatch
from zkstore.jobs.snapshot import JobSnapshot, read_snapshots
from zkstore.jobs.states import PENDING
from zkstore.ops import Create

logger = logging.getLogger(__name__)

JOB_CHANGED = "job-changed"


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
        self.election = election
        self.coordinators = coordinators
        self.context = LeaderContext(loop, leadership)
        self.actions = JobActions(self, launcher)
        self._watch: JobGraphWatch | None = None
        self._dirty: set[str] = set()
        #: jobs waiting for a driver slot, in the order they started waiting
        self._waiting_for_slot: dict[str, None] = {}
        #: one watcher function per job, so that re-arming never stacks up watchers in kazoo
        self._watchers: dict[str, Callable[[object], None]] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Take over: publish who leads, watch submissions, recover every job."""
        started = time.monotonic()
        self.election.publish_info()
        for coordinator in self.coordinators.values():
            coordinator.lazy_initialize(self.context, self.driver_exited)
        self._watch = self.cluster.jobs.watch(self.post)
        self._dirty = self.cluster.results.needing_attention()
        count = self.reconcile_all()
        logger.warning(
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

    def post(self, *args: str) -> None:
        """Look at the job (the last argument) again on the loop's next turn; any thread."""
        self.loop.post(Event(JOB_CHANGED, args[-1]))

    def post_at(self, when: float, job_id: str) -> None:
        self.loop.post_at(when, Event(JOB_CHANGED, job_id))

    def driver_exited(self, launch: Launch) -> None:
        """A driver this daemon started is gone (on the loop thread, fenced): its slot is free."""
        self.post(launch.job_id)
        self.slot_freed()

    def slot_freed(self) -> None:
        """Offer the freed driver slots to the jobs waiting longest for one."""
        free = self.settings.max_drivers - self.drivers_running()
        for job_id in list(self._waiting_for_slot)[: max(0, free)]:
            del self._waiting_for_slot[job_id]
            self.post(job_id)

    def job_done(self, job_id: str) -> None:
        """The job's cleanup finished: forget it."""
        self._dirty.discard(job_id)
        self._waiting_for_slot.pop(job_id, None)
        self.coordinators.pop(job_id, None)
        self._watchers.pop(job_id, None)

    def reconcile_all(self) -> int:
        """Look at every job that may need something; returns how many were looked at."""
        zk, layout = self.cluster.zk, self.cluster.layout
        ids = set(zk.children(layout.current_jobs)) | set(zk.children(layout.jobs)) | self._dirty
        self.reconcile(ids)
        return len(ids)

    def reconcile(self, job_ids: Iterable[str]) -> None:
        """Decide and act for each job; stops as soon as leadership ends.

        Driver slots are counted once and taken as starts are decided, so that a batch of
        pending jobs (a new leader's recovery) never starts more than ``--max-drivers``. New jobs
        are initialized in one pipelined round and decided again at once, without a re-read.
        """
        ids = sorted(set(job_ids))
        if not ids or not self.active:
            return
        snapshots = read_snapshots(self.cluster.zk, self.cluster.layout, ids)
        now = datetime.now(UTC)
        running = self.drivers_running()
        plans: list[tuple[JobSnapshot, Action]] = []
        fresh: list[JobSnapshot] = []
        for snapshot in snapshots.values():
            action = self._decide(snapshot, running, now)
            if isinstance(action, Initialize):
                fresh.append(snapshot)
                continue
            running += isinstance(action, Start)
            plans.append((snapshot, action))
        for snapshot in self._initialize(fresh):
            action = self._decide(snapshot, running, now)
            running += isinstance(action, Start)
            plans.append((snapshot, action))
        plans.sort(key=lambda plan: not isinstance(plan[1], CleanUp))  # dirty results first
        for snapshot, action in plans:
            if not self.active:
                return
            self._apply(snapshot, action)
        self.slot_freed()

    def drivers_running(self) -> int:
        return sum(1 for c in self.coordinators.values() if c.live_launch is not None)

    def local(self, job_id: str, running: int = 0) -> Local:
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

    # -- guarded decisions and actions ---------------------------------------------------------

    def _decide(self, job: JobSnapshot, running: int, now: datetime) -> Action:
        try:
            action = decide(job, self.local(job.job_id, running), self.settings, now)
        # The guard of invariant 6: a record combination nobody foresaw is this job's problem.
        except Exception as exc:
            logger.exception("job %s: cannot decide what to do", job.job_id)
            return QuarantineJob(reason=f"internal error deciding: {type(exc).__name__}: {exc}")
        if isinstance(action, NoSlot):
            self._waiting_for_slot.setdefault(job.job_id, None)
        return action

    def _apply(self, job: JobSnapshot, action: Action) -> None:
        """Act for one job. Leadership lost: stop; outage: raise (it is nobody's job's fault);
        a conflict: look again; anything else: the job is broken, the others go on."""
        try:
            self.actions.apply(job, action)
        except NotLeader:
            logger.warning("job %s: leadership lost while acting; stopping", job.job_id)
            self.leadership.revoke()
        except StoreUnavailable:
            raise
        except ConflictError as exc:
            logger.info("job %s: %s; looking again", job.job_id, exc)
            self.post(job.job_id)
        except Exception as exc:
            logger.exception("job %s: %s failed", job.job_id, type(action).__name__)
            self._quarantine_broken(job, f"{type(action).__name__} failed: {exc!r}")

    def _quarantine_broken(self, job: JobSnapshot, reason: str) -> None:
        try:
            self.actions.apply(job, QuarantineJob(reason=reason))
        except (NotLeader, StoreUnavailable):
            raise
        except Exception:
            logger.exception("job %s: could not be quarantined either", job.job_id)

    def _initialize(self, jobs: list[JobSnapshot]) -> list[JobSnapshot]:
        """Create the status (PENDING) of new jobs in one pipelined round; returns their
        snapshots as they now are. A job somebody else initialized is looked at again."""
        if not jobs:
            return []
        zk, layout = self.cluster.zk, self.cluster.layout
        zk.create_many([layout.job_dir(job.job_id) for job in jobs])  # existing ones are fine
        statuses = [self.actions.status(job, state=PENDING, attempt=0, failures=0) for job in jobs]
        errors = zk.commit_many(
            [
                [Create(layout.status(job.job_id), status.to_bytes())]
                for job, status in zip(jobs, statuses, strict=True)
            ],
            fence=self.fence,
        )
        initialized = []
        for job, status, error in zip(jobs, statuses, errors, strict=True):
            if isinstance(error, NotLeader):
                raise error
            if error is not None:
                logger.info("job %s: not initialized (%s); looking again", job.job_id, error)
                self.post(job.job_id)
                continue
            logger.info("job %s: submitted (%s)", job.job_id, job.name)
            initialized.append(replace(job, status=status.with_version(0)))
        return initialized

    def watch_job(self, job_id: str) -> None:
        """Wake up when the job's driver goes away or a cancel is requested (re-armed per look)."""
        watcher = self._watchers.get(job_id)
        if watcher is None:
            watcher = self._watchers[job_id] = functools.partial(self._on_watch, job_id)
        layout = self.cluster.layout
        self.cluster.zk.exists_many([layout.running(job_id), layout.cancel(job_id)], watch=watcher)

    def _on_watch(self, job_id: str, event: object) -> None:
        self.post(job_id)
