"""``zkstore jobs stop`` and ``zkstore jobs resume``: what the client writes.

Stop (:meth:`StopStore.request`): one transaction creates the ``stop`` node, checked against the
job being current (its handle exists, it has no result, it is not quarantined); then, with
``checkpoint``, the control plane's checkpoint request is set to the stop's token. A crash
between the two leaves a stop whose checkpoint was never asked: the leader waits until the
stop's deadline and ends the attempt anyway (the job resumes from its newest checkpoint), and
asking to stop again completes the request (it is idempotent: the first request stands).

Resume (:meth:`StopStore.resume`): only a STOPPED job; with a new definition, that is swapped
first (:func:`~zkstore.lifecycle.redefine.replace_definition`, checked against the status that
said STOPPED); then one transaction deletes the ``stop`` node, checked against the same status
version. A crash between the two leaves the job STOPPED with its new code; resuming again
finishes it. The leader (never the client: the status is the leader's) then starts the next
attempt from the newest checkpoint, which cannot change while the job is stopped (no attempt may
write one), so the checkpoint :meth:`resume` names is the one the attempt gets.

The crash points (``cluster.step``) are ``stop:requested``, ``stop:checkpoint-asked``,
``resume:redefined`` and ``resume:requested``, besides those of the handle store's replace.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zkstore.errors import (
    ConfigError,
    CorruptRecord,
    HandleExists,
    HandleNotFound,
    JobFinished,
    JobNotFound,
    JobQuarantined,
    NotEmpty,
    VersionConflict,
    WrongState,
)
from zkstore.jobs import history, request_pins
from zkstore.jobs.control.values import CHECKPOINT
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.history import JobHistory
from zkstore.jobs.job_state_store import who
from zkstore.lifecycle.lifecycle_records import StopRequest
from zkstore.lifecycle.lifecycle_states import STOPPED, STOPPING
from zkstore.lifecycle.redefine import replace_definition
from zkstore.records.handle import SummaryValue
from zkstore.records.job_records import JobStatus
from zkstore.records.record import read_record
from zkstore.records.strict import time_text, utc_moment
from zkstore.zookeeper.ops import Check, Create, Fence, Op
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.cluster import Cluster

__all__ = ["DEFAULT_CHECKPOINT_TIMEOUT", "MAX_CHECKPOINT_TIMEOUT", "Resumed", "StopStore"]

logger = logging.getLogger(__name__)

#: How long a stop waits for the asked checkpoint unless told otherwise.
DEFAULT_CHECKPOINT_TIMEOUT = 300.0
#: The longest a stop may wait for its checkpoint (its record holds milliseconds in 31 bits).
MAX_CHECKPOINT_TIMEOUT = 7 * 86400.0


@dataclass(frozen=True)
class Resumed:
    """What :meth:`StopStore.resume` did: the definition's new handle version (None: kept),
    and the checkpoint the next attempt resumes from (None: it starts from scratch)."""

    job_id: str
    definition_version: int | None
    checkpoint_id: int | None
    checkpoint_created: str | None
    already: bool = False
    #: the replaced definition brings new code (else only the options changed)
    new_code: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "definition_version": self.definition_version,
            "checkpoint": None
            if self.checkpoint_id is None
            else {"id": self.checkpoint_id, "created": self.checkpoint_created},
            "already_resumed": self.already,
        }

    def describe(self) -> str:
        if self.already:
            return f"job {self.job_id} was resumed already: its next attempt is placed"
        if self.definition_version is None:
            code = "as it was"
        else:
            code = "with its new definition" if self.new_code else "with its new options"
        if self.checkpoint_id is None:
            return f"job {self.job_id} resumes {code}, from the start (it has no checkpoint)"
        return (
            f"job {self.job_id} resumes {code} from checkpoint {self.checkpoint_id} "
            f"(taken {self.checkpoint_created})"
        )


class StopStore:
    """The stop and resume requests of one cluster's jobs."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.zk = cluster.zk
        self.layout = cluster.layout

    # -- reads -----------------------------------------------------------------------------------

    def request_of(self, job_id: str) -> StopRequest | None:
        """The job's stop request, or None; :class:`~zkstore.errors.CorruptRecord` if garbage."""
        return read_record(self.zk, StopRequest, self.layout.stop(job_id))

    def status(self, job_id: str) -> JobStatus | None:
        return read_record(self.zk, JobStatus, self.layout.status(job_id))

    # -- stop ------------------------------------------------------------------------------------

    def request(
        self,
        job_id: str,
        *,
        checkpoint: bool = False,
        timeout: float = DEFAULT_CHECKPOINT_TIMEOUT,
        by: str | None = None,
        reason: str | None = None,
    ) -> StopRequest:
        """Ask for the job to stop (with ``checkpoint``: after a checkpoint, waiting at most
        ``timeout`` seconds for it). Idempotent: a job asked already keeps its first request
        (returned), and a checkpoint request it lacks (a crash) is made now.

        Raises :class:`JobNotFound`, :class:`JobFinished`, :class:`JobQuarantined`.
        """
        return self.ask(job_id, checkpoint=checkpoint, timeout=timeout, by=by, reason=reason)[0]

    def ask(
        self,
        job_id: str,
        *,
        checkpoint: bool = False,
        timeout: float = DEFAULT_CHECKPOINT_TIMEOUT,
        by: str | None = None,
        reason: str | None = None,
    ) -> tuple[StopRequest, bool]:
        """:meth:`request`, and whether this call made the request (False: an earlier one
        stands, and is what is returned)."""
        if not 0 <= timeout <= MAX_CHECKPOINT_TIMEOUT:
            raise ConfigError(
                f"a stop waits 0 to {MAX_CHECKPOINT_TIMEOUT / 86400:g} days for its checkpoint"
            )
        record = StopRequest(
            version=None,
            requested=utc_moment(),
            by=by or who(),
            reason=reason,
            checkpoint=checkpoint,
            token=f"stop-{uuid.uuid4().hex[:16]}" if checkpoint else None,
            timeout_ms=round(timeout * 1000),
        )
        stored = RACES.call(lambda: self._create(job_id, record), what=f"stop request of {job_id}")
        self.cluster.step("stop:requested")
        if stored.checkpoint and stored.token is not None:
            self._ask_checkpoint(job_id, stored.token)
        self.cluster.step("stop:checkpoint-asked")
        made = (stored.requested, stored.token) == (record.requested, record.token)
        return stored, made

    def _create(self, job_id: str, record: StopRequest) -> StopRequest:
        """Create the stop node (the job's directory too, for a job no leader saw yet); the
        stored request if one exists already and only the cluster can remove it, else ours
        replaces it (:func:`~zkstore.jobs.request_pins.found_or_taken`)."""
        layout = self.layout
        path = layout.stop(job_id)
        ops: list[Op] = [Check(layout.job_handle(job_id))]
        if self.zk.exists(layout.job_dir(job_id)) is None:
            ops.append(Create(layout.job_dir(job_id)))
        pinned = self.cluster.pins_requests()
        made = request_pins.made_ops(path, record.to_bytes(), pinned=pinned)
        ops += made
        try:
            self.zk.commit(ops, fence=self._current(job_id))
        except HandleExists as exc:
            if exc.path == layout.job_dir(job_id):
                raise TryAgain("the job's directory appeared meanwhile") from exc
            if exc.path != path:
                raise
            existing = request_pins.found_or_taken(
                self.zk,
                path,
                made,
                lambda: self.request_of(job_id),
                pinned=pinned,
                fence=self._current(job_id),
            )
            if existing is not None:
                return existing
        except HandleNotFound as exc:
            if exc.path == layout.job_handle(job_id):
                raise JobNotFound(f"no job {job_id!r} in this cluster (or it is gone)") from None
            raise
        return record.with_version(0)

    def _current(self, job_id: str) -> Fence:
        layout = self.layout
        return self.cluster.jobs.not_finished(job_id) + Fence.absent(
            layout.quarantine_entry(job_id),
            error=JobQuarantined,
            description=f"job {job_id} is in quarantine: it does not run, so it cannot stop",
        )

    def _ask_checkpoint(self, job_id: str, token: str) -> None:
        control = self.cluster.control(job_id)
        if control.desired().values.get(CHECKPOINT) == token:
            return
        control.set({CHECKPOINT: token})

    # -- resume ----------------------------------------------------------------------------------

    def resume(
        self,
        job_id: str,
        *,
        definition: JobDefinition | None = None,
        summary: dict[str, SummaryValue] | None = None,
        new_code: bool = False,
    ) -> Resumed:
        """Resume a STOPPED job, with ``definition`` (and ``summary`` keys: its lifecycle
        options) if given. Idempotent: a job resumed already (stop request gone, status still
        STOPPED) is reported with ``already``.

        Raises :class:`JobNotFound`, :class:`JobFinished`, :class:`JobQuarantined`,
        :class:`WrongState` (the job is not stopped, or is still stopping), or a definition's
        errors (:func:`replace_definition`).
        """
        status = self.status(job_id)
        stop = self.request_of(job_id)
        if stop is None and self._resumed_since_stopped(job_id, status):
            return self._resumed(job_id, None, already=True)
        self._check_resumable(job_id, status, stop)
        assert status is not None and status.version is not None
        if stop is None:
            return self._resumed(job_id, None, already=True)
        version = None
        if definition is not None or summary:
            if definition is None:
                definition = self.cluster.jobs.recover(job_id, lock=False).state
            handle = replace_definition(
                self.cluster,
                job_id,
                definition,
                status_version=status.version,
                summary=summary,
            )
            version = handle.version
        self.cluster.step("resume:redefined")
        assert stop.version is not None
        path = self.layout.stop(job_id)
        pinned = self.zk.exists(request_pins.pin_of(path)) is not None
        try:
            self.zk.commit(
                [
                    Check(self.layout.status(job_id), status.version),
                    *request_pins.gone_ops(path, stop.version, pinned=pinned),
                ]
            )
        except (VersionConflict, HandleNotFound, NotEmpty) as exc:  # NotEmpty: pinned meanwhile
            raise WrongState(
                f"job {job_id} changed while it was being resumed ({exc}): look at it again "
                "(zkstore jobs show) and resume it again if it is still STOPPED"
            ) from exc
        self.cluster.step("resume:requested")
        return self._resumed(job_id, version, new_code=new_code)

    def resumed_already(self, job_id: str) -> bool:
        """True if the job was stopped and resumed since: its stop is behind it (``jobs resume``
        again has nothing to start)."""
        status = self.status(job_id)
        return self.request_of(job_id) is None and self._resumed_since_stopped(job_id, status)

    def check_resumable(self, job_id: str) -> None:
        """Raise as :meth:`resume` would for a job it cannot resume (before anybody reads its
        definition to change it): :class:`JobNotFound`, :class:`JobFinished`,
        :class:`JobQuarantined`, :class:`WrongState`. A job resumed already passes."""
        status = self.status(job_id)
        stop = self.request_of(job_id)
        if stop is None and self._resumed_since_stopped(job_id, status):
            raise WrongState(
                f"job {job_id} was resumed already ({status.state if status else '?'}): "
                f"stop it again (zkstore jobs stop {job_id}) to give it a new definition"
            )
        self._check_resumable(job_id, status, stop)

    def _resumed_since_stopped(self, job_id: str, status: JobStatus | None) -> bool:
        """True if the job's last stopped attempt is behind it: it was resumed (running the
        command again is a no-op, as the docs say)."""
        if status is None or status.state == STOPPED or status.attempt < 2:
            return False
        try:
            kept = history.read(self.zk, self.layout.history(job_id), JobHistory)
        except CorruptRecord:
            return False
        if kept is None:
            return False
        stopped = [n for n, entry in kept.attempts.items() if entry.get("outcome") == STOPPED]
        return bool(stopped) and max(int(n) for n in stopped) < status.attempt

    def _check_resumable(
        self, job_id: str, status: JobStatus | None, stop: StopRequest | None
    ) -> None:
        layout = self.layout
        result, quarantine, handle = self.zk.exists_many(
            [layout.result(job_id), layout.quarantine_entry(job_id), layout.job_handle(job_id)]
        )
        if result is not None:
            raise JobFinished(f"job {job_id} already finished: it cannot be resumed")
        if quarantine is not None:
            raise JobQuarantined(
                f"job {job_id} is quarantined: `zkstore quarantine release {job_id}` runs it"
            )
        if handle is None:
            raise JobNotFound(f"no job {job_id!r} in this cluster")
        if status is None or status.state != STOPPED:
            state = STOPPING if stop is not None else (status.state if status else "SUBMITTED")
            hint = (
                "it is still stopping: wait for STOPPED (zkstore jobs show)"
                if stop is not None
                else f"stop it first (zkstore jobs stop {job_id})"
            )
            raise WrongState(f"job {job_id} is {state}, not STOPPED: {hint}")

    def _resumed(
        self, job_id: str, version: int | None, *, already: bool = False, new_code: bool = False
    ) -> Resumed:
        newest = self.cluster.checkpoints(job_id).newest_handle()
        checkpoint_id = newest.summary.get("checkpoint_id") if newest is not None else None
        return Resumed(
            job_id,
            version,
            checkpoint_id if isinstance(checkpoint_id, int) else None,
            time_text(newest.created) if newest is not None else None,
            already=already,
            new_code=new_code,
        )
