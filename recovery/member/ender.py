"""The member's side of an attempt the leader ended (``--timeout``, ``--progress-timeout``,
``zkstore jobs stop``): SIGTERM to the driver, the grace, SIGKILL of its process group, and its
exit recorded only once nothing of it lives.

For each live launch the member watches ``R/jobs/<job>/end``; a request for the launch's attempt
starts an :class:`~recovery.member.ending.Ending`, stepped on every look (the watch, the driver's
exit, and a timer at the time the last step asked for). The driver is the leader of its own
session (``setsid``), so its process group is its Spark JVM and Python workers too; the group is
signalled by the driver's pid, which stays the group's id, and cannot be handed to a new group,
while any process of the group lives.

After a crash at any line: the ``end`` request stays until the leader records the attempt's
end, and a restarted member adopts the driver and starts the ending again from the request (the
grace counts from the leader's request time, so no second grace is granted); the exit is
recorded (the assignment's ``exited``, what the leader waits for) only by
:meth:`Endings.release`, after :class:`~recovery.member.ending.KnownDead`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from recovery.member import ending
from recovery.member.launcher import Launch
from zkstore.errors import AccessDenied, CorruptRecord, HandleNotFound, ZkStoreError
from zkstore.jobs import request_pins
from zkstore.jobs.stops import EndRequest
from zkstore.layout import Layout
from zkstore.zookeeper.watch import NodeWatch

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["Endings", "group_alive"]

logger = logging.getLogger(__name__)


def group_alive(pgid: int) -> bool:
    """Any process of the group ``pgid`` lives (a zombie counts: it is not reaped yet)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Endings:
    """The endings under way on this member. Loop thread only, except the watches and timers,
    which only call ``notify`` (the member looks again)."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        notify: Callable[[], None],
        record_exit: Callable[[Launch], None],
    ) -> None:
        self._zk = zk
        self._layout = layout
        self._notify = notify
        self._record_exit = record_exit
        self._watches: dict[str, NodeWatch] = {}
        #: job id -> the ``end`` node's data as its watch last reported it (None: absent): the
        #: watch's own reads are the member's only reads of it
        self._seen: dict[str, object] = {}
        self._seen_lock = threading.Lock()
        #: a watch being set reports the node's data at once, on this thread, within the look
        #: that reads it: no need to look again for that report
        self._arming: str | None = None
        self._arming_thread: threading.Thread | None = None
        #: job id -> the data of an ``end`` node for another attempt whose ACL was read and
        #: found to be the cluster's (:meth:`_not_the_leaders`)
        self._checked: dict[str, bytes] = {}
        #: job id -> (the launch, its ending, whether its exit waits to be recorded)
        self._ending: dict[str, tuple[Launch, ending.Ending, bool]] = {}

    def stop(self) -> None:
        for watch in self._watches.values():
            watch.stop()
        self._watches.clear()

    def _saw(self, job_id: str, value: object) -> None:
        """The watch of the job's ``end`` node reported its data (kazoo's threads): keep it,
        and have the member look."""
        with self._seen_lock:
            self._seen[job_id] = value
            arming = self._arming == job_id and threading.current_thread() is self._arming_thread
        if not arming:
            self._notify()

    def _end_nodes(self, jobs: list[str]) -> list[tuple[bytes, None] | AccessDenied | None]:
        """The ``end`` node of each job: as its watch last reported it, or read (pipelined)
        where no watch could be set; :class:`AccessDenied` where the cluster may not read it."""
        unwatched = [job for job in jobs if job not in self._watches]
        read: dict[str, tuple[bytes, None] | AccessDenied | None] = {}
        if unwatched:
            try:
                found = self._zk.get_many_or_denied([self._layout.end(job) for job in unwatched])
            except ZkStoreError as exc:
                logger.warning("end requests not read (%s): looking again later", exc)
                found = [None] * len(unwatched)
            read = {
                job: item if isinstance(item, AccessDenied) else (item[0], None) if item else None
                for job, item in zip(unwatched, found, strict=True)
            }
        with self._seen_lock:
            seen = {job: self._seen.get(job) for job in jobs if job in self._watches}
        for job, value in seen.items():
            if isinstance(value, AccessDenied):
                read[job] = value
            else:
                read[job] = (value, None) if isinstance(value, bytes) else None
        return [read.get(job) for job in jobs]

    def ending(self, launch: Launch) -> bool:
        """The launch's attempt is being ended."""
        found = self._ending.get(launch.job_id)
        return found is not None and found[0] is launch

    def check(self, launches: dict[str, Launch]) -> None:
        """Watch the ``end`` node of every live launch, start the endings of the requests for
        their attempts, and step every ending under way."""
        live = {job: launch for job, launch in launches.items() if launch.alive}
        for job_id in list(self._watches):
            if job_id not in live and job_id not in self._ending:
                self._watches.pop(job_id).stop()
                with self._seen_lock:
                    self._seen.pop(job_id, None)
                self._checked.pop(job_id, None)
        for job_id in live:
            if job_id not in self._watches:
                self._arming, self._arming_thread = job_id, threading.current_thread()
                try:
                    self._watches[job_id] = NodeWatch(
                        self._zk,
                        self._layout.end(job_id),
                        functools.partial(self._saw, job_id),
                        denied=True,
                    )
                except ZkStoreError:
                    pass
                finally:
                    self._arming = None
        fresh = [job for job in live if job not in self._ending]
        for job_id, item in zip(fresh, self._end_nodes(fresh), strict=True):
            if item is None:
                continue
            self._look_at(live[job_id], item)
        for job_id in list(self._ending):
            self._step(job_id)

    def _look_at(self, launch: Launch, item: tuple[bytes, None] | AccessDenied) -> None:
        """Start the ending the job's ``end`` node asks for the launch's attempt, if it does;
        one the job's identity made is ended as if asked (:meth:`_end_planted`)."""
        job_id = launch.job_id
        if isinstance(item, AccessDenied):
            self._end_planted(launch, "with an ACL the cluster may not read")
            return
        try:
            request: EndRequest | None = EndRequest.from_znode(
                item[0], item[1], self._layout.end(job_id)
            )
        except CorruptRecord as exc:
            request, unreadable = None, exc
        if request is None or request.attempt != launch.attempt:
            # Not a request for this attempt: the leader's for another (ignored), or the job's
            # own, made first so that the leader's could not replace it.
            why = self._not_the_leaders(job_id, item[0])
            if why is not None:
                self._end_planted(launch, why)
            elif request is None:
                logger.warning("job %s: ignoring an unreadable end request: %s", job_id, unreadable)
            return
        logger.warning(
            "job %s: ending attempt %d (pid %d) as the leader asked: %s%s",
            job_id,
            launch.attempt,
            launch.process.pid,
            request.reason,
            f" ({request.detail})" if request.detail else "",
        )
        requested = request.requested.timestamp()
        started = ending.start(launch.attempt, requested, request.grace_ms / 1000, time.time())
        self._ending[job_id] = (launch, started, False)

    def _not_the_leaders(self, job_id: str, data: bytes) -> str | None:
        """Why the job's ``end`` node (holding ``data``) cannot be the leader's, None if it may
        be (:func:`~zkstore.jobs.request_pins.shut_out`: read once per content)."""
        if self._checked.get(job_id) == data:
            return None
        try:
            why = request_pins.shut_out(self._zk, self._layout.end(job_id))
        except HandleNotFound:
            return None
        except ZkStoreError as exc:
            logger.warning("job %s: the ACL of its end node not read (%s)", job_id, exc)
            return None
        if why is None:
            self._checked[job_id] = data
        return why

    def _end_planted(self, launch: Launch, why: str) -> None:
        """The job's ``end`` node is not one the leader can have written (``why``: an ACL the
        cluster may not read, or one that keeps it from changing the node): only the job's own
        identity can have made it (no other may create under its node), so that no request of
        the leader's could be written there. Its driver is ended as if asked (a job can always
        end itself), after :data:`ending.MIN_GRACE`."""
        logger.warning(
            "job %s: ending attempt %d (pid %d): its end node was made by the job's identity, "
            "%s (a request only the leader writes)",
            launch.job_id,
            launch.attempt,
            launch.process.pid,
            why,
        )
        now = time.time()
        self._ending[launch.job_id] = (
            launch,
            ending.start(launch.attempt, now, ending.MIN_GRACE, now),
            False,
        )

    def release(self, launch: Launch) -> bool:
        """The launch's driver exited: True if its exit may be recorded now; False while it is
        being ended and something of its group lives (it is recorded once nothing does)."""
        found = self._ending.get(launch.job_id)
        if found is None or found[0] is not launch or self._step(launch.job_id):
            return True
        launch, current, _ = self._ending[launch.job_id]
        self._ending[launch.job_id] = (launch, current, True)
        return False

    def _step(self, job_id: str) -> bool:
        """One step of the job's ending; True once nothing of its driver lives."""
        launch, current, exit_waits = self._ending[job_id]
        pid = launch.process.pid
        now = time.time()
        driver_alive = launch.alive
        current, actions = ending.step(
            current, now, driver_alive=driver_alive, group_alive=group_alive(pid)
        )
        self._ending[job_id] = (launch, current, exit_waits)
        for action in actions:
            if isinstance(action, ending.SendTerm):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            elif isinstance(action, ending.KillGroup):
                logger.warning(
                    "job %s: attempt %d: SIGKILL to the process group of pid %d",
                    job_id,
                    launch.attempt,
                    pid,
                )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                if driver_alive:  # not our process group's leader any more? kill it anyway
                    with contextlib.suppress(ProcessLookupError):
                        launch.process.kill()
            elif isinstance(action, ending.WaitUntil):
                timer = threading.Timer(max(0.05, action.at - now), self._notify)
                timer.daemon = True
                timer.start()
            elif isinstance(action, ending.Unkillable):
                logger.error(
                    "job %s: attempt %d: its driver (pid %d) or its group is still alive %.0f s "
                    "after SIGKILL: the job does not move on until it is gone",
                    job_id,
                    launch.attempt,
                    pid,
                    now - action.since,
                )
            elif isinstance(action, ending.KnownDead):
                del self._ending[job_id]
                watch = self._watches.pop(job_id, None)
                if watch is not None:
                    watch.stop()
                logger.info("job %s: attempt %d ended: nothing of it lives", job_id, launch.attempt)
                if exit_waits:
                    self._record_exit(launch)
                return True
        return False
