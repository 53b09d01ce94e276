"""The job graph store: job definitions under ``R/currentJobs``, one handle per job.

``R/currentJobs`` holds a job iff a newly elected leader must recover it (invariant 2): a job
enters at submission, and leaves only after its result is recorded (see
:class:`~zkstore.results.JobResultStore`). Submission is refused for a job id that already has a
result, atomically with the create, so a finished job can never be resurrected.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from zkstore.errors import IncompatiblePayload, JobFinished, JobQuarantined
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.sealed import DefinitionSerializer
from zkstore.layout import Layout, StorageLayout, validate_job_id
from zkstore.payloads.entries import Entry, GetAllResult
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.records.handle import Handle, SummaryValue
from zkstore.zookeeper.ops import Fence, Op
from zkstore.zookeeper.watch import NodeWatch, WatchedValue

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["ADDED", "REMOVED", "JobGraphStore", "JobGraphWatch"]

logger = logging.getLogger(__name__)

ADDED = "added"
REMOVED = "removed"


class JobGraphStore:
    """Put, recover, list and remove job definitions; watch for jobs added and removed."""

    def __init__(
        self,
        zk: ZooKeeper,
        layout: Layout,
        storage: StateStorage,
        storage_layout: StorageLayout,
        *,
        instance_id: str | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.zk = zk
        self.layout = layout
        self.handles: ZooKeeperStateHandleStore[JobDefinition] = ZooKeeperStateHandleStore(
            zk,
            layout.current_jobs,
            storage,
            DefinitionSerializer(),
            payload_prefix=storage_layout.definitions,
            instance_id=instance_id,
            on_step=on_step,
        )

    def submit(
        self,
        definition: JobDefinition,
        *,
        fence: Fence | None = None,
        keep_lock: bool = False,
        summary: Mapping[str, SummaryValue] | None = None,
        with_ops: Sequence[Op] = (),
    ) -> Handle:
        """Store a new job; durable once this returns. The one way a job is made: a client's
        submission and a schedule's fire both come here. ``summary`` adds fields to the
        handle's summary (``after``, the submission's fingerprint, a run's schedule and window);
        ``with_ops`` are committed in the same transaction, under ``fence`` too (a schedule's
        state, the previous run's cancel).

        Raises :class:`HandleExists` if the job id is in use (or an op of ``with_ops`` meets a
        node that exists: its ``path`` says which), :class:`JobFinished` if it already has a
        result, :class:`JobQuarantined` if it is in quarantine, ``fence``'s error, or what an
        op of ``with_ops`` raises. Unless ``keep_lock``, the job is published without this
        instance's lock (taking one only to drop it would be two more writes), so that a
        long-lived client never blocks the job's cleanup. A crash at any line leaves the job
        published with its payload, or an orphan payload (invariant 1).
        """
        job_id = definition.job_id
        return self.handles.add(
            job_id,
            definition,
            summary={**definition.summary(), **(summary or {})},
            fence=(fence or Fence()) + self._new_job(job_id),
            lock=keep_lock,
            with_ops=with_ops,
        )

    def submit_many(
        self,
        runs: Sequence[tuple[JobDefinition, Mapping[str, SummaryValue]]],
        *,
        fence: Fence | None = None,
        with_ops: Sequence[Op] = (),
    ) -> list[Handle]:
        """Store several new jobs in ONE transaction (all or none), each with the fences and
        the summary :meth:`submit` gives it, and ``with_ops``: a schedule's windows fired
        together. Raises as :meth:`submit` does (which job: the error's path or message); a
        job id whose node is marked for deletion raises :class:`HandleExists` too (submit it
        alone). The caller bounds the count (ZooKeeper's request limit)."""
        guards = fence or Fence()
        for definition, _ in runs:
            guards = guards + self._new_job(definition.job_id)
        return self.handles.add_many(
            [(d.job_id, d, {**d.summary(), **summary}) for d, summary in runs],
            fence=guards,
            lock=False,
            with_ops=with_ops,
        )

    def _new_job(self, job_id: str) -> Fence:
        """The fences of a new job: no result, not in quarantine."""
        return self.not_finished(job_id) + Fence.absent(
            self.layout.quarantine_entry(job_id),
            error=JobQuarantined,
            description=f"job {job_id} is in quarantine",
        )

    def not_finished(self, job_id: str) -> Fence:
        """A fence that fails with :class:`JobFinished` while the job has a result (kept for
        the retention period: until it is deleted, the id never runs again)."""
        return Fence.absent(
            self.layout.result(job_id),
            error=JobFinished,
            description=f"job {job_id} already has a result and cannot run again",
        )

    def recover(self, job_id: str, *, lock: bool = True) -> Entry[JobDefinition]:
        """Load and verify one job's definition (signature, size, sha256, Python version).

        Raises :class:`~zkstore.errors.HandleNotFound`, :class:`~zkstore.errors.CorruptHandle`
        or a :class:`~zkstore.errors.PayloadError`; the caller quarantines such a job.
        """
        entry = self.handles.get(validate_job_id(job_id), lock=lock)
        try:
            _check_own(job_id, entry.state)
        except IncompatiblePayload:
            if lock:
                self.handles.release(job_id)
            raise
        return entry

    def verify_definition(self, job_id: str, handle: Handle) -> JobDefinition:
        """Load the definition ``handle`` points at as :meth:`recover` would, wherever the handle
        is kept (a quarantine entry's copy): from under the job's own storage prefix only,
        verified (size, sha256, signature, Python version), and unpickled to this job's
        :class:`JobDefinition`. Nothing of the job runs: its code stays pickled inside.

        Raises a :class:`~zkstore.errors.PayloadError` or
        :class:`~zkstore.errors.StoreUnavailable`.
        """
        definition = self.handles.load(validate_job_id(job_id), handle)
        _check_own(job_id, definition)
        assert isinstance(definition, JobDefinition)
        return definition

    def recover_all(self, *, lock: bool = False) -> GetAllResult[JobDefinition]:
        """Every job's verified definition; broken ones are reported, never raised."""
        return self.handles.get_all(lock=lock)

    def job_ids(self) -> list[str]:
        return self.handles.names()

    def summaries(self) -> dict[str, Handle]:
        """Every live job's handle (with its summary), without reading a payload."""
        good, _ = self.handles.handles()
        return dict(good)

    def remove(self, job_id: str, *, fence: Fence | None = None) -> bool:
        """Remove the job's handle and payload; False while another instance holds a lock."""
        return self.handles.remove(validate_job_id(job_id), fence=fence)

    def release_all(self) -> None:
        self.handles.release_all()

    def watch(self, emit: Callable[[str, str], None], *, initial: bool = False) -> JobGraphWatch:
        """Report jobs added and removed as ``emit(ADDED|REMOVED, job_id)``.

        ``emit`` runs on kazoo's watch thread: it must only hand the event over (a queue put).
        With ``initial``, the jobs present now are reported as added first.
        """
        return JobGraphWatch(self.zk, self.layout.current_jobs, emit, initial=initial)


def _check_own(job_id: str, definition: object) -> None:
    """Raise :class:`IncompatiblePayload` unless ``definition`` is ``job_id``'s definition."""
    if isinstance(definition, JobDefinition) and definition.job_id == job_id:
        return
    what = (
        f"the definition of job {definition.job_id!r:.140}"
        if isinstance(definition, JobDefinition)
        else f"a {type(definition).__name__}"
    )
    raise IncompatiblePayload(f"the payload of job {job_id} holds {what}, not its own")


class JobGraphWatch:
    """A children watch on ``R/currentJobs`` turned into added / removed events."""

    def __init__(
        self, zk: ZooKeeper, path: str, emit: Callable[[str, str], None], *, initial: bool
    ) -> None:
        self._emit = emit
        self._known: set[str] | None = None if initial else set(zk.children(path))
        self._lock = threading.Lock()
        self._watch = NodeWatch(zk, path, self._on_children, children=True)

    def _on_children(self, children: WatchedValue) -> None:
        current = set(children) if isinstance(children, list) else set()
        with self._lock:
            previous, self._known = self._known or set(), current
        for job_id in sorted(current - previous):
            self._emit(ADDED, job_id)
        for job_id in sorted(previous - current):
            self._emit(REMOVED, job_id)

    def stop(self) -> None:
        """No more events after this returns."""
        self._watch.stop()
