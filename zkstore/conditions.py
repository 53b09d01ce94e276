"""Conditions: what the leader does not do for a job or a schedule, said on the object itself
(invariant 17: nothing accepted is dropped in silence).

Kubernetes' ``status.conditions``: each condition has a ``type`` (what does not happen:
``CannotFire``, ``NotificationDropped``, ``Unplaceable``), a ``reason`` (a CamelCase word a
script can match), a ``message`` for people (the leader's words) and ``since`` (when it began to
hold). They live apart from the object's own records, under ``R/conditions/jobs/<job>`` and
``R/conditions/schedules/<name>`` (:class:`Conditions`), so that a condition outlives the
cleanup of a job that finished (a notification of its end dropped afterwards) and never
changes the version of a record a driver is fenced on. Only the leader writes them, fenced on
its leadership; it clears each one when it no longer holds (a schedule fired again, a
notification of the job delivered), and deletes a job's with its result. A schedule's go with
the schedule (``schedules delete``: the same transaction), and a leader's write of one checks
that the schedule still exists, so none is made for a schedule deleted meanwhile; what a crash
or an older release left is ``orphan-conditions`` to ``handles lingering`` and ``cleanup``.

A job's placement that no daemon can satisfy is a condition too, read from its status (the
leader writes why a job waits there already): :func:`waiting_condition`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from zkstore.errors import CorruptRecord, HandleExists, HandleNotFound, VersionConflict
from zkstore.layout import Layout
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import PENDING
from zkstore.records.record import Record
from zkstore.records.strict import check_text, parse_time, time_text, to_millisecond
from zkstore.zookeeper.ops import Check, Create, Delete, Fence, Op, SetData
from zkstore.zookeeper.retry import RACES, TryAgain

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "CANNOT_FIRE",
    "JOB",
    "NOTIFICATION_DROPPED",
    "SCHEDULE",
    "UNPLACEABLE",
    "Condition",
    "ConditionStore",
    "Conditions",
    "waiting_condition",
]

logger = logging.getLogger(__name__)

#: The kinds of object that carry conditions.
JOB = "jobs"
SCHEDULE = "schedules"
#: A schedule whose windows the leader does not fire (under the minimum, unreadable).
CANNOT_FIRE = "CannotFire"
#: A notification of the job that the leader dropped undelivered.
NOTIFICATION_DROPPED = "NotificationDropped"
#: A job no live daemon can run (none has the labels it requires, or all are drained).
UNPLACEABLE = "Unplaceable"

#: The most conditions one object holds (one per type: a handful exist).
MAX_CONDITIONS = 16
_WORD = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
#: How the leader says that no daemon can take a job (recovery.leader.placement).
NO_DAEMON = "no daemon"


@dataclass(frozen=True)
class Condition:
    """One thing the leader does not do for an object, and since when."""

    type: str
    reason: str
    message: str
    since: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "since", to_millisecond(self.since))  # what it reads back

    def as_dict(self) -> dict[str, str]:
        return {
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
            "since": time_text(self.since),
        }

    def line(self) -> str:
        """``CannotFire (UnderMinimumInterval) since ...: message``: one line for people."""
        return f"{self.type} ({self.reason}) since {time_text(self.since)}: {self.message}"


@dataclass(frozen=True)
class Conditions(Record):
    """``R/conditions/<kind>/<name>``: an object's conditions, by type (``items``: type ->
    ``{reason, message, since}``)."""

    items: dict[str, Any] | None = None

    optional = frozenset({"items"})
    max_bytes = 32 * 1024

    def conditions(self) -> list[Condition]:
        """The conditions, oldest first (their ``since`` converted once, with the record)."""
        return list(self._conditions)

    @cached_property
    def _conditions(self) -> tuple[Condition, ...]:
        return tuple(
            sorted(
                (
                    Condition(kind, v["reason"], v["message"], parse_time(v["since"]))
                    for kind, v in (self.items or {}).items()
                ),
                key=lambda c: (c.since, c.type),
            )
        )

    def holding(self, condition: Condition) -> Conditions:
        """These conditions with ``condition`` holding (its ``since`` kept if it held with the
        same reason already)."""
        known = (self.items or {}).get(condition.type)
        since = (
            known["since"]
            if known is not None and known["reason"] == condition.reason
            else time_text(condition.since)
        )
        items = dict(self.items or {})
        items[condition.type] = {
            "reason": condition.reason,
            "message": condition.message,
            "since": since,
        }
        return replace(self, items=items)

    def without(self, kind: str) -> Conditions:
        return replace(self, items={k: v for k, v in (self.items or {}).items() if k != kind})

    def problem(self) -> str | None:
        items = self.items or {}
        if len(items) > MAX_CONDITIONS:
            return "too many conditions"
        for kind, value in items.items():
            if not _WORD.fullmatch(kind) or not isinstance(value, dict):
                return f"condition {kind!r:.40} is not a type"
            reason, message, since = value.get("reason"), value.get("message"), value.get("since")
            if not (isinstance(reason, str) and _WORD.fullmatch(reason)):
                return f"condition {kind}'s reason is not a word"
            if not isinstance(message, str) or not isinstance(since, str):
                return f"condition {kind} has no message or no since"
            try:
                check_text(message, "message")
            except ValueError as exc:
                return f"condition {kind}: {exc}"
        try:
            self._conditions  # noqa: B018 (converted once: garbage is found here)
        except ValueError as exc:
            return f"a condition's since: {exc}"
        return None


def waiting_condition(status: JobStatus | None) -> Condition | None:
    """The condition of a job that waits because no daemon can run it (its status says so:
    the leader's words), None for any other job."""
    if status is None or status.state != PENDING or not status.reason:
        return None
    if not status.reason.startswith(NO_DAEMON):
        return None
    return Condition(UNPLACEABLE, "NoDaemonMatches", status.reason, status.updated)


class ConditionStore:
    """The conditions of a cluster's jobs and schedules: read by anybody, written by the leader
    (every write fenced on its leadership)."""

    def __init__(self, zk: ZooKeeper, layout: Layout) -> None:
        self.zk = zk
        self.layout = layout

    def path(self, kind: str, name: str) -> str:
        return self.layout.conditions_of(kind, name)

    def _commit(self, kind: str, name: str, op: Op, fence: Fence) -> bool:
        """Commit one change of the object's conditions; False if its schedule is gone."""
        ops = [op]
        if kind == SCHEDULE and not isinstance(op, Delete):
            ops.insert(0, Check(self._object(kind, name)))  # never on a deleted schedule
        try:
            self.zk.commit(ops, fence=fence)
        except HandleNotFound as exc:
            if exc.path == self._object(kind, name):
                return False  # the schedule is gone (its conditions went with it)
            raise TryAgain(str(exc)) from exc
        except (HandleExists, VersionConflict) as exc:
            raise TryAgain(str(exc)) from exc  # changed meanwhile: read again
        return True

    def _object(self, kind: str, name: str) -> str:
        """The node of the object the conditions are on (a schedule's spec)."""
        return f"{self.layout.schedules}/{name}" if kind == SCHEDULE else self.layout.job_dir(name)

    def read(self, kind: str, name: str) -> list[Condition]:
        """The object's conditions (none without a node); garbage raises
        :class:`CorruptRecord`."""
        found = self.zk.get_if_exists(self.path(kind, name))
        if found is None:
            return []
        return Conditions.from_znode(found[0], found[1], self.path(kind, name)).conditions()

    def hold(self, kind: str, name: str, condition: Condition, *, fence: Fence) -> bool:
        """Make ``condition`` hold on the object (fenced); True if that changed anything."""
        return self._change(kind, name, lambda c: c.holding(condition), fence)

    def clear(
        self,
        kind: str,
        name: str,
        types: Sequence[str],
        *,
        fence: Fence,
        when: Callable[[Condition], bool] | None = None,
    ) -> bool:
        """The conditions of ``types`` (those ``when`` says, if given) no longer hold
        (fenced); True if one did."""

        def without(found: Conditions) -> Conditions:
            for held in found.conditions():
                if held.type in types and (when is None or when(held)):
                    found = found.without(held.type)
            return found

        return self._change(kind, name, without, fence, create=False)

    def delete_op(self, kind: str, name: str) -> Op:
        """The op that deletes the object's conditions (to commit with the object's end;
        :func:`zkstore.zookeeper.ops.without_existing`-style callers drop it when absent)."""
        return Delete(self.path(kind, name))

    def _change(
        self, kind: str, name: str, change: Any, fence: Fence, *, create: bool = True
    ) -> bool:
        path = self.path(kind, name)

        def attempt() -> bool:
            found = self.zk.get_if_exists(path)
            if found is None:
                if not create:
                    return False
                record = Conditions(version=None)
            else:
                try:
                    record = Conditions.from_znode(found[0], found[1], path)
                except CorruptRecord as exc:
                    logger.warning("%s; written over", exc)
                    record = Conditions(version=found[1].version)
            changed = change(record)
            if changed.items == record.items and found is not None:
                return False
            if not changed.items and found is not None:
                op: Op = Delete(path, found[1].version)
            elif found is None:
                if not changed.items:
                    return False
                self.zk.ensure_path(path.rsplit("/", 1)[0])
                op = Create(path, changed.to_bytes())
            else:
                op = SetData(path, changed.to_bytes(), version=found[1].version)
            return self._commit(kind, name, op, fence)

        return RACES.call(attempt, what=f"changing the conditions of {kind} {name}", path=path)
