"""The job result store (FLIP-194's idea, in ZooKeeper): ``R/results/<job>``.

A result is written DIRTY before any cleanup of the job starts and marked CLEAN once every other
trace of the job is gone. A job with a result, dirty or clean, is never run again; a dirty result
tells a new leader to finish the cleanup.

``R/cleanup/<job>`` indexes the dirty results: it is created in the transaction that records a
result DIRTY and deleted in the one that marks it CLEAN, so that a new leader lists that small
index instead of reading every result. CLEAN results are kept for the retention period of the
daemon (``--keep-results``), then deleted by the leader: only then may the id run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from zkstore.errors import (
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    InvalidJobId,
    VersionConflict,
)
from zkstore.layout import Layout, validate_job_id
from zkstore.records.job_records import CancelRequest
from zkstore.records.job_states import CLEAN, DIRTY, OUTCOMES
from zkstore.records.record import short_error
from zkstore.records.result_records import JobResult
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Create, Delete, Fence, Op, SetData, absent
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["JobResultStore", "ResultDetails", "is_job_id"]


class ResultDetails(TypedDict, total=False):
    """What a result keeps of its job besides the outcome: the last error, the name and the
    handle's summary, the cancel request and the log of the last attempt."""

    error: str | None
    name: str | None
    summary: Mapping[str, Any] | None
    cancel: CancelRequest | None
    log: str | None
    daemon: str | None
    failures: int | None
    lost: int | None
    #: when the job ended, as the writer's clock says (a leader's: ZooKeeper's time); now if
    #: not given
    finished: datetime


class JobResultStore:
    """Create a dirty result (once), mark it clean (idempotent), read and list results."""

    def __init__(self, zk: ZooKeeper, layout: Layout) -> None:
        self.zk = zk
        self.layout = layout

    def create_dirty(
        self,
        job_id: str,
        outcome: str,
        *,
        attempts: int,
        fence: Fence | None = None,
        extra_ops: Sequence[Op] = (),
        **details: Unpack[ResultDetails],
    ) -> JobResult:
        """Record the job's outcome. Raises :class:`HandleExists` if any result exists.
        ``extra_ops`` are committed with it (the outbox entries of its notification).

        ``details`` (see :class:`ResultDetails`) are kept so that the job can still be described
        once everything else of it is cleaned up.
        """
        result = self.new_result(job_id, outcome, attempts=attempts, **details)
        path = self.layout.result(job_id)
        index = self.layout.cleanup_entry(job_id)

        looked = False  # a first try assumes no stale index entry: no look before the write

        def record() -> JobResult:
            nonlocal looked
            try:
                ops = self.dirty_ops(result) if looked else self._dirty_ops(result, stale=None)
                self.zk.commit([*ops, *extra_ops], fence=fence)
            except HandleExists as exc:
                if exc.path == path:
                    raise HandleExists(f"job {job_id} already has a result", path=path) from None
                if exc.path == index:  # a stale index entry is there: set it instead
                    looked = True
                    raise TryAgain(str(exc)) from exc
                raise
            except HandleNotFound as exc:
                if exc.path == index:  # the stale index entry went away meanwhile: create it
                    raise TryAgain(str(exc)) from exc
                raise
            return result.with_version(0)

        return RACES.call(record, what=f"the result of job {job_id}", path=path)

    def new_result(
        self, job_id: str, outcome: str, *, attempts: int, **details: Unpack[ResultDetails]
    ) -> JobResult:
        """A DIRTY result of ``outcome``, finished now (not written yet)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        summary, cancel = details.get("summary"), details.get("cancel")
        return JobResult(
            version=None,
            job_id=job_id,
            state=DIRTY,
            outcome=outcome,
            attempts=attempts,
            finished=details.get("finished") or utc_moment(),
            error=short_error(details.get("error")),
            name=details.get("name"),
            summary=dict(summary) if summary else None,
            cancel=None
            if cancel is None
            else {k: v for k, v in cancel.as_dict().items() if k != "version"},
            log=details.get("log"),
            daemon=details.get("daemon"),
            failures=details.get("failures"),
            lost=details.get("lost"),
        )

    def dirty_ops(self, result: JobResult) -> list[Op]:
        """The ops that record ``result`` (DIRTY) with its cleanup index entry; they fail with
        :class:`HandleExists` on the result's path if the job has a result already.

        The index entry is only ever present with a DIRTY result; one left by hand (or by a
        writer older than the index) is set rather than created, so that it never blocks a job
        from finishing.
        """
        stale = self.zk.exists(self.layout.cleanup_entry(result.job_id))
        return self._dirty_ops(result, stale=None if stale is None else stale.version)

    def _dirty_ops(self, result: JobResult, *, stale: int | None) -> list[Op]:
        """:meth:`dirty_ops`, given the version of a stale index entry (``None``: none)."""
        index = self.layout.cleanup_entry(result.job_id)
        index_op: Op = Create(index) if stale is None else SetData(index, b"", stale)
        return [Create(self.layout.result(result.job_id), result.to_bytes()), index_op]

    def mark_clean(
        self,
        job_id: str,
        *,
        fence: Fence | None = None,
        logs_until: datetime | None = None,
        known: JobResult | None = None,
    ) -> JobResult:
        """Mark the result clean, with the end of its logs' retention if they are kept, and drop
        its cleanup index entry in the same transaction; marking a clean one again is fine, a
        missing one raises. ``known``: the result as its writer last wrote it (with its
        version), written over with no read first; a stale one is read again."""
        return self._update(
            job_id,
            lambda current: (
                None
                if current.state == CLEAN
                else replace(current, state=CLEAN, logs_until=logs_until)
            ),
            fence,
            drop_index=True,
            known=known,
        )

    def logs_removed(self, job_id: str, *, fence: Fence | None = None) -> JobResult:
        """Drop ``logs_until`` from a clean result: its logs are gone (idempotent)."""
        return self._update(
            job_id,
            lambda current: (
                None
                if current.state != CLEAN or current.logs_until is None
                else replace(current, logs_until=None)
            ),
            fence,
        )

    def record_outputs(
        self, job_id: str, outputs: Mapping[str, str], *, fence: Fence | None = None
    ) -> JobResult:
        """Add ``outputs`` (name: URI, the artifacts the job keeps) to its result; idempotent.

        Raises :class:`HandleNotFound` if the job has no result.
        """

        def add(current: JobResult) -> JobResult | None:
            merged = {**(current.outputs or {}), **outputs}
            return None if merged == current.outputs else replace(current, outputs=merged)

        return self._update(job_id, add, fence)

    def _update(
        self,
        job_id: str,
        change: Callable[[JobResult], JobResult | None],
        fence: Fence | None,
        *,
        drop_index: bool = False,
        known: JobResult | None = None,
    ) -> JobResult:
        """Apply ``change`` (None: nothing to do) with a version check, re-reading on conflict
        (a first try on ``known``, if given, reads nothing); with ``drop_index``, delete the
        job's cleanup index entry in the same transaction."""
        path = self.layout.result(job_id)
        index = self.layout.cleanup_entry(job_id)
        index_there = True

        def update() -> JobResult:
            nonlocal index_there, known
            current = known if known is not None and known.version is not None else None
            known = None  # a try again (a stale version) reads
            if current is None:
                current = self.get(job_id)
            if current is None:
                raise HandleNotFound(f"job {job_id} has no result", path=path)
            changed = change(current)
            if changed is None:
                return current
            assert current.version is not None
            ops: list[Op] = [SetData(path, changed.to_bytes(), current.version)]
            if drop_index and index_there:  # a DIRTY result has one: no look before
                ops.append(Delete(index))
            try:
                self.zk.commit(ops, fence=fence)
            except HandleNotFound as exc:
                if exc.path != index:
                    raise
                index_there = False  # none there (dropped by hand, or an older writer)
                raise TryAgain(str(exc)) from exc
            return changed.with_version(current.version + 1)

        return RACES.call(
            update, what=f"the result of job {job_id}", retry_on=(VersionConflict,), path=path
        )

    def get(self, job_id: str) -> JobResult | None:
        path = self.layout.result(job_id)
        found = self.zk.get_if_exists(path)
        return None if found is None else JobResult.from_znode(*found, path)

    def read_many(self, job_ids: Sequence[str]) -> tuple[list[JobResult], dict[str, str]]:
        """The readable results of ``job_ids`` (pipelined reads; absent ones are left out) and,
        by job id, why the others could not be read: one garbage record never hides the rest."""
        found = self.zk.get_many([f"{self.layout.results}/{job_id}" for job_id in job_ids])
        results: list[JobResult] = []
        unreadable: dict[str, str] = {}
        for name, item in zip(job_ids, found, strict=True):
            if item is None:
                continue
            try:
                result = JobResult.from_znode(item[0], item[1], self.layout.result(name))
            except (CorruptRecord, InvalidJobId) as exc:
                unreadable[name] = str(exc)
                continue
            if result.job_id != name:
                unreadable[name] = f"result of {name} names job {result.job_id!r:.140}"
                continue
            results.append(result)
        return results, unreadable

    def all(self) -> tuple[list[JobResult], dict[str, str]]:
        """Every readable result, by job id, and why the others could not be read."""
        return self.read_many(sorted(self.zk.children(self.layout.results)))

    def dirty(self) -> list[JobResult]:
        return [r for r in self.all()[0] if r.state == DIRTY]

    def cleanup_pending(self) -> list[str]:
        """Ids of the jobs whose result is DIRTY, from the index (one small listing)."""
        return sorted(n for n in self.zk.children(self.layout.cleanup) if is_job_id(n))

    def removal_ops(self, result: JobResult) -> list[Op]:
        """The ops that delete a CLEAN result read at its version, so that its id may run
        again. They fail if the result changed meanwhile, or if the job has records under
        ``R/jobs/<job>`` (a late cancel request, say), which a new job of that id would
        inherit: delete those first."""
        if result.state != CLEAN or result.version is None:
            raise ValueError(f"only a CLEAN result read from ZooKeeper is removed: {result}")
        return [
            *absent(self.layout.job_dir(result.job_id)),
            Delete(self.layout.result(result.job_id), result.version),
        ]


def is_job_id(name: str) -> bool:
    """True for a node name that is a valid job id (a name planted by hand is not)."""
    try:
        validate_job_id(name)
    except InvalidJobId:
        return False
    return True
