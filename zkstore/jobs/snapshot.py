"""A consistent-enough picture of many jobs at once, read with pipelined requests.

One snapshot reads, for every job, its handle (summary only, never the payload), status,
``running`` node, outcome, cancel request, stop request, result and quarantine entry: eight small
reads per job, all sent before any answer is awaited. Then, in a second round and only for the
jobs they can matter to: the Spark application and the control acknowledgement of the jobs that
run; the leader's ``end`` request of a placed attempt with a stop, a limit (``--timeout``,
``--start-timeout``, ``--progress-timeout``) or no driver holding ``running`` (starting, or
over: the leader ends a driver that lost its session); the heartbeat of a running job with a
progress timeout; and the newest checkpoint's handle of a running job that is being stopped
with a checkpoint or has a progress timeout (a children call, then one read). A 10,000-job
takeover pays one more read per job (the stop node; an index of stopped jobs would save it)
and nothing else for running jobs without a stop or a limit. The daemon reconciles from
snapshots; the CLI lists them.

Why one module: the two rounds of pipelined reads depend on each other's answers (the second
round reads only what the first says can matter), and the parse of each record is kept beside
the read that fetched it.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from zkstore.errors import (
    AccessDenied,
    CorruptRecord,
    HandleNotFound,
    InvalidJobId,
    JobFinished,
    JobNotFound,
    JobQuarantined,
    NewerRecord,
)
from zkstore.jobs import request_pins
from zkstore.jobs.control.control_records import ControlAck
from zkstore.jobs.runspec import RunSpec
from zkstore.jobs.shown import LIMIT_KEYS
from zkstore.jobs.stops import EndRequest, Heartbeat, StopRequest
from zkstore.layout import Layout, is_checkpoint_node_name, validate_job_id
from zkstore.payloads.store import is_marked
from zkstore.records.handle import Handle
from zkstore.records.job_records import CancelRequest, JobStatus, Outcome, RunningInfo, SparkApp
from zkstore.records.job_states import (
    CLEAN,
    CLEANING,
    ENDED,
    NEEDS_UPGRADE,
    PAUSED,
    QUARANTINED,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    SUBMITTED,
)
from zkstore.records.record import Record
from zkstore.records.result_records import JobResult, QuarantineEntry
from zkstore.records.strict import time_or_none

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "ENDED",
    "LIMIT_KEYS",
    "JobSnapshot",
    "Listing",
    "check_cancellable",
    "read_listing",
    "read_snapshot",
    "read_snapshots",
]

R = TypeVar("R", bound=Record)


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSnapshot:
    """Everything ZooKeeper says about one job; ``errors`` names records that did not parse."""

    job_id: str
    handle: Handle | None = None
    marked: bool = False
    status: JobStatus | None = None
    running: RunningInfo | None = None
    running_session: int | None = None
    spark: SparkApp | None = None
    outcome: Outcome | None = None
    cancel: CancelRequest | None = None
    #: when ZooKeeper made the ``cancel`` node (its ``ctime``: ZooKeeper's clock, which no
    #: writer sets); the leader counts the cancel's grace from it, never from the request's own
    #: ``requested``, which its writer stamps (a clock an hour ahead, or a job planting a cancel
    #: dated in the future, postponed the leader's end of a job that ignored it)
    cancel_made: datetime | None = None
    result: JobResult | None = None
    quarantine: QuarantineEntry | None = None
    control: ControlAck | None = None
    #: ``zkstore jobs stop`` asked the job to stop (``resume`` deletes it)
    stop: StopRequest | None = None
    #: when ZooKeeper made the ``stop`` node (its ``ctime``), as ``cancel_made``: a stop's
    #: checkpoint deadline counts from it
    stop_made: datetime | None = None
    #: the leader ended an attempt (read for placed attempts with a stop or a limit only)
    end: EndRequest | None = None
    end_read: bool = False
    #: the ``end`` node has its pin (:mod:`zkstore.jobs.request_pins`): removed with it
    end_pinned: bool = False
    #: the ``end`` node was made by the job's identity so that the cluster cannot delete it (a
    #: child under an ACL that keeps the cluster out): left where it is, its member ends the
    #: driver as the job's own request (:func:`~zkstore.jobs.request_pins.shut_out`)
    end_foreign: bool = False
    #: the running driver's newest heartbeat (read for jobs with a progress timeout only)
    heartbeat: Heartbeat | None = None
    #: the newest checkpoint's handle (read for running jobs being stopped with a checkpoint
    #: or with a progress timeout only)
    newest_checkpoint: Handle | None = None
    errors: dict[str, str] = field(default_factory=dict)
    #: the records (keys of ``errors``) written at a newer fleet protocol than this code's:
    #: the job is left alone, shown as needing a newer daemon
    newer: frozenset[str] = frozenset()

    @property
    def cancel_asked(self) -> datetime | None:
        """When the cancel was asked: ZooKeeper's ``ctime`` of its node, else (an older
        snapshot's) the date its writer stamped; None without one. What the leader counts the
        grace from, and what people are shown (``jobs show``, the API, the job's result)."""
        if self.cancel is None:
            return None
        return self.cancel_made if self.cancel_made is not None else self.cancel.requested

    @property
    def stop_asked(self) -> datetime | None:
        """When the stop was asked, as :attr:`cancel_asked`: its checkpoint deadline counts
        from it."""
        if self.stop is None:
            return None
        return self.stop_made if self.stop_made is not None else self.stop.requested

    @property
    def needs_newer_daemon(self) -> bool:
        return bool(self.newer)

    @property
    def in_current_jobs(self) -> bool:
        return (self.handle is not None or "handle" in self.errors) and not self.marked

    @property
    def driver_present(self) -> bool:
        """A ``running`` node exists, readable or not: an unreadable one is a live driver whose
        record is garbage, never a dead one (only the node's going away says a driver died)."""
        return self.running is not None or "running" in self.errors

    @property
    def cancel_requested(self) -> bool:
        """A cancel node exists (an unreadable one still asks the job to stop)."""
        return self.cancel is not None or "cancel" in self.errors

    @property
    def paused(self) -> bool:
        """The live driver's job is blocked at a pause point (its acknowledgement says so)."""
        running, ack = self.running, self.control
        return (
            running is not None
            and ack is not None
            and ack.paused
            and (ack.attempt == running.attempt)
        )

    @property
    def stop_requested(self) -> bool:
        """A stop node exists (an unreadable one still asks the job to stop)."""
        return self.stop is not None or "stop" in self.errors

    @property
    def has_limits(self) -> bool:
        """The job's summary sets a limit the leader enforces by ending attempts."""
        return self.run is not None and self.run.lifecycle.has_limits

    @property
    def quarantined(self) -> bool:
        return self.quarantine is not None or "quarantine" in self.errors

    def summary_int(self, key: str) -> int | None:
        """An integer of the summary, or None if absent or not a positive integer."""
        value = self.summary.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return None

    def summary_text(self, key: str) -> str | None:
        """A text of the summary, or None if absent or not a text."""
        value = self.summary.get(key)
        return value if isinstance(value, str) else None

    @property
    def submitted_at(self) -> datetime | None:
        """When the job was submitted (its summary's ``submitted``, parsed once by its
        handle), None if it does not say."""
        for handle in (self.handle, self.quarantine.handle if self.quarantine else None):
            if handle is not None:
                return handle.submitted
        return time_or_none(self.summary.get("submitted"))  # the result's copy of the summary

    @property
    def state(self) -> str:
        """One word for people: the result, QUARANTINED, RUNNING, or the leader's status."""
        if self.newer:
            return NEEDS_UPGRADE
        if self.result is not None:
            return self.result.outcome if self.result.state == CLEAN else CLEANING
        if self.quarantined:
            return QUARANTINED
        if self.status is not None and self.status.state == STOPPED:
            return STOPPED
        if self.stop_requested and self.status is not None:
            return STOPPING
        if self.driver_present:
            return PAUSED if self.paused else RUNNING
        if self.attempt_outcome is not None:
            return ENDED
        if self.status is not None:
            return self.status.state
        return SUBMITTED if self.in_current_jobs else "UNKNOWN"

    @property
    def attempt_outcome(self) -> Outcome | None:
        """The outcome of the attempt the leader started last, once it ended and until the
        leader acts on it (then ``status`` moves on)."""
        status, outcome = self.status, self.outcome
        if status is None or outcome is None or self.running is not None:
            return None
        if status.state == STARTING and outcome.attempt == status.attempt:
            return outcome
        return None

    @property
    def log(self) -> str | None:
        """Where the log of the running attempt, or else of the last one that ended, is."""
        if self.running is not None and self.running.log:
            return self.running.log
        if self.outcome is not None and self.outcome.log:
            return self.outcome.log
        return self.result.log if self.result is not None else None

    @property
    def summary(self) -> dict[str, Any]:
        """What the job's handle says about it (kind, entry, submitted, max_attempts...), from
        wherever it still is: the handle, the quarantine entry, or the result."""
        if self.handle is not None:
            return dict(self.handle.summary)
        if self.quarantine is not None and self.quarantine.handle is not None:
            return dict(self.quarantine.handle.summary)
        if self.result is not None and self.result.summary is not None:
            return dict(self.result.summary)
        return {}

    @cached_property
    def run(self) -> RunSpec | None:
        """The job's run options (:mod:`zkstore.jobs.runspec`), parsed once from its summary;
        None if they are garbled there (the job is then quarantined when decided)."""
        try:
            return RunSpec.from_summary(self.summary)
        except ValueError:
            return None

    @property
    def name(self) -> str | None:
        if self.handle is not None:
            return self.summary_text("name")
        if self.quarantine is not None and self.quarantine.handle is not None:
            value = self.quarantine.handle.summary.get("name")
            return value if isinstance(value, str) else None
        return self.result.name if self.result is not None else None

    @property
    def attempt(self) -> int | None:
        if self.running is not None:
            return self.running.attempt
        if self.status is not None:
            return self.status.attempt
        return self.result.attempts if self.result is not None else None


def _foreign(zk: ZooKeeper, path: str) -> bool:
    """A request node with children is the cluster's (pinned) unless its ACL keeps the cluster
    from deleting them: then the job's identity made it (one ACL read, for such nodes only)."""
    try:
        return request_pins.shut_out(zk, path) is not None
    except HandleNotFound:
        return False  # gone meanwhile: nothing to delete


def _parse(
    record: type[R],
    found: Any,
    path: str,
    errors: dict[str, str],
    key: str,
    newer: set[str] | None = None,
) -> R | None:
    """``found`` parsed as ``record``, or None (absent, or unreadable: then ``errors[key]``
    says why, and ``newer`` gets ``key`` if it was written at a newer fleet protocol)."""
    if found is None:
        return None
    if isinstance(found, AccessDenied):
        # Created under the job's node by its own identity with an ACL that leaves the
        # cluster out: present (never taken for absent), unreadable, replaced by its writer.
        errors[key] = f"{path}: not readable by the cluster (made with another ACL: {found})"
        return None
    try:
        parsed = record.from_znode(found[0], found[1], path)
    except CorruptRecord as exc:
        errors[key] = str(exc)
        if isinstance(exc, NewerRecord) and newer is not None:
            newer.add(key)
        return None
    owner = getattr(parsed, "job_id", None)
    if owner is not None and owner != path.rsplit("/", 1)[1]:
        errors[key] = f"{path}: names job {owner!r:.140}, not its own"
        return None
    return parsed


def _valid(job_id: str) -> bool:
    try:
        validate_job_id(job_id)
    except InvalidJobId:
        logger.warning("ignoring %r: not a valid job id (planted by hand?)", job_id[:200])
        return False
    return True


@dataclass(frozen=True)
class Listing:
    """The children of the cluster's job parents, read once: which nodes exist at all.

    A listing lets a snapshot of many jobs skip the reads of nodes that cannot exist (a new
    job has no records yet). It is only ever a hint: a node created after the listing is seen
    by the next look, and every write is conditional, so acting on a stale "absent" fails
    instead of doing harm. ``results`` is None when the results were not listed (there may be
    very many, kept for their retention period): then every job's result is read instead.
    ``cleanup`` names the jobs whose result is DIRTY (the cleanup index).
    """

    current_jobs: frozenset[str]
    job_dirs: frozenset[str]
    results: frozenset[str] | None
    quarantine: frozenset[str]
    cleanup: frozenset[str] = frozenset()

    def job_ids(self) -> set[str]:
        """Every job id with any trace (of the finished ones, only those listed)."""
        found = self.current_jobs | self.job_dirs | self.quarantine | self.cleanup
        return set(found | (self.results or frozenset()))


def read_listing(zk: ZooKeeper, layout: Layout, *, results: bool = True) -> Listing:
    """One pipelined round of children calls; without ``results``, the results (the one parent
    that grows with every finished job) are not listed."""
    parents = [layout.current_jobs, layout.jobs, layout.quarantine, layout.cleanup]
    if results:
        parents.append(layout.results)
    found = [frozenset(c or ()) for c in zk.children_many(parents)]
    return Listing(
        current_jobs=found[0],
        job_dirs=found[1],
        results=found[4] if results else None,
        quarantine=found[2],
        cleanup=found[3],
    )


_KINDS = ("handle", "status", "running", "outcome", "cancel", "stop", "result", "quarantine")


#: The job's records under its own node that a snapshot reads, by name.
_RECORDS = ("status", "running", "outcome", "cancel", "stop")


def _paths(
    layout: Layout, job_id: str, listing: Listing | None, inside: frozenset[str] | None
) -> list[str | None]:
    """The paths of the job's records, ``None`` where the listing (or ``inside``: the names
    under the job's node, when they were listed) says there is nothing."""
    has_dir = listing is None or job_id in listing.job_dirs
    return [
        layout.job_handle(job_id) if listing is None or job_id in listing.current_jobs else None,
        *(
            f"{layout.job_dir(job_id)}/{name}"
            if has_dir and (inside is None or name in inside)
            else None
            for name in _RECORDS
        ),
        layout.result(job_id)
        if listing is None or listing.results is None or job_id in listing.results
        else None,
        layout.quarantine_entry(job_id)
        if listing is None or job_id in listing.quarantine
        else None,
    ]


def read_snapshot(zk: ZooKeeper, layout: Layout, job_id: str) -> JobSnapshot:
    """The snapshot of one job: the one reader of "this job, or :class:`JobNotFound`" (the
    command line, the HTTP API, triage and :class:`recovery.Client` use it). Raises
    :class:`InvalidJobId` for a name that cannot be a job's, :class:`JobNotFound` (exit 4, HTTP
    404) if the store has no trace of the job."""
    found = read_snapshots(zk, layout, [validate_job_id(job_id)]).get(job_id)
    if found is None:
        raise JobNotFound(f"no job {job_id!r} in this cluster{_suggestion(zk, layout, job_id)}")
    return found


def _suggestion(zk: ZooKeeper, layout: Layout, job_id: str) -> str:
    """``: did you mean 'orders1'?`` when a job's id is a close spelling of ``job_id`` (a
    mistyped id), else empty. On the error path only: it lists every job, finished ones too."""
    names = read_listing(zk, layout).job_ids()
    close = difflib.get_close_matches(job_id, sorted(names), n=3, cutoff=0.75)
    if not close:
        return ""
    return f": did you mean {' or '.join(repr(name) for name in close)}?"


def read_snapshots(
    zk: ZooKeeper,
    layout: Layout,
    job_ids: Iterable[str],
    *,
    listing: Listing | None = None,
    look_inside: bool = False,
) -> dict[str, JobSnapshot]:
    """Snapshots of ``job_ids`` (pipelined); jobs with no trace at all are left out.

    Eight small reads per job, all sent before any answer is awaited; with a ``listing``, only
    the reads of nodes that exist. With ``look_inside``, a first round lists the children of
    each job's node, and only the records there are read (of a job's records, most are absent
    at any moment: a cancel, a stop, an end, a running node or an outcome; the leader's looks
    at a few jobs save about a third of their reads this way). Like a listing it is only a
    hint: a record made after it is seen by the next look. Then what matters to some jobs
    only (see the module's docstring).
    """
    ids = sorted(job_id for job_id in set(job_ids) if _valid(job_id))
    inside: dict[str, frozenset[str] | None] = {}
    if look_inside:
        listed = zk.children_many([layout.job_dir(job_id) for job_id in ids])
        inside = {
            job_id: frozenset(names) if names is not None else frozenset()
            for job_id, names in zip(ids, listed, strict=True)
        }
    per_job = [_paths(layout, job_id, listing, inside.get(job_id)) for job_id in ids]
    wanted = [path for paths in per_job for path in paths if path is not None]
    answers = iter(zk.get_many_or_denied(wanted))
    snapshots: dict[str, JobSnapshot] = {}
    for job_id, paths in zip(ids, per_job, strict=True):
        found = [next(answers) if path is not None else None for path in paths]
        if any(item is not None for item in found):
            snapshots[job_id] = _snapshot(job_id, dict(zip(_KINDS, found, strict=True)), layout)
    # The Spark application and the control acknowledgement matter only while ``running``
    # exists, and most jobs in a big listing are not running: read them in a second round, for
    # the jobs with a live driver only.
    running = [job_id for job_id, snap in snapshots.items() if snap.running is not None]

    def there(job_id: str, name: str) -> bool:
        names = inside.get(job_id)
        return names is None or name in names

    late = [
        path if there(j, name) else None
        for j in running
        for name, path in (("spark", layout.spark(j)), ("control-ack", layout.control_ack(j)))
    ]
    read = iter(zk.get_many_or_denied([path for path in late if path is not None]))
    asked = iter(late)
    for job_id in running:
        snap = snapshots[job_id]
        item = next(read) if next(asked) is not None else None
        spark = _parse(SparkApp, item, layout.spark(job_id), snap.errors, "spark")
        item = next(read) if next(asked) is not None else None
        ack_path = layout.control_ack(job_id)
        control = _parse(ControlAck, item, ack_path, snap.errors, "control-ack")
        snapshots[job_id] = replace(snap, spark=spark, control=control)
    _read_lifecycle(zk, layout, snapshots, there)
    return snapshots


def _watches_progress(snap: JobSnapshot) -> bool:
    """Whether the job has a progress timeout (its typed run options: flat in a handle written
    before fleet protocol 4, inside ``run`` after), so its heartbeat and newest checkpoint are
    read for the leader's progress check."""
    run = snap.run
    return run is not None and run.lifecycle.progress_timeout is not None


def _read_lifecycle(
    zk: ZooKeeper,
    layout: Layout,
    snapshots: dict[str, JobSnapshot],
    there: Callable[[str, str], bool],
) -> None:
    """The ``end`` request, heartbeat and newest checkpoint of the jobs they matter to (and,
    of ``end`` and heartbeat, only where ``there`` says they may exist; an ``end`` known to be
    absent counts as read)."""
    matter = [
        j
        for j, snap in snapshots.items()
        if snap.status is not None
        and snap.status.state == STARTING
        and (
            snap.stop_requested
            or snap.cancel_requested
            or snap.has_limits
            or not snap.driver_present
        )
    ]
    ends = [j for j in matter if there(j, "end")]
    for job_id in matter:
        if not there(job_id, "end"):  # known to be absent: as good as read
            snapshots[job_id] = replace(snapshots[job_id], end_read=True)
    beats = [
        j
        for j, snap in snapshots.items()
        if snap.driver_present and _watches_progress(snap) and there(j, "heartbeat")
    ]
    newest = [
        j
        for j, snap in snapshots.items()
        if snap.driver_present
        and ((snap.stop is not None and snap.stop.checkpoint) or _watches_progress(snap))
    ]
    if not (ends or beats or newest):
        return
    paths = [layout.end(j) for j in ends] + [layout.heartbeat(j) for j in beats]
    found = iter(zk.get_many_or_denied(paths))
    kids = zk.children_many([layout.checkpoints(j) for j in newest], denied=True)
    for job_id in ends:
        snap = snapshots[job_id]
        item = next(found)
        end = _parse(EndRequest, item, layout.end(job_id), snap.errors, "end")
        pinned = isinstance(item, tuple) and request_pins.is_pinned(item[1])
        foreign = pinned and _foreign(zk, layout.end(job_id))
        snapshots[job_id] = replace(
            snap, end=end, end_read=True, end_pinned=pinned and not foreign, end_foreign=foreign
        )
    for job_id in beats:
        snap = snapshots[job_id]
        beat = _parse(Heartbeat, next(found), layout.heartbeat(job_id), snap.errors, "heartbeat")
        snapshots[job_id] = replace(snap, heartbeat=beat)
    names = {
        job_id: max((n for n in (children or ()) if is_checkpoint_node_name(n)), default=None)
        for job_id, children in zip(newest, kids, strict=True)
    }
    wanted = [(j, f"{layout.checkpoints(j)}/{n}") for j, n in names.items() if n is not None]
    for (job_id, path), item in zip(
        wanted, zk.get_many_or_denied([p for _, p in wanted]), strict=True
    ):
        if item is None:
            continue  # subsumed meanwhile: the next look sees the newer one
        snap = snapshots[job_id]
        if isinstance(item, AccessDenied):
            snap.errors["checkpoint"] = str(item)
            continue
        try:
            handle = Handle.from_znode(item[0], item[1], path)
        except CorruptRecord as exc:
            snap.errors["checkpoint"] = str(exc)
            continue
        snapshots[job_id] = replace(snap, newest_checkpoint=handle)


def _snapshot(job_id: str, items: dict[str, Any], layout: Layout) -> JobSnapshot:
    errors: dict[str, str] = {}
    newer: set[str] = set()
    marked = False
    if items["handle"] is not None:
        marked = is_marked(items["handle"][1])
    session = items["running"][1].ephemeralOwner if items["running"] is not None else None

    def parse(record: type[R], key: str, path: str) -> R | None:
        return _parse(record, items[key], path, errors, key, newer)

    return JobSnapshot(
        job_id=job_id,
        handle=parse(Handle, "handle", layout.job_handle(job_id)),  # type: ignore[type-var]
        marked=marked,
        status=parse(JobStatus, "status", layout.status(job_id)),
        running=parse(RunningInfo, "running", layout.running(job_id)),
        running_session=session,
        outcome=parse(Outcome, "outcome", layout.outcome(job_id)),
        cancel=parse(CancelRequest, "cancel", layout.cancel(job_id)),
        cancel_made=_made(items["cancel"]),
        stop=parse(StopRequest, "stop", layout.stop(job_id)),
        stop_made=_made(items["stop"]),
        result=parse(JobResult, "result", layout.result(job_id)),
        quarantine=parse(QuarantineEntry, "quarantine", layout.quarantine_entry(job_id)),
        errors=errors,
        newer=frozenset(newer),
    )


def _made(found: Any) -> datetime | None:
    """When ZooKeeper made the node read as ``found`` (its ``ctime``: ZooKeeper's clock, which
    no writer sets), None if absent or unreadable."""
    return datetime.fromtimestamp(found[1].ctime / 1000, UTC) if isinstance(found, tuple) else None


def check_cancellable(job: JobSnapshot) -> None:
    """Raise unless a cancel request makes sense for ``job``: :class:`JobFinished` (it has a
    result), :class:`JobQuarantined` (it does not run), :class:`JobNotFound` (no such job)."""
    if job.result is not None:
        raise JobFinished(f"job {job.job_id} already finished ({job.result.outcome})")
    if job.quarantine is not None:
        raise JobQuarantined(
            f"job {job.job_id} is quarantined: it does not run (zkstore quarantine release|purge)"
        )
    if not job.in_current_jobs:
        raise JobNotFound(f"no job {job.job_id!r} in this cluster")
