"""The job view model: one job as the command line, the HTTP API and the status page show it.

``jobs list``/``jobs show --format json``, ``GET /api/v1/jobs[/<id>]`` and the page all render
what :func:`describe` and :func:`job_details` return: there is no other JSON of a job. Nothing
here reads a payload or unpickles anything: handles, records and summaries only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zkstore.conditions import JOB, Condition, ConditionStore, waiting_condition
from zkstore.errors import CorruptRecord, StoreUnavailable
from zkstore.jobs.history import AttemptEntry, JobHistory
from zkstore.jobs.resources import ResourceReports
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.shown import run_options_shown
from zkstore.jobs.snapshot import JobSnapshot, read_snapshot
from zkstore.jobs.stored import SCHEDULE, SCHEDULED
from zkstore.records.job_states import PAUSED, RUNNING, STARTING, SUCCEEDED
from zkstore.records.strict import optional_time_text, time_text

if TYPE_CHECKING:  # the view of a job needs no storage: `jobs list` never imports fsspec
    from zkstore.cluster import Cluster

__all__ = [
    "MAX_SIZED",
    "age",
    "attempt_history",
    "attempts_json",
    "attempts_text",
    "describe",
    "describe_artifacts",
    "duration",
    "headline",
    "job_conditions",
    "job_details",
    "job_error",
    "lifecycle_of",
    "resource_counts",
]

#: ``jobs show`` (and ``GET /api/v1/jobs/<id>``) asks the storage for the size of this many
#: artifacts at most.
MAX_SIZED = 20


def duration(seconds: float) -> str:
    """``3m12s``-style: seconds up to two minutes, minutes up to two hours, then hours, days."""
    whole = max(0, int(seconds))
    if whole < 120:
        return f"{whole}s"
    if whole < 7200:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 172800:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d"


def age(moment: datetime | None) -> str | None:
    """``3m12s``-style age of a record's time (None: none known)."""
    if moment is None:
        return None
    return duration((datetime.now(UTC) - moment).total_seconds())


def headline(error: str | None) -> str | None:
    """The one line that says what went wrong: a traceback's last line, else the first line."""
    if not error:
        return None
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return None
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def job_error(job: JobSnapshot) -> str | None:
    """The job's error as a user wants it: its result's, else its last failed attempt's (an
    attempt that just ended, or the one the leader recorded), else why it is quarantined.

    A job whose next attempt is starting or running (paused, being stopped) has no error: the
    earlier attempt's is its ``last_error`` (and ``jobs show`` says how that attempt ended),
    not the job's.
    """
    if job.newer:  # NEEDS_UPGRADE: what this reader cannot read, not an error of the job
        first = sorted(job.newer)[0]
        return f"needs a newer daemon: {job.errors.get(first, first)}"
    if job.result is not None:
        return job.result.error if job.result.outcome != SUCCEEDED else None
    ended = job.attempt_outcome
    current = job.status.attempt if job.status is not None else None
    if ended is not None and ended.error and (current is None or ended.attempt == current):
        return ended.error
    if job.driver_present or job.state in (STARTING, RUNNING, PAUSED):
        return None  # an attempt starts or runs: an earlier one's error is its last_error
    if job.status is not None and job.status.last_error:
        return job.status.last_error
    return job.quarantine.reason if job.quarantine is not None else None


def attempts_text(item: dict[str, Any]) -> str | None:
    """The attempts of a job in words, failures and losses apart (lost attempts do not count
    against ``max_attempts``): ``3 (2 earlier lost to the infrastructure; failures: 0 of 3
    allowed, losses: 2 of 10)``. None before the first attempt."""
    attempt = item["attempt"]
    if not attempt:
        return None
    failures, lost = item["failures"] or 0, item["lost"] or 0
    earlier = []
    if lost:
        earlier.append(f"{lost} lost to the infrastructure")
    if failures:
        earlier.append(f"{failures} failed")
    told = f"{attempt}" + (f" ({', '.join(earlier)})" if earlier else "")
    allowed = item["max_attempts"]
    lost_allowed = item["max_lost_attempts"]
    counts = [f"failures {failures} of {allowed} allowed" if allowed else f"failures {failures}"]
    counts.append(f"losses {lost} of {lost_allowed}" if lost_allowed else f"losses {lost}")
    return f"{told}; {', '.join(counts)}"


def describe(job: JobSnapshot) -> dict[str, Any]:
    """One job as a JSON-able dict (the documented shape of ``jobs list --format json``)."""
    status, running, spark, ended = job.status, job.running, job.spark, job.attempt_outcome
    cancel = (
        {
            "requested": optional_time_text(job.cancel_asked),
            "by": job.cancel.by,
            "reason": job.cancel.reason,
        }
        if job.cancel is not None
        else (job.result.cancel if job.result is not None else None)
    )
    return {
        "job_id": job.job_id,
        "name": job.name,
        "state": job.state,
        "kind": job.summary_text("kind"),
        "entry": job.summary_text("entry"),
        "files": job.summary_text("files"),
        "args": job.summary_text("args"),
        "conf": job.run.conf_shown() if job.run is not None else None,
        "modules": job.summary_text("modules"),
        "require": job.run.require_shown() if job.run is not None else None,
        "attempt": job.attempt,
        "max_attempts": job.summary_int("max_attempts"),
        "submitted": optional_time_text(job.submitted_at),
        "driver": None
        if running is None
        else {
            "host": running.host,
            "pid": running.pid,
            "attempt": running.attempt,
            "started": time_text(running.started),
        },
        "spark": None
        if spark is None or running is None or spark.attempt != running.attempt
        else {
            "app_id": spark.app_id,
            "ui": spark.ui,
            "master": spark.master,
            "attempt": spark.attempt,
            "jvm": spark.jvm,
        },
        "log": job.log,
        "error": job_error(job),
        "daemon": status.daemon_id
        if status is not None and status.daemon_id
        else (job.result.daemon if job.result is not None else None),
        "waiting": status.reason if status is not None else None,
        "failures": status.failures
        if status is not None
        else (job.result.failures if job.result is not None else None),
        "lost": status.lost
        if status is not None
        else (job.result.lost if job.result is not None else None),
        "max_lost_attempts": job.summary_int("max_lost"),
        "last_error": status.last_error if status is not None else None,
        "next_attempt_at": optional_time_text(status.not_before) if status is not None else None,
        "attempt_outcome": None
        if ended is None
        else {"attempt": ended.attempt, "outcome": ended.outcome, "error": ended.error},
        "cancel_requested": optional_time_text(job.cancel_asked),
        "cancel": cancel,
        "result": None
        if job.result is None
        else {
            "outcome": job.result.outcome,
            "state": job.result.state,
            "attempts": job.result.attempts,
            "finished": time_text(job.result.finished),
            "error": job.result.error,
        },
        "quarantine": None
        if job.quarantine is None
        else {"reason": job.quarantine.reason, "since": time_text(job.quarantine.since)},
        "lifecycle": lifecycle_of(job),
        "stop": None
        if job.stop is None
        else {
            "requested": optional_time_text(job.stop_asked),
            "by": job.stop.by,
            "reason": job.stop.reason,
            "checkpoint": job.stop.checkpoint,
            "checkpoint_timeout_s": job.stop.timeout_ms / 1000,
        },
        "ending": None
        if job.end is None or status is None or job.end.attempt != status.attempt
        else {
            "attempt": job.end.attempt,
            "reason": job.end.reason,
            "requested": time_text(job.end.requested),
            "grace_s": job.end.grace_ms / 1000,
            "detail": job.end.detail,
        },
        "record_errors": job.errors or None,
        "definition": job.handle.sha256 if job.handle is not None else None,
        "schedule": _schedule_of(job),
    }


def _schedule_of(job: JobSnapshot) -> dict[str, str] | None:
    """The schedule and window a run was fired for ({name, window}), None for other jobs."""
    name, window = job.summary.get(SCHEDULE), job.summary.get(SCHEDULED)
    if isinstance(name, str) and isinstance(window, str):
        return {"name": name, "window": window}
    return None


def lifecycle_of(job: JobSnapshot) -> dict[str, Any] | None:
    """The job's limits and retry options as submitted (seconds; the daemon's defaults for
    the rest), its notification URL redacted (``scheme://host:port/...``: a webhook's path is
    often its secret), and how the leader ended its last attempt (TIMED_OUT, STUCK), if it
    did. None when it has none of these."""
    found = run_options_shown(job.run.lifecycle if job.run is not None else LifecycleOptions())
    status = job.status
    if status is not None and status.ended is not None:
        found["last_ended"] = status.ended
    return found or None


def job_details(cluster: Cluster, job_id: str) -> dict[str, Any]:
    """Everything ``jobs show --format json`` prints (the HTTP API serves the same):
    :func:`describe` plus the job's artifacts, kept outputs, checkpoints, control values and
    resource counts (artifact sizes: under the cluster's artifact roots only). Raises
    :class:`JobNotFound` for a job without any trace."""
    snapshot = read_snapshot(cluster.zk, cluster.layout, job_id)
    item = describe(snapshot)
    item["artifacts"] = describe_artifacts(cluster, job_id, item)
    item["outputs"] = snapshot.result.outputs if snapshot.result is not None else None
    item["checkpoints"] = [
        {"id": cid, "created": time_text(h.created), "size": h.size, "uri": h.uri}
        for cid, h in cluster.checkpoints(job_id).all()
    ]
    try:
        item["control"], _ = cluster.state.control(job_id)
    except CorruptRecord as exc:
        item["control"] = None
        item["record_errors"] = {**(item["record_errors"] or {}), "control": str(exc)}
    item["resources"] = resource_counts(cluster, job_id, item)
    item["conditions"] = job_conditions(cluster, snapshot, item)
    entries, unreadable = attempt_history(cluster, job_id)
    item["attempts"] = attempts_json(entries)
    if unreadable is not None:
        item["record_errors"] = {**(item["record_errors"] or {}), "history": unreadable}
    return item


def job_conditions(
    cluster: Cluster, job: JobSnapshot, item: dict[str, Any]
) -> list[dict[str, str]]:
    """What the leader does not do for the job, and why (:mod:`zkstore.conditions`): those it
    keeps on the job, and no daemon able to run it (from its status), oldest first. Unreadable
    ones are a record error of ``item``."""
    found: list[Condition] = []
    try:
        found = ConditionStore(cluster.zk, cluster.layout).read(JOB, job.job_id)
    except CorruptRecord as exc:
        item["record_errors"] = {**(item["record_errors"] or {}), "conditions": str(exc)}
    waiting = waiting_condition(job.status)
    if waiting is not None:
        found.append(waiting)
    return [c.as_dict() for c in sorted(found, key=lambda c: (c.since, c.type))]


def attempt_history(cluster: Cluster, job_id: str) -> tuple[list[AttemptEntry], str | None]:
    """The job's attempts as the leader told them: its history record while the job lives,
    the copy kept beside its logs once it was cleaned up; and why it could not be read (None:
    it could, or there is none)."""
    from zkstore.jobs.logs import JobLogs

    path = cluster.layout.history(job_id)
    try:
        found = cluster.zk.get_if_exists(path)
        if found is not None:
            return JobHistory.from_znode(found[0], found[1], path).entries(), None
        logs = JobLogs(cluster.storage, cluster.storage_layout, job_id)
        kept = logs.kept_history()
        if kept is not None:
            return JobHistory.from_znode(kept, None, f"{logs.prefix}/history.json").entries(), None
    except CorruptRecord as exc:
        return [], f"the attempt history is unreadable ({exc})"
    return [], None


def attempts_json(entries: list[AttemptEntry]) -> list[dict[str, Any]]:
    """Each attempt: {attempt, daemon, placed, outcome, ended, note, definition, target,
    new_definition}: ``definition`` the SHA-256 of the definition it was placed with (null
    when the leader that placed it did not record it), ``new_definition`` true when it differs
    from the one the attempt before it ran (``jobs resume --definition``)."""
    shown, before = [], None
    for entry in entries:
        changed = entry.definition is not None and before not in (None, entry.definition)
        shown.append({"attempt": entry.attempt, **entry.as_json(), "new_definition": changed})
        before = entry.definition or before
    return shown


def describe_artifacts(cluster: Cluster, job_id: str, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's artifacts for ``jobs show`` ({name, scope, attempt, state, keep, uri,
    registered, finished, size}); unreadable records go to ``item["record_errors"]``. Sizes are
    asked of the storage for the first :data:`MAX_SIZED` under known roots, else null."""
    records, unreadable = cluster.artifacts(job_id).all()
    if unreadable:
        errors = {f"artifact {name}": why for name, why in unreadable.items()}
        item["record_errors"] = {**(item.get("record_errors") or {}), **errors}
    found = []
    for index, record in enumerate(records):
        size = None
        if index < MAX_SIZED:
            try:
                size = cluster.artifact_space.size(job_id, record.uri)
            except StoreUnavailable:
                size = None
        entry = {k: v for k, v in record.as_dict().items() if k != "version"}
        found.append({**entry, "size": size})
    return found


def resource_counts(cluster: Cluster, job_id: str, item: dict[str, Any]) -> dict[str, Any] | None:
    """The driver's last resource report: {attempt, updated, final, counts {name: {...}}}."""
    try:
        report = ResourceReports(cluster.zk, cluster.layout, job_id).read()
    except CorruptRecord as exc:
        item["record_errors"] = {**(item["record_errors"] or {}), "resources": str(exc)}
        return None
    if report is None:
        return None
    return {
        "attempt": report.attempt,
        "updated": report.updated,
        "final": report.final,
        "counts": report.resources,
    }
