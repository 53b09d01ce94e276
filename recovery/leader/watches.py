"""The leader's watches of its jobs' nodes: each one fired is a look at its job.

A look asks to watch a job's nodes (:meth:`JobWatches.want`: its ``running`` node, its
assignment), and always its ``cancel`` and ``stop`` nodes, so that ``zkstore jobs cancel`` and
``zkstore jobs stop`` are acted on at once, not at the next periodic pass. The watches a batch of
looks asked for are armed at its end in one pipelined round (``exists`` with a watch: a node's
creation fires it too), less those still armed: a one-shot watch that has not fired tells that
its node has not changed since it was armed, so asking again would only cost a request.

One watcher per job, so that arming again never stacks up watchers in kazoo; it is dropped when
the job's cleanup is done (:meth:`JobWatches.forget`), which makes the events of its watches
stale (:meth:`JobWatches.current`) and takes back those still armed (a finished job's cancel
and stop nodes are never made: their watches would be kept for the life of the session). A
watcher knows which of its watches are armed: marked before
they are asked for (one that fires at once is taken out after), taken out as each fires, all of
them by a session event (kazoo fires every pending watch with one that names no path, and does
not set them again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.protocol.states import EventType, WatchedEvent

from recovery.leader.loop import Event
from zkstore.layout import Layout

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["JOB_CHANGED", "Fired", "JobWatcher", "JobWatches", "arming"]

#: The loop's event about one job: a look at it.
JOB_CHANGED = "job-changed"


class JobWatcher:
    """The watcher of one job's nodes: its event's data says which watcher fired and what."""

    def __init__(self, owner: object, job_id: str, post: Callable[[Event], None]) -> None:
        #: the leadership the watcher was made for (an earlier one's events are never stale)
        self.owner = owner
        self.job_id = job_id
        self._post = post
        #: the paths its watches are armed on (see the module's docstring)
        self.armed: set[str] = set()

    def __call__(self, event: WatchedEvent) -> None:  # kazoo's thread
        if event.path:
            self.armed.discard(event.path)
        else:
            self.armed.clear()
        created = event.path if event.type == EventType.CREATED else None
        deleted = event.path if event.type == EventType.DELETED else None
        self._post(Event(JOB_CHANGED, self.job_id, data=Fired(self, created, deleted)))


@dataclass(frozen=True)
class Fired:
    """A job's watch fired: its watcher, and the node it reports created or deleted (both
    None: changed, or a session event)."""

    watcher: JobWatcher
    created: str | None
    deleted: str | None = None


@contextlib.contextmanager
def arming(watches: Iterable[tuple[str, JobWatcher]]) -> Iterator[None]:
    """Mark ``watches`` armed for the block that asks for them; if it fails, unmarked (some
    may be armed: asked for again, at worst)."""
    marked = list(watches)
    for path, watcher in marked:
        watcher.armed.add(path)
    try:
        yield
    except BaseException:
        for path, watcher in marked:
            watcher.armed.discard(path)
        raise


class JobWatches:
    """The watches of one leadership (loop thread, except the watchers' calls)."""

    def __init__(
        self, zk: ZooKeeper, layout: Layout, owner: object, post: Callable[[Event], None]
    ) -> None:
        self._zk = zk
        self._layout = layout
        self._owner = owner
        self._post = post
        self._watchers: dict[str, JobWatcher] = {}
        self._wanted: dict[str, list[str]] = {}

    def want(self, job_id: str, *paths: str) -> None:
        """Watch the job's cancel and stop nodes and ``paths``, from the next :meth:`arm`."""
        self._wanted.setdefault(job_id, []).extend(paths)

    def watcher(self, job_id: str) -> JobWatcher:
        found = self._watchers.get(job_id)
        if found is None:
            found = self._watchers[job_id] = JobWatcher(self._owner, job_id, self._post)
        return found

    def arm(self) -> None:
        """Arm what was wanted since the last call and is not armed, in one pipelined round."""
        layout, watches = self._layout, {}
        for job_id, paths in sorted(self._wanted.items()):
            watcher = self.watcher(job_id)
            for path in (layout.cancel(job_id), layout.stop(job_id), *paths):
                if path not in watcher.armed:
                    watches[path] = watcher
        self._wanted.clear()
        if watches:
            with arming(watches.items()):
                self._zk.watch_many(watches)

    def current(self, watcher: JobWatcher) -> bool:
        """Whether ``watcher`` is its job's now (not one dropped with a cleanup), or one of an
        earlier leadership (whose events always count)."""
        return watcher.owner is not self._owner or self._watchers.get(watcher.job_id) is watcher

    def forget(self, job_id: str) -> None:
        """The job's cleanup is done: the events of its watches are stale from now on, and the
        watches still armed are taken back (:meth:`ZooKeeper.forget_watches`): its cancel and
        stop nodes are never made again, and kazoo would keep their watcher, and ZooKeeper its
        watch, for the life of the session (a leader's memory grew with every job it had seen).
        """
        self._wanted.pop(job_id, None)
        watcher = self._watchers.pop(job_id, None)
        if watcher is None:
            return
        layout = self._layout
        paths = {*watcher.armed, layout.cancel(job_id), layout.stop(job_id), layout.running(job_id)}
        watcher.armed.clear()
        self._zk.forget_watches(dict.fromkeys(paths, watcher))
