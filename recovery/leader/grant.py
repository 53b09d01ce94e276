"""The duties of one leadership grant, all performed on the daemon's loop thread.

On grant: publish ``R/leader/info``, watch ``R/currentJobs`` and the fleet, then reconcile every
job: finish the cleanup of dirty results first, then adopt jobs whose driver is alive and place
the others. After that, every event about a job (a submission, a driver's ``running`` node going
away, a member recording a driver's exit, a cancel request, a timer, a freed slot, a member
joining or leaving) reconciles that job again. Every write carries the leadership's fence, so a
deposed leader's writes fail inside ZooKeeper.

The leader places, members launch (:mod:`recovery.member.fleetmember`): a Start is written as the
attempt's status (STARTING, the member) and its assignment in one transaction. The leader never
reads a payload. A definition is verified once, by the driver, before it is unpickled; a driver that
cannot load it reports BROKEN, and that is what quarantines the job (a handle that does not even
parse is quarantined from the snapshot, without a driver).

One job never blocks the others (invariant 6): each job's decision and action run under a guard
that turns anything unexpected into "this job is broken" (a log line with the job id, and
quarantine); only an outage or the loss of leadership stops a batch.

Why one module: what is left here is one leadership grant's wiring (the fence, the fleet's
view, the watches, the timers, the batch of jobs to reconcile), state that every duty reads on
the one loop thread. The decisions (:mod:`.decide`), the actions (:mod:`.actions`), the
lifecycle, placement, the finished jobs' cleanup and the schedules already live apart.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from recovery.leader.actions import JobActions
from recovery.leader.decide import (
    Action,
    CleanUp,
    Initialize,
    Local,
    NoSlot,
    QuarantineJob,
    Start,
    decide,
)
from recovery.leader.dependency_gate import DependencyGate, Waiting
from recovery.leader.election import LeaderElection
from recovery.leader.job_conditions import JobConditions
from recovery.leader.lifecycle_inputs import job_lifecycle
from recovery.leader.loop import Event, Leadership, Loop
from recovery.leader.notifier import NotificationSender, SenderSettings
from recovery.leader.placement import (
    Fleet,
    MemberChanges,
    read_fleet,
    refresh_warm,
    would_take_warm,
)
from recovery.leader.pool_placement import PoolFull, SlotKept, kept_reason
from recovery.leader.pool_placement import ahead_of as pools_ahead
from recovery.leader.pool_placement import left_over as pools_left_over
from recovery.leader.pool_placement import limit_of as pool_limit
from recovery.leader.pool_placement import look_order as pools_look_order
from recovery.leader.pool_placement import order as pool_order
from recovery.leader.pool_placement import ready as pools_ready
from recovery.leader.pool_placement import refusal as pool_refusal
from recovery.leader.pool_placement import running as pools_running
from recovery.leader.published import SettingsPublisher
from recovery.leader.quiet import QuietAttempts
from recovery.leader.requests_seen import RequestsSeen
from recovery.leader.retention import Retention
from recovery.leader.schedule_firing import ScheduleFiring
from recovery.leader.watches import JOB_CHANGED, Fired, JobWatcher, JobWatches
from recovery.settings import DaemonSettings
from recovery.shared.fleet_view import format_labels
from zkstore.cluster.fleet_protocol import FleetReading
from zkstore.cluster.pools import Pool, read_pools
from zkstore.errors import (
    AccessDenied,
    ConfigError,
    ConflictError,
    CorruptRecord,
    HandleNotFound,
    NewerRecord,
    NotLeader,
    StoreUnavailable,
)
from zkstore.jobs import history
from zkstore.jobs.graph import ADDED, REMOVED, JobGraphWatch
from zkstore.jobs.history import LeaderHistory
from zkstore.jobs.runspec import RunSpec
from zkstore.jobs.snapshot import JobSnapshot, Listing, read_listing, read_snapshots
from zkstore.lifecycle.attempt_limits import Limits
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.outbox import Outbox
from zkstore.lifecycle.outboxcap import OutboxCounts
from zkstore.records.fleet_records import Assignment
from zkstore.records.job_records import Outcome
from zkstore.records.job_states import PENDING, STARTING
from zkstore.zookeeper.clock import ServerClock
from zkstore.zookeeper.ops import Create, Delete, Op, without_existing
from zkstore.zookeeper.watch import NodeWatch

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["BATCH", "CLEANED_KEPT", "FLEET_CHANGED", "POOLS_CHANGED", "TIMER", "LeaderProcess"]

logger = logging.getLogger(__name__)

#: How many cleaned-up jobs the leader remembers, to skip the events their cleanup caused;
#: one forgotten early costs one look.
CLEANED_KEPT = 10_000
#: The data of a look the leader scheduled for itself (:meth:`LeaderProcess.post_at`): a wait's
#: end, a limit's next check, a cleanup to try again.
TIMER = "timer"
FLEET_CHANGED = "fleet-changed"
POOLS_CHANGED = "pools-changed"

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
        election: LeaderElection,
        refused: Counter[str] | None = None,
        raised: Counter[str] | None = None,
    ) -> None:
        """``refused``: the daemon's count of events not sent, ``raised``: of conditions put
        on jobs and schedules (metrics across leaderships)."""
        self.cluster = cluster
        self.settings = settings
        self.leadership = leadership
        self.fence = leadership.fence
        #: ZooKeeper's time: what schedule windows are decided by, not this host's clock
        self.clock = ServerClock(cluster.zk, cluster.layout.leader_clock)
        #: the fleet's protocol: which records the leader may write (zkstore/protocol.py)
        self.protocol = FleetReading(cluster.zk, cluster.layout)
        self.loop = loop
        self.election = election
        self.actions = JobActions(self)
        self.retention = Retention(self)
        self.schedules = ScheduleFiring(self, on_fired=self.job_made)
        self.dependencies = DependencyGate(cluster.zk, cluster.layout)
        self.fleet = Fleet()
        self._fleet_read = False  # see reconcile
        #: whether a member's record changed since read with watches (what a warm JVM needs)
        self.member_changes = MemberChanges()
        self._watches: list[JobGraphWatch | NodeWatch] = []
        self._dirty: set[str] = set()
        #: jobs waiting for a driver slot, in the order they began to wait: their labels
        self._waiting: dict[str, dict[str, str]] = {}
        #: the pools' records (R/pools), read on grant and whenever one changes
        self.pools: dict[str, Pool] = {}
        #: the pool of each job this leadership looked at (its run options)
        self.pool_of: dict[str, str] = {}
        self.watches = JobWatches(cluster.zk, cluster.layout, self, loop.post)
        #: the jobs this leader cleaned up last, oldest first (see :meth:`outlived`)
        self._cleaned: dict[str, None] = {}
        #: when this leadership first saw each attempt's cancel and stop
        self.requests_seen = RequestsSeen()
        #: placed attempts whose driver's start and end leave nothing to decide
        self.quiet = QuietAttempts(self, self.actions.report_running)
        self.notifier: NotificationSender | None = None
        bounds = settings.bounds
        self.outbox_counts = OutboxCounts(bounds.notify_per_job, refused=refused)
        self.published = SettingsPublisher(self, settings.daemon_id)
        #: what the leader does not do for a job, said on it (zkstore/conditions.py)
        self.raised: Counter[str] = raised if raised is not None else Counter()
        self.conditions = JobConditions(cluster.zk, cluster.layout, self.fence, self.raised)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Take over: publish who leads, watch submissions and the fleet, recover every job;
        then (never before) the first retention pass is scheduled."""
        started, since = time.monotonic(), self.clock.moment()
        self.election.publish_info(since)
        self.published.ensure()  # before any job: what clients check against is the leader's
        layout = self.cluster.layout
        # Events are committed with the state changes they report, from the first one on: the
        # outbox exists before any, and its sender delivers what earlier leaders left.
        bounds = self.settings.bounds
        self.notifier = NotificationSender(
            Outbox(self.cluster.zk, layout),
            fence=self.fence,
            settings=SenderSettings(per_host=bounds.notify_per_host),
            destinations=Destinations.parse(bounds.notify_allowed),
            counts=self.outbox_counts,
            on_fence_lost=lambda _: self.leadership.revoke(),
            conditions=self.conditions,
            clock=self.clock.recent,
        ).start()
        self.cluster.zk.ensure_path(layout.pools)
        self._watches = [
            NodeWatch(self.cluster.zk, layout.pools, self._pools_changed, report_first=False),
            self.cluster.jobs.watch(self.post),
            NodeWatch(self.cluster.zk, layout.members, self._fleet_changed, children=True),
            NodeWatch(self.cluster.zk, layout.drained, self._fleet_changed, children=True),
        ]
        self.pools = read_pools(self.cluster.zk, layout)
        count = self.reconcile_all()
        self.election.publish_info(since, recovered=self.clock.moment())
        logger.info(
            "leadership taken: %d job(s) recovered in %.2f s on %d daemon(s)",
            count,
            time.monotonic() - started,
            len(self.fleet.members),
        )
        self.retention.schedule()
        self.schedules.start()

    def stop(self) -> None:
        self.leadership.revoke()
        self.schedules.stop()
        for watch in self._watches:
            watch.stop()
        if self.notifier is not None:
            self.notifier.stop(timeout=0)  # a round under way ends within its POST deadline

    @property
    def active(self) -> bool:
        return self.leadership.active

    # -- events --------------------------------------------------------------------------------

    def post(self, *args: str) -> None:
        """Look at the job (the last argument) again on the loop's next turn; any thread. The
        job listing's events come with their kind first (added, removed)."""
        self.loop.post(Event(JOB_CHANGED, args[-1], data=args[0] if len(args) > 1 else None))

    def post_at(self, when: float, job_id: str) -> None:
        self.loop.post_at(when, Event(JOB_CHANGED, job_id, data=TIMER))

    def _fleet_changed(self, _: object) -> None:
        self.loop.post(Event(FLEET_CHANGED))

    def _pools_changed(self, _: object) -> None:
        self.loop.post(Event(POOLS_CHANGED))

    def pools_changed(self) -> None:
        """A pool was set or deleted (loop thread): read them again and look at every job
        waiting (a limit raised lets some start; a priority changes which first)."""
        self.pools = read_pools(self.cluster.zk, self.cluster.layout)
        for job_id in self._waiting:
            self.post(job_id)

    def fleet_changed(self) -> None:
        """A member joined, left, was drained or undrained (loop thread): the jobs of a member
        that left and the jobs waiting for a place are looked at again."""
        before = self.fleet
        self._read_fleet()
        left = set(before.members) - set(self.fleet.members)
        joined = set(self.fleet.members) - set(before.members)
        for daemon_id in left:
            logger.warning("daemon %s left the fleet", daemon_id)
            for job_id in self.fleet.assignments.get(daemon_id, ()):
                self.post(job_id)
        departed = {d: self.clock.stamp() for d in left if self.fleet.assignments.get(d)}
        if departed or joined:
            self._remember_fleet(departed, joined)
        for daemon_id in set(self.fleet.members) - set(before.members):
            member = self.fleet.members[daemon_id]
            logger.info(
                "daemon %s joined the fleet: %d driver slot(s), labels %s",
                daemon_id,
                member.info.slots,
                format_labels(member.labels) or "none",
            )
        for job_id in self._waiting:
            self.post(job_id)

    def _read_fleet(self) -> None:
        self.fleet = read_fleet(self.cluster.zk, self.cluster.layout)
        self._fleet_read = True
        self.member_changes.unwatched()

    def _remember_fleet(self, departed: dict[str, str], joined: set[str]) -> None:
        """Since when a daemon that left with attempts placed on it is gone (the page shows it
        as lost until they are re-placed); one that joined again is not gone any more."""
        history.remember(
            self.cluster.zk,
            self.cluster.layout.leader_history,
            LeaderHistory,
            lambda record: record.with_departed(departed, joined),
            fence=self.fence,
            what="the daemons seen leaving",
        )

    def slot_freed(self) -> None:
        """Offer free driver slots to the jobs waiting longest for one (first come, first
        served: a waiting job keeps its place until it starts)."""
        if self.fleet.free_slots > 0:
            for job_id in self.fleet.could_start(self._startable()):
                self.post(job_id)

    def job_made(self, job_id: str) -> None:
        """A schedule made the job (a run): look at it, and at the jobs waiting for it."""
        for job in (job_id, *self.dependencies.waiters(job_id)):
            self.post(job)

    def job_quarantined(self, job_id: str) -> None:
        """Look at the jobs waiting for ``job_id`` (``--after``): their reason says so now."""
        for waiting in self.dependencies.waiters(job_id):
            self.post(waiting)

    def triage(self, events: Iterable[Event]) -> set[str]:
        """The jobs a turn's events ask the leader to look at (loop thread), less those it
        need not: the events :meth:`outlived`, and the starts and ends of drivers that leave
        nothing to decide (:mod:`recovery.leader.quiet`), each confirmed with one pipelined
        read. Any other event about such a job in the same turn makes it a look."""
        looks: set[str] = set()
        started: dict[str, JobWatcher] = {}
        ended: dict[str, JobWatcher] = {}
        layout = self.cluster.layout
        for event in events:
            job_id = event.job_id
            if job_id is None or self.outlived(event):
                continue
            fired = event.data
            if isinstance(fired, Fired) and self.quiet.expects(job_id):
                if fired.created == layout.running(job_id):
                    started[job_id] = fired.watcher
                    continue
                if fired.deleted == layout.running(job_id):
                    ended[job_id] = fired.watcher
                    continue
            looks.add(job_id)
        # a start and an end in one turn: the end is what matters
        starts = {j: w for j, w in started.items() if j not in looks and j not in ended}
        ends = {j: w for j, w in ended.items() if j not in looks}
        return looks | self.quiet.confirm_starts(starts) | self.quiet.confirm_exits(ends)

    def expect_start(self, job: JobSnapshot, attempt: int) -> None:
        """``attempt`` of ``job`` was placed: if neither its driver's start nor its end leaves
        anything to decide (no limit to time from its start, no stop asked), each is confirmed
        by :meth:`triage` with a read instead of a look (a dozen reads). Any look at the job
        forgets it."""
        if not job.stop_requested and job_lifecycle(job, self.settings).limits == Limits():
            self.quiet.expect(job.job_id, attempt)

    def outlived(self, event: Event) -> bool:
        """Whether ``event`` tells of a job this leader has cleaned up since (loop thread, where
        the cleanups run): one of its watches of the job's nodes, the job leaving the listing,
        its driver's exit seen by this daemon's member, or a look the leader scheduled for
        itself before (the bound of a wait for a driver's exit, most often). The cleanup's own
        deletes fire the first two (the handle's, the assignment's), the driver exits after its
        outcome, and a look then reads a dozen nodes to find nothing to do: a look per job
        saved. A look asked for by anybody else (:meth:`post`) is never skipped.

        A job submitted again under its id is seen through the listing (added), which makes
        its later removal a look again; a watch of an earlier leadership is never stale.
        """
        data, job_id = event.data, event.job_id
        if job_id is None:
            return False
        if data == ADDED:
            self._cleaned.pop(job_id, None)
            return False
        # its result recorded, its cleanup to come: what it does is all that is left to do
        over = job_id in self._cleaned or job_id in self.actions.finished
        if event.kind != JOB_CHANGED:  # its driver's exit, seen by this daemon's member
            return over
        if data in (REMOVED, TIMER):  # a look it had scheduled for itself: the job has moved on
            return over
        return isinstance(data, Fired) and (over or not self.watches.current(data.watcher))

    def job_done(self, job_id: str) -> None:
        """The job's cleanup finished: forget it."""
        self._cleaned[job_id] = None
        self.quiet.forget(job_id)
        self.actions.forget(job_id)
        while len(self._cleaned) > CLEANED_KEPT:
            self._cleaned.pop(next(iter(self._cleaned)))
        self._dirty.discard(job_id)
        self._waiting.pop(job_id, None)
        self.pool_of.pop(job_id, None)
        self.watches.forget(job_id)
        self.dependencies.forget(job_id)
        for waiting in self.dependencies.waiters(job_id):  # --after: it ended
            self.post(waiting)

    # -- reconciling ---------------------------------------------------------------------------

    def reconcile_all(self) -> int:
        """Look at every job that may need something; returns how many were looked at.

        What may need something: current jobs, jobs with records, jobs whose result is DIRTY
        (the cleanup index) and jobs placed on a member. Finished jobs' results (kept for their
        retention period, possibly very many) are neither listed nor read.
        """
        self.published.ensure()  # the fleet may have been finalized at its protocol meanwhile
        listing = read_listing(self.cluster.zk, self.cluster.layout, results=False)
        self._read_fleet()
        assigned = {job for jobs in self.fleet.assignments.values() for job in jobs}
        self._dirty = set(listing.cleanup)
        ids = set(listing.current_jobs) | set(listing.job_dirs) | self._dirty | assigned
        self.reconcile(ids, listing=listing)
        self._forget_empty_member_dirs()
        return len(ids)

    def reconcile(self, job_ids: Iterable[str], *, listing: Listing | None = None) -> None:
        """Decide and act for each job, in batches; stops as soon as leadership ends.

        Dirty results come first (their cleanup was interrupted), then the jobs waiting longest
        for a slot, then the others by id. A large backlog is handled :data:`BATCH` jobs at a
        time, each batch with pipelined reads and one pipelined round of initializations and of
        watches, so that the first jobs start long before the last ones have been read.

        The fleet is read once, again by each batch of a pass over every job (the first batch
        gets the one :meth:`reconcile_all` read) and when a member joins, leaves or is drained; a
        look at the few jobs an event names uses the fleet this leader keeps, which counts its
        own placements and releases (five reads a look saved; the periodic pass corrects any
        drift).

        A job the batch finishes has its result recorded and its slot freed at once; the slots
        freed are given to the jobs waiting longest for one in the same turn, and the finished
        jobs are cleaned up after (:meth:`clean_up_finished`): in a backlog of short jobs a slot
        waited for the cleanups of every job that ended in the same turn, then a turn more for
        the look its freeing asked for, then for its member's launch behind more cleanups.
        """
        ids = self._look_order(set(job_ids))
        for first in range(0, len(ids), BATCH):
            if not self.active:
                return
            if not self._fleet_read or (listing is not None and first > 0):
                self._read_fleet()
            self._reconcile_batch(ids[first : first + BATCH], listing)
            self._fill_freed_slots()
        self.slot_freed()

    def _look_order(self, job_ids: Iterable[str]) -> list[str]:
        """Dirty results, then the jobs holding a slot, then by priority
        (:func:`.pool_placement.look_order`)."""
        held = self._holding()
        return pools_look_order(
            job_ids,
            lambda j: 0 if j in self._dirty else 1 if j in held else 2,
            pool_order(self._waiting, self.pool_of, self.pools),
            self.pool_of,
            self.pools,
        )

    def _holding(self) -> set[str]:
        """The jobs holding a driver slot: an assignment read or written (on any daemon, one
        that left included: lost, not yet replaced) or a placement decided in this batch."""
        held: set[str] = set()
        for jobs in self.fleet.assignments.values():
            held |= jobs
        for member in self.fleet.members.values():
            held |= member.assigned
        return held

    def _startable(self) -> list[tuple[str, dict[str, str]]]:
        """The waiting jobs their pools let start, in the order they are to start."""
        counts = pools_running(self._holding(), self.pool_of)
        return [
            (job, dict(labels))
            for job, labels in pools_ready(self._waiting.items(), self.pool_of, self.pools, counts)
        ]

    def _fill_freed_slots(self) -> None:
        """Place the jobs waiting longest for the slots this turn freed, in this turn (a look at
        each, as :meth:`slot_freed` would ask for): a slot is refilled before the cleanups of the
        jobs that freed it, not after them and a turn of the loop."""
        if self.active and self.fleet.free_slots > 0 and self._waiting:
            ready = self.fleet.could_start(self._startable())
            if ready:
                self._reconcile_batch(ready, None)

    @property
    def cleanups_pending(self) -> bool:
        """Whether a job this leadership finished waits for its cleanup, to run now."""
        return self.active and self.actions.finished.due

    def clean_up_finished(self) -> None:
        """Clean up the jobs whose results this leadership recorded (loop thread, at the end
        of a turn: :mod:`recovery.leader.finished`), each guarded as an action is."""
        if self.cleanups_pending:
            self.actions.finished.run(
                lambda job, cleanup: self._guarded(job, "CleanUp", cleanup),
                give_way=lambda: not self.active or self.loop.has_events(),
            )

    def _reconcile_batch(self, ids: list[str], listing: Listing | None) -> None:
        """Placements are taken from the fleet as starts are decided, so that one batch never
        overfills a member. New jobs are initialized in one pipelined round and decided again
        at once, without a re-read."""
        snapshots = read_snapshots(
            self.cluster.zk,
            self.cluster.layout,
            ids,
            listing=listing,
            look_inside=listing is None,  # a look at a few jobs: read only the records there
        )
        self._collect_stale_assignments(ids, snapshots)
        assignments = self._read_assignments(snapshots.values())
        self._read_outcomes_of_exits(snapshots, assignments)
        now = self.clock.now()
        for snapshot in snapshots.values():  # their pools, known before the order is
            run = snapshot.run  # parsed from its summary: once
            if run is not None:
                self.pool_of[snapshot.job_id] = run.pool_name
        plans: list[tuple[JobSnapshot, Action]] = []
        fresh: list[tuple[JobSnapshot, Action]] = []
        for job_id in self._look_order(snapshots):
            # a request made again is as old as the first: acted on and recorded so
            snapshot = self.requests_seen.dated(snapshots[job_id])
            self.quiet.forget(job_id)
            action = self._decide(snapshot, assignments.get(job_id), now)
            if isinstance(action, Initialize):  # decided in its turn, as the others
                fresh.append(self._decide_new(snapshot, now))
            else:
                plans.append((snapshot, action))
        plans += self._initialize(fresh, listing)
        plans.sort(key=lambda plan: not isinstance(plan[1], CleanUp))
        try:
            for snapshot, action in plans:
                if not self.active:
                    return
                self._apply(snapshot, action)
            self.actions.flush_starts()
            self.actions.flush_reasons()
        finally:
            self.watches.arm()

    def _read_outcomes_of_exits(
        self, snapshots: dict[str, JobSnapshot], assignments: dict[str, Assignment]
    ) -> None:
        """The outcome of each attempt whose exit its member recorded and whose snapshot has
        none, read again now. A look lists a job's records first and reads the assignments
        last: a short driver's outcome written between the two (before its exit) was not in
        the list, and its exit must not be taken for an attempt that left none (it would run
        again). The exit is recorded after the outcome, so a read after the exit sees it."""
        missed = [
            job_id
            for job_id, assignment in assignments.items()
            if assignment.exited is not None
            and snapshots[job_id].outcome is None
            and "outcome" not in snapshots[job_id].errors
        ]
        if not missed:
            return
        layout = self.cluster.layout
        paths = [layout.outcome(job_id) for job_id in missed]
        found = self.cluster.zk.get_many_or_denied(paths)
        for job_id, path, item in zip(missed, paths, found, strict=True):
            if item is None:
                continue
            snap = snapshots[job_id]
            if isinstance(item, AccessDenied):  # made by the job's identity, for itself alone
                snap.errors["outcome"] = str(item)
                continue
            try:
                outcome = Outcome.from_znode(item[0], item[1], path)
            except CorruptRecord as exc:
                snap.errors["outcome"] = str(exc)
                continue
            snapshots[job_id] = replace(snap, outcome=outcome)

    def _read_assignments(self, snapshots: Iterable[JobSnapshot]) -> dict[str, Assignment]:
        """The assignments of the jobs whose attempt is placed (a second pipelined round)."""
        placed = [
            (s.job_id, s.status.daemon_id)
            for s in snapshots
            if s.status is not None and s.status.state == STARTING and s.status.daemon_id
        ]
        layout = self.cluster.layout
        paths = [layout.assignment(member, job) for job, member in placed]
        found: dict[str, Assignment] = {}
        for (job_id, _), path, item in zip(
            placed, paths, self.cluster.zk.get_many(paths), strict=True
        ):
            if item is None:
                continue
            try:
                found[job_id] = Assignment.from_znode(item[0], item[1], path)
            except CorruptRecord as exc:
                logger.warning("job %s: %s", job_id, exc)
        return found

    def _local(self, job: JobSnapshot, assignment: Assignment | None) -> Local:
        member = job.status.daemon_id if job.status is not None else None
        attempt = job.status.attempt if job.status is not None else None
        exited = assignment.exited if assignment and assignment.attempt == attempt else None
        assigned = member is not None and job.job_id in self.fleet.assignments.get(member, ())
        return Local(member_alive=member in self.fleet.members, exited=exited, assigned=assigned)

    # -- guarded decisions and actions ---------------------------------------------------------

    def _decide(self, job: JobSnapshot, assignment: Assignment | None, now: datetime) -> Action:
        """What to do for ``job`` (its pool noted in :attr:`pool_of` by the batch already)."""
        try:
            action = decide(job, self._local(job, assignment), self.settings, now)
            if isinstance(action, Start) and action.attempt == 1:
                action = self._gate(job) or action
            if isinstance(action, Start):
                action = self._place(job, action)
        except (NotLeader, StoreUnavailable):
            raise  # the outage or the lost leadership is nobody's job's fault (an --after read)
        # The guard of invariant 6: a record combination nobody foresaw is this job's problem.
        except Exception as exc:
            logger.exception("job %s: cannot decide what to do", job.job_id)
            return QuarantineJob(reason=f"internal error deciding: {type(exc).__name__}: {exc}")
        if isinstance(action, NoSlot) and not isinstance(action, Waiting):
            self._waiting[job.job_id] = _required(job)  # keeps its place if it waited already
        else:
            self._waiting.pop(job.job_id, None)
        return action

    def _gate(self, job: JobSnapshot) -> Action | None:
        """``--after``: None if the job may start; else wait (PENDING, with the reason) or
        finish FAILED. A handle whose dependencies no writer makes quarantines the job."""
        try:
            return self.dependencies.check(job)
        except ValueError as exc:
            return QuarantineJob(reason=f"its handle's dependencies cannot be read: {exc}")

    def _place(self, job: JobSnapshot, start: Start) -> Action:
        """Where the attempt runs, or why it waits."""
        try:
            required = _labels(job)
        except ConfigError as exc:
            return QuarantineJob(reason=str(exc))
        pool = self.pool_of.get(job.job_id)
        if pool is not None and pool_limit(self.pools, pool) is not None:  # else: no count
            count = sum(
                1 for j in self._holding() if j != job.job_id and self.pool_of.get(j) == pool
            )
            full = pool_refusal(self.pools, pool, count)
            if full is not None:
                return start.ended if start.ended is not None else PoolFull(reason=full)
        among = self._not_kept(job.job_id, required)
        if isinstance(among, SlotKept):
            return start.ended if start.ended is not None else among
        warm = would_take_warm(job.run)
        if warm:
            refresh_warm(self.fleet, self.cluster.zk, self.cluster.layout, self.member_changes)
        member, why = self.fleet.place(job.job_id, required, among, warm=warm)
        if member is None:
            # The attempt that just ended must be counted even if the next cannot start yet.
            return start.ended if start.ended is not None else NoSlot(reason=why)
        return replace(
            start, daemon_id=member, reason=f"{start.reason}; {why}" if why else start.reason
        )

    def _not_kept(self, job_id: str, required: dict[str, str]) -> set[str] | SlotKept | None:
        """The daemons whose free slots the waiting jobs ahead of ``job_id`` leave it (None:
        nobody waits ahead, any free slot), or why it waits (:func:`.pool_placement.left_over`)."""
        if self.fleet.free_slots == 0 or len(self._waiting) <= (job_id in self._waiting):
            return None
        members = self.fleet.members
        free = {d: m.free for d, m in members.items() if not m.drained and m.free > 0}
        able = {d for d in free if members[d].matches(required)}
        if not able:
            return None  # no slot for it anyway: placement says why
        counts = pools_running(self._holding(), self.pool_of)
        ahead = list(pools_ahead(job_id, self._waiting.items(), self.pool_of, self.pools, counts))
        if not ahead:
            return None
        left = pools_left_over(free, ahead, lambda d, labels: members[d].matches(labels))
        if able & left.keys():
            return set(left)
        return SlotKept(reason=kept_reason(len(ahead), sum(free[d] for d in able)))

    def _apply(self, job: JobSnapshot, action: Action) -> None:
        self._guarded(job, type(action).__name__, lambda: self.actions.apply(job, action))

    def _guarded(self, job: JobSnapshot, what: str, act: Callable[[], None]) -> None:
        """Act for one job. Leadership lost: stop; outage: raise (it is nobody's job's fault);
        a conflict: look again; anything else: the job is broken, the others go on."""
        try:
            act()
        except NotLeader:
            logger.warning("job %s: leadership lost while acting; stopping", job.job_id)
            self.leadership.revoke()
        except StoreUnavailable:
            raise
        except (ConflictError, HandleNotFound) as exc:
            # A conditional write found the world changed (a node created or gone meanwhile).
            logger.info("job %s: %s; looking again", job.job_id, exc)
            self.post(job.job_id)
        except NewerRecord as exc:  # not broken: a newer daemon's to act on (invariant 16)
            logger.warning("job %s: %s failed, left alone: %s", job.job_id, what, exc)
        except Exception as exc:
            logger.exception("job %s: %s failed", job.job_id, what)
            self._quarantine_broken(job, f"{what} failed: {exc!r}")

    def _quarantine_broken(self, job: JobSnapshot, reason: str) -> None:
        try:
            self.actions.apply(job, QuarantineJob(reason=reason))
        except (NotLeader, StoreUnavailable):
            raise
        except Exception:
            logger.exception("job %s: could not be quarantined either", job.job_id)

    def _decide_new(self, job: JobSnapshot, now: datetime) -> tuple[JobSnapshot, Action]:
        """A new job, decided on the status it is to be created with (PENDING, with the reason
        it waits if no slot is free for it)."""
        status = self.actions.status(
            job, state=PENDING, attempt=0, failures=0, reason=self._foreseen_wait(job)
        )
        pending = replace(job, status=status.with_version(0))
        return pending, self._decide(pending, None, now)

    def _initialize(
        self, decided: list[tuple[JobSnapshot, Action]], listing: Listing | None
    ) -> list[tuple[JobSnapshot, Action]]:
        """New jobs, each as it is to be with its action (:meth:`_decide_new`). One placed at
        once is created by its placement's transaction (one write, not two:
        :attr:`Start.new`); the others' statuses are created in one pipelined round, and a job
        somebody else initialized meanwhile is looked at again. Returns each job, as it is to
        be, with its action."""
        if not decided:
            return []
        plans: list[tuple[JobSnapshot, Action]] = []
        waiting: list[tuple[JobSnapshot, Action]] = []
        for job, action in decided:
            if isinstance(action, Start):
                has_dir = listing is not None and job.job_id in listing.job_dirs
                plans.append((job, replace(action, new=True, make_dir=not has_dir)))
            else:
                waiting.append((job, action))
        made = self._create_statuses([job for job, _ in waiting], listing)
        return plans + [(job, action) for job, action in waiting if job.job_id in made]

    def _create_statuses(self, jobs: list[JobSnapshot], listing: Listing | None) -> set[str]:
        """Create the statuses of new jobs that wait (``jobs``, each with the status it is to
        be created with) in one pipelined round; the ids of those created."""
        if not jobs:
            return set()
        zk, layout = self.cluster.zk, self.cluster.layout
        transactions: list[list[Op]] = []
        for job in jobs:
            assert job.status is not None
            ops: list[Op] = [Create(layout.status(job.job_id), job.status.to_bytes())]
            if listing is None or job.job_id not in listing.job_dirs:
                ops.insert(0, Create(layout.job_dir(job.job_id)))  # one write to the log, not two
            transactions.append(ops)
        errors = zk.commit_many(transactions, fence=self.fence)
        # The job's directory was there (no listing said, or made since it: a control change,
        # a stop, a schedule's run): the status alone.
        again = {
            i: retry[0]
            for i, (job, ops, error) in enumerate(zip(jobs, transactions, errors, strict=True))
            if (retry := without_existing(ops, error, {layout.job_dir(job.job_id)})) is not None
        }
        if again:
            retried = zk.commit_many(list(again.values()), fence=self.fence)
            for i, error in zip(again, retried, strict=True):
                errors[i] = error
        made = set()
        for job, error in zip(jobs, errors, strict=True):
            if isinstance(error, NotLeader):
                raise error
            if error is not None:
                logger.info("job %s: not initialized (%s); looking again", job.job_id, error)
                self.post(job.job_id)
                continue
            logger.info("job %s: submitted (%s)", job.job_id, job.name)
            made.add(job.job_id)
        return made

    def _foreseen_wait(self, job: JobSnapshot) -> str | None:
        """Why a new job will wait, if no daemon that can run it has a slot free now: said in
        the status it is created with, not in a second write (its decision, right after, finds
        the reason there already)."""
        try:
            return self.fleet.refusal(_labels(job))
        except ConfigError:
            return None  # its decision quarantines it

    # -- assignments nobody needs any more -------------------------------------------------------

    def _collect_stale_assignments(self, ids: list[str], snapshots: dict[str, JobSnapshot]) -> None:
        """Delete the assignments of the batch's jobs that no attempt owns: the job is gone or
        finished, or its status names another member or is not STARTING (an attempt whose end
        was recorded before its assignment could be removed: a crash, a deposed leader)."""
        stale: list[Op] = []
        for daemon_id, jobs in self.fleet.assignments.items():
            for job_id in set(ids) & jobs:
                status = snapshots[job_id].status if job_id in snapshots else None
                if status is None or status.state != STARTING or status.daemon_id != daemon_id:
                    stale.append(Delete(self.cluster.layout.assignment(daemon_id, job_id)))
                    self.fleet.release(daemon_id, job_id)
        errors = self.cluster.zk.commit_many([[op] for op in stale], fence=self.fence)
        if any(isinstance(error, NotLeader) for error in errors):
            raise NotLeader("leadership lost while removing stale assignments")

    def _forget_empty_member_dirs(self) -> None:
        """Remove the empty assignment directories of daemons that left the fleet."""
        layout = self.cluster.layout
        gone = [
            Delete(layout.member_assignments(daemon_id))
            for daemon_id, jobs in self.fleet.assignments.items()
            if not jobs and daemon_id not in self.fleet.members
        ]
        self.cluster.zk.commit_many([[op] for op in gone], fence=self.fence)

    # -- watches -------------------------------------------------------------------------------

    def watch_job(self, job_id: str, *paths: str) -> None:
        """Wake up when the job's cancel or stop node (and each of ``paths``: its ``running``
        node, its assignment) changes (:mod:`recovery.leader.watches`): armed at the end of the
        batch, for every job of the batch in one pipelined round."""
        self.watches.want(job_id, *paths)


def _labels(job: JobSnapshot) -> dict[str, str]:
    """The labels the job requires (``--require``); raises :class:`ConfigError` if garbled."""
    if job.run is not None:
        return job.run.labels
    try:  # only to say why (garbled: rare)
        RunSpec.from_summary(job.summary)
    except ValueError as exc:
        raise ConfigError(f"its run options cannot be read: {exc}") from None
    raise ConfigError("its run options cannot be read")


def _required(job: JobSnapshot) -> dict[str, str]:
    """The labels the job requires; a garbled requirement waits for any slot (deciding again
    quarantines the job)."""
    try:
        return _labels(job)
    except ConfigError:
        return {}
