"""Records built by hand for the unit tests: a job's handle and snapshot, with the fields a test
does not care about filled in once (not in each test module)."""

from __future__ import annotations

from typing import Any

from zkstore.jobs.snapshot import JobSnapshot
from zkstore.records.handle import Handle

#: the time a built record was written, unless a test says otherwise
T = "2026-11-23T12:00:00.000Z"


def handle(
    *,
    summary: dict[str, Any] | None = None,
    created: str = T,
    uri: str = "file:///s/x",
    version: int | None = 0,
) -> Handle:
    """A job's handle (its definition's payload a byte of ``a``s), with ``summary``: the
    definition's fields the runtime reads from the handle (``max_attempts``, ``timeout``...)."""
    return Handle(
        uri=uri,
        size=1,
        sha256="a" * 64,
        created=created,
        writer="w",
        summary=dict(summary or {}),
        version=version,
    )


def snapshot(
    job_id: str = "j",
    *,
    summary: dict[str, Any] | None = None,
    created: str = T,
    **records: Any,
) -> JobSnapshot:
    """What ZooKeeper says about job ``job_id``: its :func:`handle` and ``records`` (``status``,
    ``running``, ``outcome``, ``result``...)."""
    return JobSnapshot(job_id=job_id, handle=handle(summary=summary, created=created), **records)
