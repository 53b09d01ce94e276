"""The ops the runtime adds to its transactions for the lifecycle (the leader's and the driver's).

- the leader ending an attempt: :func:`end_ops` (write the ``end`` request, fenced on its
  leadership and on the status version of the attempt: a request for an attempt that is over
  already cannot be written);
- the leader recording STOPPED: :func:`stopped_ops` (the status at the version read, checked
  against a ``running`` node, and the ``end`` request removed), to which it adds the unassign
  op and :func:`zkstore.lifecycle.outbox.notification_ops`;
- the leader recording any end of an ended attempt (restart, finish): :func:`clear_end_ops`;
- the driver writing a heartbeat: :func:`heartbeat_ops` (fenced on its attempt, like every
  write of a driver: its ``running`` node and its status version).
"""

from __future__ import annotations

from dataclasses import dataclass

from zkstore.jobs import request_pins
from zkstore.layout import Layout
from zkstore.lifecycle.lifecycle_records import EndRequest, Heartbeat
from zkstore.zookeeper.ops import Check, Create, Op, SetData, absent

__all__ = ["EndNode", "clear_end_ops", "end_ops", "heartbeat_ops", "stopped_ops"]


@dataclass(frozen=True)
class EndNode:
    """The ``end`` node there already, as the job's snapshot read it: its ``version`` (-1 for
    one that could not be read or parsed: any), and whether it has its pin."""

    version: int
    pinned: bool = False


def end_ops(
    layout: Layout,
    job_id: str,
    request: EndRequest,
    *,
    status_version: int,
    existing: EndNode | None,
    pin: bool,
) -> list[Op]:
    """Write ``request`` (``existing``: an ``end`` node there already, an older attempt's or
    one that could not be read; None: there is none), with its pin if ``pin`` (the fleet
    allows it: :mod:`zkstore.jobs.request_pins`), while the status is still at
    ``status_version``.

    A node there already is deleted and made again rather than set: deleting needs only the
    right on the job's node, which is the cluster's, so an ``end`` the job's own identity made
    with an ACL that leaves the cluster out is replaced all the same (setting it would be
    refused)."""
    path = layout.end(job_id)
    return [
        Check(layout.status(job_id), status_version),
        *clear_end_ops(layout, job_id, existing),
        *request_pins.made_ops(path, request.to_bytes(), pinned=pin),
    ]


def clear_end_ops(layout: Layout, job_id: str, existing: EndNode | None) -> list[Op]:
    """Remove the ``end`` request (and its pin) at ``existing`` (nothing if None)."""
    if existing is None:
        return []
    return request_pins.gone_ops(layout.end(job_id), existing.version, pinned=existing.pinned)


def stopped_ops(
    layout: Layout,
    job_id: str,
    status: bytes,
    *,
    status_version: int,
    end: EndNode | None,
) -> list[Op]:
    """Record the STOPPED ``status`` (its JSON) over the one at ``status_version``, only while
    no ``running`` node exists; remove the ``end`` request. The new status version fences out a
    driver that was about to take ``running`` for the attempt."""
    return [
        *absent(layout.running(job_id)),
        SetData(layout.status(job_id), status, status_version),
        *clear_end_ops(layout, job_id, end),
    ]


def heartbeat_ops(
    layout: Layout, job_id: str, beat: Heartbeat, *, existing: int | None
) -> list[Op]:
    """The driver's heartbeat: create the EPHEMERAL node (``existing`` None) or replace it at
    version ``existing``. Commit with the attempt's fence."""
    path = layout.heartbeat(job_id)
    if existing is None:
        return [Create(path, beat.to_bytes(), ephemeral=True)]
    return [SetData(path, beat.to_bytes(), existing)]
