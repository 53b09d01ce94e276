"""Per-job coordinators: this daemon's handle on one job, given a leader context lazily.

A coordinator exists as soon as this daemon knows about the job, leader or not (a deposed
leader still has to reap the drivers it started). When leadership is granted, every coordinator
receives the :class:`~recovery.loop.LeaderContext` of that grant; when it is revoked, they lose it.
The thread that waits for a driver process to exit is the job's own thread: it never touches
ZooKeeper, it hands the exit to the leader's thread through the context, and whatever it hands
over under an ended leadership is dropped.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable

from recovery.launcher import Launch, describe_exit
from recovery.loop import Event, LeaderContext, Loop

logger = logging.getLogger(__name__)

DRIVER_EXITED = "driver-exited"


class JobCoordinator:
    """The launches of one job on this daemon, and the leader context if we lead."""

    def __init__(self, job_id: str, loop: Loop) -> None:
        self.job_id = job_id
        self._loop = loop
        self._lock = threading.Lock()
        self._context: LeaderContext | None = None
        self._on_exit: Callable[[Launch], None] | None = None
        self.launch: Launch | None = None

    def lazy_initialize(self, context: LeaderContext, on_exit: Callable[[Launch], None]) -> None:
        """Leadership was granted: from now on, driver exits go to ``on_exit`` on its thread."""
        with self._lock:
            self._context, self._on_exit = context, on_exit

    def revoke(self) -> None:
        with self._lock:
            self._context, self._on_exit = None, None

    def attach(self, launch: Launch) -> None:
        """Watch a driver this daemon started, from a thread of the job's own."""
        self.launch = launch
        thread = threading.Thread(
            target=self._await_exit, args=(launch,), name=f"driver-{self.job_id}", daemon=True
        )
        thread.start()

    def _await_exit(self, launch: Launch) -> None:
        code = launch.process.wait()
        # The driver removes its working directory itself, unless it was killed.
        shutil.rmtree(launch.work_dir, ignore_errors=True)
        logger.info(
            "driver of %s attempt %d (pid %d) %s",
            self.job_id,
            launch.attempt,
            launch.process.pid,
            describe_exit(code),
        )
        with self._lock:
            context, on_exit = self._context, self._on_exit
        handed_over = (
            context is not None and on_exit is not None and context.execute(lambda: on_exit(launch))
        )
        if not handed_over:
            # No leadership to act on it: leave a note for whoever looks at the job next.
            self._loop.post(Event(DRIVER_EXITED, self.job_id, code))

    @property
    def live_launch(self) -> Launch | None:
        launch = self.launch
        return launch if launch is not None and launch.alive else None
