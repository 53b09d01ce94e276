"""This daemon as a member of the fleet: its member record, and the attempts placed on it.

Every daemon, the leader included, registers ``R/members/<id>`` (EPHEMERAL, its own session) and
watches ``R/assignments/<id>``. For each attempt placed on it, it starts a driver exactly as the
leader used to (its own process and ZooKeeper session, a log per attempt). It never decides
anything: the leader places, the driver's ``running`` transaction checks the status version of
its attempt, so a launch this member makes for an attempt it no longer owns is refused by
ZooKeeper (invariant 4 across hosts).

When a driver process exits, the member records how in the assignment and, if the driver died
without releasing its ``running`` node, deletes it (in one transaction with a check of the
attempt's status version: only ever the node of its own dead attempt), so that the leader does
not wait for a dead driver's session to expire. A launch whose assignment was withdrawn before
its driver took ``running`` is killed.

Running drivers are not stopped when this member's own session is suspended or lost: each
driver holds its own session and stops itself before that session can expire (invariant 4); a
lost member session only makes the leader place new attempts elsewhere.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from collections.abc import Callable

from recovery.launcher import DriverLauncher, Launch, describe_exit
from recovery.settings import DaemonSettings
from zkstore.cluster import Cluster
from zkstore.errors import (
    ConfigError,
    ConflictError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    ZkStoreError,
)
from zkstore.jobs.records import Assignment, MemberInfo, RunningInfo
from zkstore.jobs.resign import resign_job
from zkstore.ops import Check, Delete, Fence, SetData
from zkstore.strict import utc_now
from zkstore.watch import NodeWatch
from zkstore.zk import is_own_ephemeral

logger = logging.getLogger(__name__)


class DuplicateMember(ConfigError):
    """Another live daemon holds this daemon id."""


class FleetMember:
    """Register, follow the assignments, launch and reap drivers. Loop thread only, except the
    callbacks, which only post."""

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
        self.member_id = settings.daemon_id
        self._notify = notify
        self._exited = exited
        self.launches: dict[str, Launch] = {}
        #: when the assignment each launch was made for was placed (its identity: an id run
        #: again counts its attempts from 1 again)
        self._placed: dict[str, str] = {}
        self._watch: NodeWatch | None = None
        #: exits that could not be recorded yet (ZooKeeper was unreachable): job id to
        #: (attempt, how it ended, its status version)
        self._unrecorded: dict[str, tuple[int, str, int | None]] = {}

    # -- membership ----------------------------------------------------------------------------

    def register(self) -> None:
        """Create our member record in this session; refuse if another daemon has our id."""
        layout, zk = self.cluster.layout, self.cluster.zk
        info = MemberInfo(
            version=None,
            member_id=self.member_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            slots=self.settings.max_drivers,
            started=utc_now(),
            labels=dict(self.settings.labels) or None,
        )
        path = layout.member(self.member_id)
        try:
            zk.create(path, info.to_bytes(), ephemeral=True)
        except HandleExists:
            if not is_own_ephemeral(zk.exists(path), zk):
                raise DuplicateMember(self._holder(path)) from None
        zk.ensure_path(layout.member_assignments(self.member_id))
        if self._watch is None:
            self._watch = NodeWatch(
                zk,
                layout.member_assignments(self.member_id),
                lambda _: self._notify(),
                children=True,
            )
        logger.info(
            "member %s registered: %d driver slot(s), labels %s",
            self.member_id,
            self.settings.max_drivers,
            dict(self.settings.labels) or "none",
        )

    def _holder(self, path: str) -> str:
        try:
            data, stat = self.cluster.zk.get(path)
            other = MemberInfo.from_znode(data, stat, path)
            who = f" (host {other.host}, pid {other.pid}, since {other.started})"
        except (HandleNotFound, CorruptRecord):
            who = ""
        return f"daemon id {self.member_id!r} is in use by another live daemon{who}: use --id"

    def ensure_registered(self) -> None:
        """After a new session, our ephemeral record is gone: make it again."""
        if not is_own_ephemeral(
            self.cluster.zk.exists(self.cluster.layout.member(self.member_id)), self.cluster.zk
        ):
            self.register()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    @property
    def running_drivers(self) -> int:
        return sum(1 for launch in self.launches.values() if launch.alive)

    # -- assignments ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Launch the attempts newly placed here; kill launches whose placement was withdrawn
        before their driver took ``running``."""
        self._record_exits_left()
        layout, zk = self.cluster.layout, self.cluster.zk
        directory = layout.member_assignments(self.member_id)
        try:
            names = zk.children(directory)
        except HandleNotFound:
            names = []
        found = zk.get_many([f"{directory}/{name}" for name in names])
        current: dict[str, Assignment] = {}
        for name, item in zip(names, found, strict=True):
            if item is None:
                continue
            try:
                current[name] = Assignment.from_znode(item[0], item[1], f"{directory}/{name}")
            except CorruptRecord as exc:
                logger.warning("ignoring an unreadable assignment: %s", exc)
        for job_id, assignment in current.items():
            self._launch(job_id, assignment)
        for job_id, launch in list(self.launches.items()):
            placed = current.get(job_id)
            if launch.alive and (placed is None or placed.attempt != launch.attempt):
                self._withdraw(launch)

    def _launch(self, job_id: str, assignment: Assignment) -> None:
        launch = self.launches.get(job_id)
        if launch is not None and (
            launch.attempt > assignment.attempt
            or (
                launch.attempt == assignment.attempt
                and self._placed.get(job_id) == assignment.assigned
            )
        ):
            return  # launched already (or a newer one is); the same attempt placed anew is a
            # new run of the id (its result expired or was forgotten): attempts count from 1
        if assignment.exited is not None:
            return  # its driver ran here and is gone: the leader will look at it
        self._resign(job_id, assignment)
        try:
            launch = self.launcher.launch(job_id, assignment.attempt, assignment.status_version)
        except OSError as exc:
            logger.error("job %s: cannot start a driver: %s", job_id, exc)
            self._record_exit_quietly(job_id, assignment.attempt, f"could not start: {exc}", None)
            return
        self.launches[job_id] = launch
        self._placed[job_id] = assignment.assigned
        threading.Thread(
            target=self._await_exit, args=(launch,), name=f"driver-{job_id}", daemon=True
        ).start()
        logger.info(
            "job %s: attempt %d started on %s, driver pid %d; log %s",
            job_id,
            assignment.attempt,
            socket.gethostname(),
            launch.process.pid,
            launch.log_path,
        )

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

    def _await_exit(self, launch: Launch) -> None:
        launch.process.wait()
        self._exited(launch)  # posts to the loop: the loop's thread records it

    def _withdraw(self, launch: Launch) -> None:
        running = self._running(launch.job_id)
        if running is not None and running.attempt == launch.attempt:
            return  # it holds running: its own fence decides, and it stops itself if superseded
        logger.warning(
            "job %s: attempt %d was placed elsewhere before its driver started: stopping it",
            launch.job_id,
            launch.attempt,
        )
        launch.process.kill()

    def _running(self, job_id: str) -> RunningInfo | None:
        try:
            found = self.cluster.state.running(job_id)
        except CorruptRecord:
            return None
        return found[0] if found is not None else None

    # -- exits ---------------------------------------------------------------------------------

    def driver_exited(self, launch: Launch) -> None:
        """Record how the driver ended; release its ``running`` node if it died holding it."""
        # The driver removes its working directory itself, unless it was killed.
        shutil.rmtree(launch.work_dir, ignore_errors=True)
        code = launch.exit_code
        how = describe_exit(code)
        logger.info(
            "driver of %s attempt %d (pid %d) %s",
            launch.job_id,
            launch.attempt,
            launch.process.pid,
            how,
        )
        self._record_exit_quietly(launch.job_id, launch.attempt, how, launch.status_version)

    def _record_exit_quietly(
        self, job_id: str, attempt: int, how: str, status_version: int | None
    ) -> None:
        """Record the exit; one that cannot be recorded now (an outage) is kept and recorded at
        the next :meth:`sync` (the daemon syncs when its session is back), so that the leader
        need not wait for its launch deadline to learn that the attempt is gone."""
        self._unrecorded.pop(job_id, None)
        try:
            self._record_exit(job_id, attempt, how, status_version)
        except (ConflictError, HandleNotFound) as exc:
            logger.debug("job %s: exit of attempt %d not recorded (%s)", job_id, attempt, exc)
        except ZkStoreError as exc:
            self._unrecorded[job_id] = (attempt, how, status_version)
            logger.warning(
                "job %s: exit of attempt %d not recorded yet (will retry): %s", job_id, attempt, exc
            )

    def _record_exits_left(self) -> None:
        for job_id, (attempt, how, status_version) in list(self._unrecorded.items()):
            self._record_exit_quietly(job_id, attempt, how, status_version)

    def _record_exit(self, job_id: str, attempt: int, how: str, status_version: int | None) -> None:
        layout, zk = self.cluster.layout, self.cluster.zk
        path = layout.assignment(self.member_id, job_id)
        data, stat = zk.get(path)
        assignment = Assignment.from_znode(data, stat, path)
        if assignment.attempt != attempt:
            return  # a newer attempt is placed here now
        ended = Assignment(**{**assignment.as_dict(), "exited": how, "version": None})
        ops: list[Check | SetData | Delete] = [SetData(path, ended.to_bytes(), stat.version)]
        running = self._running(job_id)
        if status_version is not None and running is not None and running.attempt == attempt:
            # Our driver died holding running: its session has not expired yet, but the
            # process is gone (we reaped it). Release the node now, only if it is still this
            # attempt's (the status version), so that the leader need not wait for the expiry.
            ops += [Check(layout.status(job_id), status_version), Delete(layout.running(job_id))]
        zk.commit(ops)
