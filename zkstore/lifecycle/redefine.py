"""Replacing a stopped job's definition: new code and options for its next attempt.

:func:`replace_definition` writes the new payload (create-only, at a fresh key), then swaps the
handle in one transaction with checks that the job is still as it was read (its status at the
version that said STOPPED, no ``running`` node, no result, not quarantined), then discards the
old payload. A crash at any line leaves one of:

- the old handle and an orphan new payload (``handles lingering`` finds it): the job resumes
  with its old code unless the replacement is run again;
- the new handle and an orphan old payload: the job resumes with its new code;
- the new handle alone: done.

Never a handle without its payload (invariant 1): this is
:meth:`zkstore.payloads.store.ZooKeeperStateHandleStore.replace` with the job's fences, whose crash
points (``replace:payload-written``, ``replace:committed``, ``replace:old-discarded``) the tests
use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from zkstore.errors import ConfigError, JobNotFound, JobQuarantined, WrongState
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.runspec import RUN, RunSpec
from zkstore.jobs.stored import JOB_KEYS
from zkstore.records.handle import Handle, SummaryValue
from zkstore.zookeeper.ops import Check, Fence, Guard, absent

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["CODE_FIELDS", "OPTION_FIELDS", "kept_job_keys", "redefined", "replace_definition"]

#: What the new code brings when a definition is replaced: everything that says what runs.
CODE_FIELDS = ("kind", "args", "source", "filename", "code", "arguments", "function_name", "files")
#: What may be changed besides the code (the options of ``submit`` a definition holds).
OPTION_FIELDS = ("spark_conf", "max_attempts", "max_lost_attempts", "require")


def redefined(
    current: JobDefinition,
    replacement: JobDefinition | None = None,
    **options: object,
) -> JobDefinition:
    """``current`` with the code of ``replacement`` (if given) and ``options`` changed (the
    fields of :data:`OPTION_FIELDS`). The job's id, name and submission time stay; raises
    :class:`ConfigError` for another job's definition or an unknown option."""
    unknown = set(options) - set(OPTION_FIELDS)
    if unknown:
        raise ConfigError(f"not an option of a definition: {', '.join(sorted(unknown))}")
    changes: dict[str, object] = {k: v for k, v in options.items() if v is not None}
    if replacement is not None:
        if replacement.job_id != current.job_id:
            raise ConfigError(
                f"the new definition is job {replacement.job_id!r}'s, not {current.job_id!r}'s"
            )
        changes.update({name: getattr(replacement, name) for name in CODE_FIELDS})
    return dataclasses.replace(current, **changes)  # type: ignore[arg-type]


def replace_definition(
    cluster: Cluster,
    job_id: str,
    definition: JobDefinition,
    *,
    status_version: int,
    summary: Mapping[str, SummaryValue] | None = None,
) -> Handle:
    """Make ``definition`` the job's, while its status is still at ``status_version`` (the
    version that said STOPPED) and no driver runs; ``summary`` adds keys to the definition's own
    (its lifecycle options). Returns the new handle.

    Raises :class:`ConfigError` (another job's definition), :class:`JobNotFound`,
    :class:`WrongState` (the status moved, or a driver runs), :class:`JobFinished`,
    :class:`JobQuarantined`, :class:`~zkstore.errors.VersionConflict` (the handle changed
    meanwhile), or what writing the payload raises; then nothing was replaced and the new
    payload is discarded (or, for :class:`~zkstore.errors.OutcomeUnknown`, kept).
    """
    if definition.job_id != job_id:
        raise ConfigError(f"the definition is job {definition.job_id!r}'s, not {job_id!r}'s")
    layout = cluster.layout
    version = cluster.jobs.handles.exists(job_id)
    if version is None:
        raise JobNotFound(f"no job {job_id!r} in this cluster")
    fence = (
        Fence(
            (
                Guard(
                    (Check(layout.status(job_id), status_version),),
                    WrongState,
                    f"job {job_id} changed since it was read (is it still stopped?)",
                ),
                Guard(absent(layout.running(job_id)), WrongState, f"a driver of {job_id} runs"),
            )
        )
        + cluster.jobs.not_finished(job_id)
        + Fence.absent(
            layout.quarantine_entry(job_id),
            error=JobQuarantined,
            description=f"job {job_id} is in quarantine",
        )
    )
    new = {**definition.summary(), **(summary or {})}
    return cluster.jobs.handles.replace(
        job_id,
        version,
        definition,
        summary=kept_job_keys(cluster.jobs.handles.get_handle(job_id).summary, new),
        fence=fence,
    )


def kept_job_keys(
    old: Mapping[str, SummaryValue], new: Mapping[str, SummaryValue]
) -> dict[str, SummaryValue]:
    """``new`` (a new definition's summary) with what of ``old`` (the job's handle) is the
    job's, not its definition's: the schedule's run it is (:data:`JOB_KEYS`) and the jobs it
    runs after (its run options' ``after``, in whichever form each side keeps them). A resumed
    job is still its schedule's run, and ``jobs show`` still names what it waited for."""
    kept = dict(new)
    kept.update({key: old[key] for key in JOB_KEYS if key in old and key not in new})
    try:
        before, after = RunSpec.from_summary(old), RunSpec.from_summary(new)
    except ValueError:
        return kept  # a garbled field: the leader quarantines the job, whatever is kept
    if before.after and not after.after:
        typed = RUN in new or RUN in old
        kept.update(after.with_after(before.after).summary_fields(typed=typed))
    return kept
