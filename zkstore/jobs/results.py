"""The job result store (FLIP-194's idea, in ZooKeeper): ``R/results/<job>``.

A result is written DIRTY before any cleanup of the job starts and marked CLEAN once every other
trace of the job is gone. A job with a result, dirty or clean, is never run again; a dirty result
tells a new leader to finish the cleanup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from zkstore.errors import (
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    InvalidJobId,
    VersionConflict,
)
from zkstore.jobs.records import CancelRequest, JobResult, short_error
from zkstore.jobs.states import CLEAN, DIRTY, OUTCOMES
from zkstore.layout import Layout
from zkstore.ops import Create, Fence, SetData
from zkstore.strict import utc_now
from zkstore.zk import ZooKeeper


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
        error: str | None = None,
        name: str | None = None,
        summary: Mapping[str, Any] | None = None,
        cancel: CancelRequest | None = None,
        log: str | None = None,
        fence: Fence | None = None,
    ) -> JobResult:
        """Record the job's outcome. Raises :class:`HandleExists` if any result exists.

        ``summary`` (the handle's), ``cancel`` and ``log`` (of the last attempt) are kept so
        that the job can still be described once everything else of it is cleaned up.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        result = JobResult(
            version=None,
            job_id=job_id,
            state=DIRTY,
            outcome=outcome,
            attempts=attempts,
            finished=utc_now(),
            error=short_error(error),
            name=name,
            summary=dict(summary) if summary else None,
            cancel=None
            if cancel is None
            else {k: v for k, v in cancel.as_dict().items() if k != "version"},
            log=log,
        )
        path = self.layout.result(job_id)
        try:
            self.zk.commit([Create(path, result.to_bytes())], fence=fence)
        except HandleExists:
            raise HandleExists(f"job {job_id} already has a result", path=path) from None
        return result.with_version(0)

    def mark_clean(
        self, job_id: str, *, fence: Fence | None = None, logs_until: str | None = None
    ) -> JobResult:
        """Mark the result clean, with the end of its logs' retention if they are kept;
        marking a clean one again is fine, a missing one raises."""
        return self._update(
            job_id,
            lambda current: (
                None
                if current.state == CLEAN
                else replace(current, state=CLEAN, logs_until=logs_until)
            ),
            fence,
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

    def _update(
        self,
        job_id: str,
        change: Callable[[JobResult], JobResult | None],
        fence: Fence | None,
    ) -> JobResult:
        """Apply ``change`` (None: nothing to do) with a version check, re-reading on conflict."""
        path = self.layout.result(job_id)
        while True:
            current = self.get(job_id)
            if current is None:
                raise HandleNotFound(f"job {job_id} has no result", path=path)
            changed = change(current)
            if changed is None:
                return current
            assert current.version is not None
            try:
                self.zk.commit([SetData(path, changed.to_bytes(), current.version)], fence=fence)
            except VersionConflict:
                continue
            return changed.with_version(current.version + 1)

    def record_outputs(
        self, job_id: str, outputs: Mapping[str, str], *, fence: Fence | None = None
    ) -> JobResult:
        """Add ``outputs`` (name: URI, the artifacts the job keeps) to its result; idempotent.

        Raises :class:`HandleNotFound` if the job has no result.
        """
        path = self.layout.result(job_id)
        while True:
            current = self.get(job_id)
            if current is None:
                raise HandleNotFound(f"job {job_id} has no result to list outputs in", path=path)
            merged = {**(current.outputs or {}), **outputs}
            if merged == current.outputs:
                return current
            assert current.version is not None
            updated = replace(current, outputs=merged)
            try:
                self.zk.commit([SetData(path, updated.to_bytes(), current.version)], fence=fence)
            except VersionConflict:
                continue
            return updated.with_version(current.version + 1)

    def get(self, job_id: str) -> JobResult | None:
        path = self.layout.result(job_id)
        try:
            data, stat = self.zk.get(path)
        except HandleNotFound:
            return None
        return JobResult.from_znode(data, stat, path)

    def all(self) -> tuple[list[JobResult], dict[str, str]]:
        """Every readable result (pipelined reads, by job id) and, by job id, why the others
        could not be read: one garbage record never hides the rest."""
        names = sorted(self.zk.children(self.layout.results))
        found = self.zk.get_many([f"{self.layout.results}/{n}" for n in names])
        results: list[JobResult] = []
        unreadable: dict[str, str] = {}
        for name, item in zip(names, found, strict=True):
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

    def dirty(self) -> list[JobResult]:
        return [r for r in self.all()[0] if r.state == DIRTY]

    def needing_attention(self) -> set[str]:
        """Ids of the jobs whose result is DIRTY (cleanup unfinished) or unreadable."""
        results, unreadable = self.all()
        return {r.job_id for r in results if r.state == DIRTY} | set(unreadable)
