"""This daemon as a member of the fleet: its member record, and the attempts placed on it.

Every daemon, the leader included, registers ``R/members/<id>`` (EPHEMERAL, its own session) and
watches ``R/assignments/<id>``. For each attempt placed on it, it starts a driver exactly as the
leader used to (its own process and ZooKeeper session, a log per attempt). It never decides
anything: the leader places, the driver's ``running`` transaction checks the status version of
its attempt, so a launch this member makes for an attempt it no longer owns is refused by
ZooKeeper (invariant 4 across hosts).

When a driver process exits, the member records how in the assignment and, if that very process
(host, pid, start time) still holds the ``running`` node, deletes it (in one transaction with a
check of the attempt's status version), so that the leader does not wait for a dead driver's
session to expire. A launch whose assignment was withdrawn before its driver took ``running`` is
killed. A driver that exits while another process holds its attempt's ``running`` node (a
duplicate that ZooKeeper refused) changes nothing: neither that node, nor the working directory,
nor the assignment.

A daemon restarted with its id (after SIGTERM or SIGKILL) adopts the live drivers of the attempts
placed on it, identified by pid and start time (:mod:`recovery.member.adoption`): it follows each
through a pidfd and records its exit as it would for a driver it forked, never launches an attempt
twice, and releases a ``running`` node or a working directory only once its owner is verified dead.
Their log shipper is a process of its own (one per daemon) and goes on.

Running drivers are not stopped when this member's own session is suspended or lost: each
driver holds its own session and stops itself before that session can expire (invariant 4); a
lost member session only makes the leader place new attempts elsewhere.

Why one module: launches, exits, withdrawn assignments and adoptions all change one table of
this member's attempts under one lock, and each change's order against the others is what keeps
an attempt launched once. The verdicts on adoption, the launcher, the ending of drivers and the
assignments' reads already live apart.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from recovery.member import adoption, registration
from recovery.member.adoption import Adopt, Dead, Found, LaunchRecord, Leave, running_identity
from recovery.member.assignments import AssignmentView
from recovery.member.ender import Endings
from recovery.member.launcher import DriverLauncher, Launch, describe_exit
from recovery.settings import DaemonSettings
from recovery.shared import attemptdir, processes
from recovery.shared.memory import own_memory
from recovery.shared.processes import Liveness, ProcessIdentity
from zkstore import __version__, protocol
from zkstore.admin.acl import grant_job
from zkstore.cluster import fleet_protocol as fleet
from zkstore.errors import (
    ConflictError,
    CorruptRecord,
    FleetVersionError,
    HandleNotFound,
    VersionConflict,
    ZkStoreError,
)
from zkstore.jobs.resign import resign_job
from zkstore.jobs.runspec import RunSpec
from zkstore.protocol import JOB_IDENTITIES
from zkstore.records.fleet_records import Assignment, MemberInfo
from zkstore.records.handle import Handle, ZnodeStatLike
from zkstore.records.job_records import Outcome, RunningInfo
from zkstore.records.record import EPOCH
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Check, Delete, Fence, SetData
from zkstore.zookeeper.watch import Listing, NodeWatch
from zkstore.zookeeper.zk import is_own_ephemeral

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["FleetMember"]

logger = logging.getLogger(__name__)


class FleetMember:
    """Register, follow the assignments, launch, adopt and reap drivers. Loop thread only,
    except the callbacks, which only post."""

    def __init__(
        self,
        cluster: Cluster,
        settings: DaemonSettings,
        launcher: DriverLauncher,
        notify: Callable[[], None],
        exited: Callable[[Launch], None],
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.launcher = launcher
        self.daemon_id = settings.daemon_id
        self.records = adoption.LaunchRecords(launcher.work_root, self.daemon_id)
        self._notify = notify
        self._exited = exited
        self.launches: dict[str, Launch] = {}
        #: when the assignment each launch was made for was placed (its identity: an id run
        #: again counts its attempts from 1 again)
        self._placed: dict[str, datetime] = {}
        self._watch: NodeWatch | None = None
        #: the member record as registered (its memory reported on top of it)
        self._info: MemberInfo | None = None
        self.assignments = AssignmentView(
            cluster.zk, cluster.layout.member_assignments(self.daemon_id)
        )
        #: exits that could not be recorded yet (ZooKeeper was unreachable): job id to
        #: (attempt, how it ended, its status version, the process that ended)
        self._unrecorded: dict[str, tuple[int, str, int | None, ProcessIdentity | None]] = {}
        #: attempts left alone (logged once): job id to (attempt, assigned)
        self._left: dict[str, tuple[int, datetime]] = {}
        #: the launch records of attempts no longer placed here were looked at (after a start)
        self._swept = False
        #: attempts the leader ended (timeout, stuck, stop), being ended here
        self.endings = Endings(cluster.zk, cluster.layout, notify, self.driver_exited)
        #: the fleet's protocol, for what a driver is given (its job's identity)
        self.fleet = fleet.FleetReading(cluster.zk, cluster.layout)
        #: the driver users out of the pool, as our member record shows them
        self._users_out: dict[str, str] = {}

    # -- membership ----------------------------------------------------------------------------

    def register(self, stop: threading.Event | None = None) -> bool:
        """Create our member record in this session (:func:`recovery.member.registration.take_id`:
        an earlier holder of our id that is this host's dead process is replaced at once, one
        that cannot be checked waited for, a live one refused); then follow our assignments.
        Returns False if ``stop`` was set while waiting."""
        layout, zk = self.cluster.layout, self.cluster.zk
        me = processes.this_process()
        info = MemberInfo(
            version=None,
            daemon_id=self.daemon_id,
            host=me.host,
            pid=me.pid,
            slots=self.settings.max_drivers,
            started=utc_moment(),
            labels=dict(self.settings.labels) or None,
            start_ticks=me.start_ticks,
            boot_id=me.boot_id,
            speaks=protocol.PROTOCOL,
            serves_from=protocol.MIN_PROTOCOL,
            release=__version__,
            settings=self.settings.settings_digest,
        )
        info = self._with_warm(info)
        if not registration.take_id(zk, layout.member(self.daemon_id), info, stop):
            return False
        self._users_out = {}  # a new record shows none: the next check says them again
        self._info = info
        try:  # after the record exists: see zkstore.cluster.fleet_protocol on finalizing meanwhile
            fleet.admit(zk, layout, self.daemon_id)
        except FleetVersionError:
            with contextlib.suppress(HandleNotFound):
                zk.delete(layout.member(self.daemon_id))
            raise
        zk.ensure_path(layout.member_assignments(self.daemon_id))
        # A log shipper killed (with its host's processes) left its requests: ship them again.
        self.launcher.shipping.ensure_running()
        if self._watch is None:
            self._watch = NodeWatch(
                zk,
                layout.member_assignments(self.daemon_id),
                self._listed,
                children=True,
                listing=True,
            )
        logger.info(
            "member %s registered: %d driver slot(s), labels %s",
            self.daemon_id,
            self.settings.max_drivers,
            ",".join(f"{k}={v}" for k, v in sorted(self.settings.labels.items())) or "none",
        )
        return True

    def _listed(self, names: object) -> None:
        """The watch of our assignments reported their names (kazoo's threads): keep them for
        the next look, which need not list them again, and look."""
        self.assignments.listed(names if isinstance(names, Listing) else None)
        self._notify()

    def report_memory(self) -> None:
        """Write the daemon's own memory into its member record (``zkstore daemons list``
        shows it); a failure is left to the next report."""
        if self._info is None:
            return
        memory = own_memory()
        info = replace(self._info, rss=memory.rss, heap_blocks=memory.heap_blocks)
        try:
            self.cluster.zk.set(self.cluster.layout.member(self.daemon_id), info.to_bytes())
        except ZkStoreError as exc:
            logger.debug("memory not reported in the member record: %s", exc)
            return
        self._info = info

    def _with_warm(self, info: MemberInfo) -> MemberInfo:
        """``info`` saying what our warm JVMs are now (:class:`MemberInfo` ``warm_*``)."""
        pool = self.launcher.warm
        if pool is None:
            return info
        first = pool.first_ready
        return replace(
            info,
            warm_ready=pool.ready,
            warm_first_ms=None if first is None else round(first * 1000),
        )

    def report_warm(self) -> None:
        """Write how many warm JVMs are ready into our member record, if it changed (the
        leader reads it as it places a job that would take one; ``daemons list`` shows it).
        A failure is left to the next change or memory report, which carries it too."""
        if self._info is None or self.launcher.warm is None:
            return
        info = self._with_warm(self._info)
        if info == self._info:
            return
        self._info = info
        try:
            self.cluster.zk.set(self.cluster.layout.member(self.daemon_id), self._info.to_bytes())
        except ZkStoreError as exc:
            logger.debug("warm drivers not reported in the member record: %s", exc)

    def ensure_registered(self) -> None:
        """After a new session, our ephemeral record is gone: make it again."""
        if not is_own_ephemeral(
            self.cluster.zk.exists(self.cluster.layout.member(self.daemon_id)), self.cluster.zk
        ):
            self.register()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        self.endings.stop()

    def check_driver_users(self) -> None:
        """Sweep the driver users that are free again (:meth:`DriverUserPool.reclaim`) and, if
        which are out of the pool changed, say so in our member record (``daemons list``).
        Called periodically on the loop thread."""
        pool = self.launcher.driver_users
        if pool is None:
            return
        out = pool.reclaim()
        if out == self._users_out:
            return
        zk, path = self.cluster.zk, self.cluster.layout.member(self.daemon_id)
        found = zk.get_if_exists(path)
        if found is None or not is_own_ephemeral(found[1], zk):
            return  # registered again later, with the next check
        info = MemberInfo.from_znode(found[0], found[1], path)
        try:
            zk.set(path, replace(info, users_out=out or None).to_bytes(), version=found[1].version)
        except ConflictError:
            return  # changed meanwhile (ours only): the next check writes it
        if self._info is not None:  # what the memory and warm reports write on top of
            self._info = replace(self._info, users_out=out or None)
        for name in sorted(out.keys() - self._users_out.keys()):
            logger.warning("driver user %s is out of the pool: %s", name, out[name])
        for name in sorted(self._users_out.keys() - out.keys()):
            logger.info("driver user %s is back in the pool", name)
        self._users_out = out

    @property
    def running_drivers(self) -> int:
        return sum(1 for launch in self.launches.values() if launch.alive)

    # -- assignments ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Launch (or, after a restart, adopt) the attempts placed here; kill launches whose
        placement was withdrawn before their driver took ``running``."""
        self._record_exits_left()
        current = self.assignments.read()
        new = {job: a for job, a in current.items() if self._is_new(job, a)}
        for job_id, assignment in self._judged(new):
            self._launch(job_id, assignment)
        if not self._swept:
            self._sweep(current)
            self._swept = True
        for job_id, launch in list(self.launches.items()):
            placed = current.get(job_id)
            if launch.alive and (placed is None or placed.attempt != launch.attempt):
                self._withdraw(launch)
        self.endings.check(self.launches)
        self._forget_over(current)

    def _forget_over(self, current: dict[str, Assignment]) -> None:
        """Drop what the member kept of the attempts that are over: the driver gone, its exit
        recorded (or nobody's to record), and no assignment left (the leader removes it once it
        has acted on the exit). A member kept every launch it ever made: its memory grew with
        every job it had run."""
        for job_id, launch in list(self.launches.items()):
            if (
                job_id not in current
                and job_id not in self._unrecorded
                and not launch.alive
                and not self.endings.ending(launch)
            ):
                del self.launches[job_id]
                self._placed.pop(job_id, None)
        for job_id in [job for job in self._left if job not in current]:
            del self._left[job_id]

    def _is_new(self, job_id: str, assignment: Assignment) -> bool:
        """An assignment not launched (nor adopted) yet, and not over."""
        launch = self.launches.get(job_id)
        if launch is not None and (
            launch.attempt > assignment.attempt
            or (
                launch.attempt == assignment.attempt
                and self._placed.get(job_id) == assignment.assigned
            )
        ):
            return False  # launched already (or a newer one is); the same attempt placed anew
            # is a new run of the id (its result expired or was forgotten): attempts from 1
        if assignment.exited is not None:
            return False  # its driver ran here and is gone: the leader will look at it
        return self._left.get(job_id) != (assignment.attempt, assignment.assigned)

    def _judged(self, new: dict[str, Assignment]) -> list[tuple[str, Assignment]]:
        """Judge each new assignment (:func:`recovery.member.adoption.judge`): adopt, bury or leave
        what a driver may hold already; returns those to launch. Their running and outcome
        nodes are read in one pipelined round."""
        if not new:
            return []
        layout = self.cluster.layout
        paths = [p for job in new for p in (layout.running(job), layout.outcome(job))]
        nodes = iter(self.cluster.zk.get_many(paths))
        to_launch = []
        for job_id, assignment in new.items():
            found = self._found(job_id, assignment, next(nodes), next(nodes))
            verdict = adoption.judge(found, processes.probe)
            if isinstance(verdict, Adopt):
                self._follow(job_id, assignment, verdict.identity, found.record)
            elif isinstance(verdict, Dead):
                self._bury(job_id, assignment, verdict)
            elif isinstance(verdict, Leave):
                self._left[job_id] = (assignment.attempt, assignment.assigned)
                logger.warning(
                    "job %s: attempt %d is placed here; not launching it: %s",
                    job_id,
                    assignment.attempt,
                    verdict.reason,
                )
            else:
                to_launch.append((job_id, assignment))
        return to_launch

    def _found(
        self,
        job_id: str,
        assignment: Assignment,
        running: tuple[bytes, ZnodeStatLike] | None,
        outcome: tuple[bytes, ZnodeStatLike] | None,
    ) -> Found:
        layout = self.cluster.layout
        record = self.records.read(job_id, assignment.attempt)
        if record is not None and record.assigned not in (EPOCH, assignment.assigned):
            record = None  # of an earlier run of this id
        held: RunningInfo | None = None
        unreadable = False
        if running is not None:
            try:
                held = RunningInfo.from_znode(running[0], running[1], layout.running(job_id))
            except CorruptRecord:
                unreadable = True
        ended: int | None = None
        if outcome is not None:
            with contextlib.suppress(CorruptRecord):
                record_ = Outcome.from_znode(outcome[0], outcome[1], layout.outcome(job_id))
                ended = record_.attempt
        work_dir = self.launcher.work_dir(job_id, assignment.attempt)
        in_directory = processes.in_directory(work_dir) if work_dir.exists() else []
        if (
            held is not None
            and held.start_ticks is None
            and held.host == socket.gethostname()
            and processes.cwd_name(held.pid) == work_dir.name
        ):
            # An earlier version's driver (its node names no start time), started by a daemon
            # with another work directory (the old default was a fresh temporary one): the pid
            # it names runs in a directory of this attempt's name.
            in_directory.append(processes.identify(held.pid))
        return Found(
            attempt=assignment.attempt,
            record=record,
            running=held,
            running_unreadable=unreadable,
            outcome_attempt=ended,
            in_directory=in_directory,
            boot_id=processes.boot_id(),
        )

    def _launch(self, job_id: str, assignment: Assignment) -> None:
        """Start the driver of a new assignment; its launch record is written first (so that a
        restart at any moment knows that it may have started) and completed once it runs."""
        self._resign(job_id, assignment)
        own_identity = self._grant(job_id)
        record = LaunchRecord(
            job_id=job_id,
            attempt=assignment.attempt,
            assigned=assignment.assigned,
            status_version=assignment.status_version,
            host=socket.gethostname(),
            boot_id=processes.boot_id(),
        )
        try:
            self.records.write(record)
            launch = self.launcher.launch(
                job_id,
                assignment.attempt,
                assignment.status_version,
                own_identity=own_identity,
                run=self._run_spec(job_id),
            )
        except OSError as exc:
            logger.error("job %s: cannot start a driver: %s", job_id, exc)
            self._record_exit_quietly(job_id, assignment.attempt, f"could not start: {exc}", None)
            return
        identity = launch.identity
        with contextlib.suppress(OSError):  # the intent alone still says "never launch it again"
            self.records.write(replace(record, pid=identity.pid, start_ticks=identity.start_ticks))
        self._track(launch, assignment.assigned)
        logger.info(
            "job %s: attempt %d started on %s, driver pid %d; log %s",
            job_id,
            assignment.attempt,
            socket.gethostname(),
            launch.process.pid,
            launch.log_path,
        )

    def _run_spec(self, job_id: str) -> RunSpec | None:
        """The job's run options as its handle keeps them (a hint of whether its driver can use
        a warm JVM; the daemon never opens the definition). None without warm drivers, or if
        the handle cannot be read: the attempt takes a warm JVM if one is ready, and its driver
        decides."""
        if self.launcher.warm is None:
            return None
        path = self.cluster.layout.job_handle(job_id)
        try:
            data, stat = self.cluster.zk.get(path)
            return RunSpec.from_summary(Handle.from_znode(data, stat, path).summary)
        except (ZkStoreError, ValueError) as exc:
            logger.debug(
                "job %s: run options not read (%s): a warm driver if one is ready", job_id, exc
            )
            return None

    def _resign(self, job_id: str, assignment: Assignment) -> None:
        """Before launching: the job's handles signed with the cluster key (written before job
        keys) re-signed with its own key, which is all its driver holds. A failure is logged;
        the driver meets the handle as it is (a signature it cannot check quarantines the job,
        and the next launch, after a release, tries again)."""
        cluster = self.cluster
        fence = Fence.check(
            cluster.layout.status(job_id), assignment.status_version, description="superseded"
        )
        try:
            resign_job(
                cluster.zk,
                cluster.layout,
                cluster.storage,
                cluster.config.cluster_id,
                job_id,
                fence=fence,
            )
        except ZkStoreError as exc:
            logger.warning("job %s: handles not re-signed before the launch: %s", job_id, exc)

    def _grant(self, job_id: str) -> bool:
        """Whether the driver gets its job's ZooKeeper identity (a fleet finalized at the
        protocol of per-job identities, digest credentials); before it does, the job's nodes
        made before that protocol get the ACL that lets it write its own records. A failure
        there is logged and the driver gets the cluster's identity, as before."""
        zk = self.cluster.zk
        if zk.acl_policy is None or not self.fleet.allows(JOB_IDENTITIES):
            return False
        try:
            changed = grant_job(zk, self.cluster.layout, job_id)
        except ZkStoreError as exc:
            logger.warning("job %s: its nodes not opened to its own identity: %s", job_id, exc)
            return False
        if changed:
            logger.info("job %s: %d node(s) opened to its own identity", job_id, changed)
        return True

    def _track(self, launch: Launch, assigned: datetime | None) -> None:
        """Wait for the driver's exit on a thread of its own (which only posts)."""
        if assigned is not None:
            self.launches[launch.job_id] = launch
            self._placed[launch.job_id] = assigned
        threading.Thread(
            target=self._await_exit, args=(launch,), name=f"driver-{launch.job_id}", daemon=True
        ).start()

    def _follow(
        self,
        job_id: str,
        assignment: Assignment,
        identity: ProcessIdentity,
        record: LaunchRecord | None,
        *,
        track: bool = True,
    ) -> Launch | None:
        """Adopt the live driver ``identity`` of the assignment: follow its exit through a
        pidfd. None if it is gone already (the next sync buries it)."""
        process = processes.Adopted.open(identity)
        if process is None:
            self._notify()
            return None
        attempt = assignment.attempt
        launch = Launch(
            job_id,
            attempt,
            assignment.status_version,
            process,
            self.launcher.log_path(job_id, attempt),
            self.launcher.work_dir(job_id, attempt),
            identity,
            adopted=True,
        )
        self.launcher.adopted(identity)
        if record is None or record.identity != identity:
            fresh = LaunchRecord(
                job_id=job_id,
                attempt=attempt,
                assigned=assignment.assigned,
                status_version=assignment.status_version,
                host=identity.host,
                boot_id=identity.boot_id,
                pid=identity.pid,
                start_ticks=identity.start_ticks,
            )
            with contextlib.suppress(OSError):
                self.records.write(fresh)
        # Its output goes on being shipped (the log shipper outlived us, or is started again).
        self.launcher.shipping.follow(job_id, attempt, launch.log_path, identity, offset=None)
        self._track(launch, assignment.assigned if track else None)
        logger.info(
            "job %s: attempt %d adopted: its driver (pid %d, started before this daemon) goes "
            "on; log %s",
            job_id,
            attempt,
            identity.pid,
            launch.log_path,
        )
        return launch

    def _bury(self, job_id: str, assignment: Assignment, verdict: Dead) -> None:
        """The attempt's driver is verified gone: release what it held, record its exit."""
        logger.warning(
            "job %s: attempt %d: %s (%s); recording its exit",
            job_id,
            assignment.attempt,
            verdict.reason,
            verdict.how,
        )
        attemptdir.remove(
            self.launcher.work_dir(job_id, assignment.attempt), self.launcher.driver_uids
        )
        self.launcher.attempt_over(job_id, assignment.attempt)
        self._record_exit_quietly(
            job_id, assignment.attempt, verdict.how, assignment.status_version, verdict.release
        )

    def _sweep(self, current: dict[str, Assignment]) -> None:
        """After a start: the launch records of attempts no longer placed here. A live driver
        is followed (its exit is still seen, its directory removed after it), killed if it had
        not taken its ``running`` node (its placement was withdrawn); a dead one's directory
        and record are removed."""
        for job_id, attempt in self.records.listed():
            placed = current.get(job_id)
            if placed is not None and placed.attempt == attempt:
                continue
            record = self.records.read(job_id, attempt)
            identity = record.identity if record is not None else None
            if identity is not None and processes.probe(identity) is Liveness.ALIVE:
                stray = Assignment(
                    version=None,
                    job_id=job_id,
                    daemon_id=self.daemon_id,
                    attempt=attempt,
                    status_version=record.status_version if record else -1,
                    assigned=record.assigned if record else EPOCH,
                )
                launch = self._follow(job_id, stray, identity, record, track=False)
                if launch is not None and not self._may_hold(job_id, identity):
                    logger.warning(
                        "job %s: attempt %d was withdrawn while this daemon was down, before "
                        "its driver took its running node: stopping it",
                        job_id,
                        attempt,
                    )
                    launch.process.kill()
                continue
            work_dir = self.launcher.work_dir(job_id, attempt)
            if not work_dir.exists() or not processes.in_directory(work_dir):
                attemptdir.remove(work_dir, self.launcher.driver_uids)
                self.launcher.attempt_over(job_id, attempt)
            self.records.remove(job_id, attempt)

    def _await_exit(self, launch: Launch) -> None:
        launch.process.wait()
        self._exited(launch)  # posts to the loop: the loop's thread records it

    def _withdraw(self, launch: Launch) -> None:
        if self._may_hold(launch.job_id, launch.identity, launch.attempt):
            return  # it holds running: its own fence decides, and it stops itself if superseded
        logger.warning(
            "job %s: attempt %d was placed elsewhere before its driver started: stopping it",
            launch.job_id,
            launch.attempt,
        )
        launch.process.kill()

    def _may_hold(self, job_id: str, identity: ProcessIdentity, attempt: int | None = None) -> bool:
        """True unless the job's ``running`` node is known not to be held by that process (an
        unreadable node may be its)."""
        try:
            found = self.cluster.state.running(job_id)
        except CorruptRecord:
            return True
        if found is None:
            return False
        held = found[0]
        if attempt is not None and held.attempt == attempt:
            return True
        return adoption.same_process(running_identity(held), identity)

    def _running(self, job_id: str) -> RunningInfo | None:
        try:
            found = self.cluster.state.running(job_id)
        except CorruptRecord:
            return None
        return found[0] if found is not None else None

    # -- exits ---------------------------------------------------------------------------------

    def driver_exited(self, launch: Launch) -> None:
        """Record how the driver ended; release its ``running`` node if it died holding it.

        A driver that ends while another process holds its attempt's ``running`` node (a
        duplicate launch, refused by ZooKeeper) leaves everything as it is: that node, the
        attempt's directory and its assignment are the holder's, which is adopted if it is a
        live process of this host.
        """
        if not self.endings.release(launch):
            return  # ended by the leader: recorded once nothing of its process group lives
        self.launcher.driver_gone(launch)
        how = describe_exit(launch.exit_code)
        if isinstance(launch.process, processes.Adopted):
            launch.process.close()
        running = self._running(launch.job_id)
        holder = self._other_holder(launch, running)
        if holder is not None:
            logger.warning(
                "driver of %s attempt %d (pid %d) %s; %s holds the attempt and goes on",
                launch.job_id,
                launch.attempt,
                launch.process.pid,
                how,
                holder.describe(),
            )
            if self.launches.get(launch.job_id) is launch:
                del self.launches[launch.job_id]
                placed = self._placed.get(launch.job_id, EPOCH)
                assignment = Assignment(
                    version=None,
                    job_id=launch.job_id,
                    daemon_id=self.daemon_id,
                    attempt=launch.attempt,
                    status_version=launch.status_version,
                    assigned=placed,
                )
                if processes.probe(holder) is Liveness.ALIVE:
                    self._follow(launch.job_id, assignment, holder, None)
            return
        # The driver removes its working directory itself, unless it was killed.
        attemptdir.remove(launch.work_dir, self.launcher.driver_uids)
        logger.info(
            "driver of %s attempt %d (pid %d) %s",
            launch.job_id,
            launch.attempt,
            launch.process.pid,
            how,
        )
        self._record_exit_quietly(
            launch.job_id,
            launch.attempt,
            how,
            launch.status_version,
            launch.identity,
            running=(running,),
        )

    def _other_holder(self, launch: Launch, held: RunningInfo | None) -> ProcessIdentity | None:
        """The process holding the ``running`` node of the launch's attempt (``held``, as read
        after its driver ended), if it is not the launch's own driver (None also if nobody
        holds it, or nobody can tell)."""
        if held is None or held.attempt != launch.attempt:
            return None
        holder = running_identity(held)
        return None if adoption.same_process(holder, launch.identity) else holder

    def _record_exit_quietly(
        self,
        job_id: str,
        attempt: int,
        how: str,
        status_version: int | None,
        holder: ProcessIdentity | None = None,
        *,
        running: tuple[RunningInfo | None] | None = None,
    ) -> None:
        """Record the exit; one that cannot be recorded now (an outage) is kept, in memory and
        in the launch record, and recorded at the next :meth:`sync` (the daemon syncs when its
        session is back; a restarted one finds it in the record), so that the leader need not
        wait for its launch deadline to learn that the attempt is gone."""
        self._unrecorded.pop(job_id, None)
        try:
            self._record_exit(job_id, attempt, how, status_version, holder, running=running)
        except (ConflictError, HandleNotFound) as exc:
            logger.debug("job %s: exit of attempt %d not recorded (%s)", job_id, attempt, exc)
        except ZkStoreError as exc:
            self._unrecorded[job_id] = (attempt, how, status_version, holder)
            record = self.records.read(job_id, attempt)
            if record is not None and record.exited != how:
                with contextlib.suppress(OSError):
                    self.records.write(replace(record, exited=how))
            logger.warning(
                "job %s: exit of attempt %d not recorded yet (will retry): %s", job_id, attempt, exc
            )
            return
        self.records.remove(job_id, attempt)

    def _record_exits_left(self) -> None:
        for job_id, (attempt, how, version, holder) in list(self._unrecorded.items()):
            self._record_exit_quietly(job_id, attempt, how, version, holder)

    def _record_exit(
        self,
        job_id: str,
        attempt: int,
        how: str,
        status_version: int | None,
        holder: ProcessIdentity | None,
        *,
        running: tuple[RunningInfo | None] | None = None,
    ) -> None:
        """Write ``exited`` into the attempt's assignment and, if ``holder`` (the process that
        ended) still holds the attempt's ``running`` node, delete it in the same transaction,
        conditional on the attempt's status version.

        The assignment is written at the version the member knows (its last look, or its own
        last write), read first only if it knows none or that one is stale. ``running``: the
        attempt's ``running`` node as read after the process ended (read here if not given):
        a process that is over takes no node any more, and the delete is conditional anyway.
        """
        layout, zk = self.cluster.layout, self.cluster.zk
        path = layout.assignment(self.daemon_id, job_id)
        known = self.assignments.known(job_id)
        self.assignments.forget(job_id)  # written below: known again once it is written
        held = running[0] if running is not None else self._running(job_id)
        release: list[Check | SetData | Delete] = []
        if (
            status_version is not None
            and holder is not None
            and held is not None
            and held.attempt == attempt
            and adoption.same_process(running_identity(held), holder)
        ):
            # The driver died holding running: its session has not expired yet, but the
            # process is gone (we reaped it, or its pidfd said so). Release the node now, only
            # if it is still this attempt's (the status version), so that the leader need not
            # wait for the expiry.
            release = [
                Check(layout.status(job_id), status_version),
                Delete(layout.running(job_id), -1 if held.version is None else held.version),
            ]

        def write(assignment: Assignment, version: int) -> None:
            if assignment.attempt != attempt:
                return  # a newer attempt is placed here now
            ended = replace(assignment, exited=how, version=None)
            zk.commit([SetData(path, ended.to_bytes(), version), *release])
            self.assignments.wrote(job_id, replace(ended, version=version + 1))

        if known is not None and known.version is not None and known.attempt == attempt:
            try:
                write(known, known.version)
                return
            except VersionConflict as exc:
                if exc.path != path:
                    raise
                # changed since the member saw it: read, and write again
        data, stat = zk.get(path)
        write(Assignment.from_znode(data, stat, path), stat.version)
