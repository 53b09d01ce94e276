"""The duties of one leadership grant, all performed on the daemon's loop thread.

On grant: publish ``R/leader/info``, watch ``R/currentJobs``, then reconcile every job: finish the
cleanup of dirty results first, then adopt jobs whose driver is alive and start the others. After
that, every event about a job (a submission, a driver's ``running`` node going away, a cancel
request, a timer, a driver slot freed) reconciles that job again. Every write carries the
leadership's fence, so a deposed leader's writes fail inside ZooKeeper.

The leader never reads a payload. A definition is verified once, by the driver, before it is
unpickled; a driver that cannot load it reports BROKEN, and that is what quarantines the job (a
handle that does not even parse is quarantined from the snapshot, without a driver).

One job never blocks the others (invariant 6): each job's decision and action run under a guard
that turns anything unexpected into "this job is broken" (a log line with the job id, and
quarantine); only an outage or the loss of leadership stops a batch.
"""

from __future__ import annotations

import functools
import itertools
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
from zkstore.jobs.snapshot import JobSnapshot, Listing, read_listing, read_snapshots
from zkstore.jobs.states import PENDING
from zkstore.ops import Create, Op

logger = logging.getLogger(__name__)

JOB_CHANGED = "job-changed"

#: Jobs read, decided and acted on together: big enough to pipeline, small enough that the first
#: jobs of a large backlog start within moments of a takeover.
BATCH = 256


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
        self._to_watch: dict[str, bool] = {}

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
        for job_id in itertools.islice(self._waiting_for_slot, max(0, free)):
            self.post(job_id)  # it keeps its place in the queue until it starts

    def job_done(self, job_id: str) -> None:
        """The job's cleanup finished: forget it."""
        self._dirty.discard(job_id)
        self._waiting_for_slot.pop(job_id, None)
        self.coordinators.pop(job_id, None)
        self._watchers.pop(job_id, None)

    def reconcile_all(self) -> int:
        """Look at every job that may need something; returns how many were looked at."""
        listing = read_listing(self.cluster.zk, self.cluster.layout)
        ids = set(listing.current_jobs) | set(listing.job_dirs) | self._dirty
        self.reconcile(ids, listing=listing)
        return len(ids)

    def reconcile(self, job_ids: Iterable[str], *, listing: Listing | None = None) -> None:
        """Decide and act for each job, in batches; stops as soon as leadership ends.

        Dirty results come first (their cleanup was interrupted), then jobs in id order. A
        large backlog is handled :data:`BATCH` jobs at a time, each batch with pipelined reads,
        one pipelined round of initializations and of watches, so that the first jobs start
        long before the last ones have been read.
        """
        ids = sorted(set(job_ids), key=lambda job_id: (job_id not in self._dirty, job_id))
        for first in range(0, len(ids), BATCH):
            if not self.active:
                return
            self._reconcile_batch(ids[first : first + BATCH], listing)
        self.slot_freed()

    def _reconcile_batch(self, ids: list[str], listing: Listing | None) -> None:
        """Driver slots are counted once and taken as starts are decided, so that a batch of
        pending jobs never starts more than ``--max-drivers``. New jobs are initialized in one
        pipelined round and decided again at once, without a re-read."""
        snapshots = read_snapshots(self.cluster.zk, self.cluster.layout, ids, listing=listing)
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
        for snapshot in self._initialize(fresh, listing):
            action = self._decide(snapshot, running, now)
            running += isinstance(action, Start)
            plans.append((snapshot, action))
        plans.sort(key=lambda plan: not isinstance(plan[1], CleanUp))
        try:
            for snapshot, action in plans:
                if not self.active:
                    return
                self._apply(snapshot, action)
        finally:
            self._arm_watches()

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
        if isinstance(action, Start) and not self._may_start(job.job_id, running):
            action = NoSlot(reason=f"queued behind {len(self._waiting_for_slot)} job(s)")
        if isinstance(action, NoSlot):
            self._waiting_for_slot.setdefault(job.job_id, None)
        else:
            self._waiting_for_slot.pop(job.job_id, None)
        return action

    def _may_start(self, job_id: str, running: int) -> bool:
        """First come, first served: a free slot goes to the jobs waiting longest for one."""
        free = self.settings.max_drivers - running
        if job_id in self._waiting_for_slot:
            return job_id in itertools.islice(self._waiting_for_slot, max(0, free))
        return len(self._waiting_for_slot) < free

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

    def _initialize(self, jobs: list[JobSnapshot], listing: Listing | None) -> list[JobSnapshot]:
        """Create the status (PENDING) of new jobs in one pipelined round; returns their
        snapshots as they now are. A job somebody else initialized is looked at again."""
        if not jobs:
            return []
        zk, layout = self.cluster.zk, self.cluster.layout
        if listing is None:
            zk.create_many([layout.job_dir(job.job_id) for job in jobs])  # existing ones: fine
        statuses = [self.actions.status(job, state=PENDING, attempt=0, failures=0) for job in jobs]
        transactions: list[list[Op]] = []
        for job, status in zip(jobs, statuses, strict=True):
            ops: list[Op] = [Create(layout.status(job.job_id), status.to_bytes())]
            if listing is not None and job.job_id not in listing.job_dirs:
                ops.insert(0, Create(layout.job_dir(job.job_id)))  # one round trip, not two
            transactions.append(ops)
        errors = zk.commit_many(transactions, fence=self.fence)
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

    def watch_job(self, job_id: str, *, driver: bool = True) -> None:
        """Wake up when a cancel is requested (and, with ``driver``, when the job's driver goes
        away). Armed at the end of the batch, for every job of the batch in one pipelined
        round; re-armed per look."""
        self._to_watch[job_id] = self._to_watch.get(job_id, False) or driver

    def _arm_watches(self) -> None:
        layout = self.cluster.layout
        watches: dict[str, Callable[[object], None]] = {}
        for job_id, driver in sorted(self._to_watch.items()):
            watcher = self._watchers.get(job_id)
            if watcher is None:
                watcher = self._watchers[job_id] = functools.partial(self._on_watch, job_id)
            watches[layout.cancel(job_id)] = watcher
            if driver:
                watches[layout.running(job_id)] = watcher
        self._to_watch.clear()
        if watches:
            self.cluster.zk.watch_many(watches)

    def _on_watch(self, job_id: str, event: object) -> None:
        self.post(job_id)
