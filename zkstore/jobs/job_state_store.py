"""The per-job records under ``R/jobs/<job>``: status, running, outcome, cancel and control.

Who writes what: the leader writes ``status`` (fenced on its election node); a driver creates its
EPHEMERAL ``running`` node and, as it exits, its ``outcome`` (fenced on the attempt); anybody may
request a cancel or change ``control``, each with a version check.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zkstore.errors import HandleExists, HandleNotFound
from zkstore.jobs import request_pins
from zkstore.layout import Layout
from zkstore.records.job_records import (
    CancelRequest,
    ControlObject,
    JobStatus,
    Outcome,
    RunningInfo,
)
from zkstore.records.record import read_record
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Create, Fence, SetData
from zkstore.zookeeper.retry import RACES

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = ["JobStateStore", "who"]


def who() -> str:
    """``user@host`` of this process, to say who asked for something."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class JobStateStore:
    """Reads and versioned writes of one cluster's per-job records."""

    def __init__(
        self, zk: ZooKeeper, layout: Layout, *, pinned: Callable[[], bool] = lambda: False
    ) -> None:
        self.zk = zk
        self.layout = layout
        #: whether the requests written here get their pin (the fleet allows it: see
        #: :mod:`zkstore.jobs.request_pins`)
        self.pinned = pinned

    def _read(self, path: str) -> tuple[bytes, Any] | None:
        try:
            return self.zk.get(path)
        except HandleNotFound:
            return None

    # -- status (leader) -------------------------------------------------------------------------

    def status(self, job_id: str) -> JobStatus | None:
        path = self.layout.status(job_id)
        found = self._read(path)
        return None if found is None else JobStatus.from_znode(found[0], found[1], path)

    def put_status(
        self,
        job_id: str,
        status: JobStatus,
        *,
        expected_version: int | None,
        fence: Fence | None = None,
    ) -> JobStatus:
        """Create the status (``expected_version=None``) or replace the one at that version.

        Raises :class:`HandleExists` / :class:`VersionConflict` if somebody got there first,
        or the fence's error. Returns the status with its new version.
        """
        path = self.layout.status(job_id)
        if expected_version is None:
            self.zk.ensure_path(self.layout.job_dir(job_id))
            self.zk.commit([Create(path, status.to_bytes())], fence=fence)
            return status.with_version(0)
        self.zk.commit([SetData(path, status.to_bytes(), expected_version)], fence=fence)
        return status.with_version(expected_version + 1)

    # -- running / outcome (driver) --------------------------------------------------------------

    def running(self, job_id: str) -> tuple[RunningInfo, int] | None:
        """The live driver's record and the session that owns it, or None if no driver runs."""
        path = self.layout.running(job_id)
        found = self._read(path)
        if found is None:
            return None
        return RunningInfo.from_znode(found[0], found[1], path), found[1].ephemeralOwner

    def outcome(self, job_id: str) -> Outcome | None:
        path = self.layout.outcome(job_id)
        found = self._read(path)
        return None if found is None else Outcome.from_znode(found[0], found[1], path)

    # -- cancel (anybody) ------------------------------------------------------------------------

    def request_cancel(
        self, job_id: str, *, by: str | None = None, reason: str | None = None
    ) -> CancelRequest:
        """Ask the job to stop; asking again returns the first request. Idempotent.

        ``by`` defaults to this process's ``user@host``. The request returned is dated as the
        leader and ``jobs show`` date it: when ZooKeeper made its node (its ``ctime``), not by
        this host's clock, which its own ``requested`` keeps (an hour off, the command said so).
        """
        request = CancelRequest(version=None, requested=utc_moment(), by=by or who(), reason=reason)
        self.zk.ensure_path(self.layout.job_dir(job_id))
        made = RACES.call(lambda: self._create_cancel(job_id, request), what=f"cancel of {job_id}")
        return self._dated_by_zookeeper(job_id, made)

    def _dated_by_zookeeper(self, job_id: str, request: CancelRequest) -> CancelRequest:
        """``request`` dated by its node's ``ctime``; as it is if the node is gone meanwhile."""
        found = self._read(self.layout.cancel(job_id))
        if found is None:
            return request
        return replace(request, requested=datetime.fromtimestamp(found[1].ctime / 1000, UTC))

    def _create_cancel(self, job_id: str, request: CancelRequest) -> CancelRequest:
        """Create the cancel node; the stored request if one exists already and only the
        cluster can remove it. One the job made for itself (its node lets its identity create
        any name there: unreadable, or with no pin once pins are written, or with an ACL that
        lets the job change it) is replaced (:func:`~zkstore.jobs.request_pins.take_over`):
        a job could otherwise make a request the operator's command takes for its own, and
        delete it after. One that went between the failed create and the read is tried again:
        never a request that was not written."""
        path = self.layout.cancel(job_id)
        pinned = self.pinned()
        made = request_pins.made_ops(path, request.to_bytes(), pinned=pinned)
        try:
            self.zk.commit(made)
        except HandleExists:
            existing = request_pins.found_or_taken(
                self.zk, path, made, lambda: self.cancel_request(job_id), pinned=pinned
            )
            if existing is not None:
                return existing
        return request.with_version(0)

    def cancel_request(self, job_id: str) -> CancelRequest | None:
        path = self.layout.cancel(job_id)
        found = self._read(path)
        return None if found is None else CancelRequest.from_znode(found[0], found[1], path)

    # -- control (anybody, versioned) ------------------------------------------------------------

    def control(self, job_id: str) -> tuple[dict[str, Any], int | None]:
        """The job's dynamic configuration and its version (``None`` if never set);
        :class:`CorruptRecord` if the node holds no JSON object."""
        found = read_record(self.zk, ControlObject, self.layout.control(job_id))
        return ({}, None) if found is None else (found.values, found.version)
