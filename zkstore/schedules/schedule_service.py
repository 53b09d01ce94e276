"""What an operator asks of a schedule, said once for the command line and the HTTP API:
create (with its ``--after-schedule`` checked), pause or resume, delete.

A click function (``zkstore schedules create | pause | resume | delete``) and an HTTP route
(``POST /api/v1/schedules/NAME/pause``, ``DELETE /api/v1/schedules/NAME``) parse what they are
given, call one of these, and say what came back in their own words: neither writes to
ZooKeeper itself (issue 61). The writes are the store's (:mod:`zkstore.schedules.schedule_store`);
the errors are the store's too, and decide the exit code or the HTTP status.
"""

from __future__ import annotations

from zkstore.errors import ConfigError, HandleNotFound
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import optional_second_text, time_text
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import Schedule, ScheduleStore
from zkstore.schedules.timing import shares_windows

__all__ = ["check_chain", "create", "delete", "set_paused"]


def check_chain(spec: ScheduleSpec, store: ScheduleStore) -> None:
    """Refuse (:class:`ConfigError`, exit 2) an ``--after-schedule`` of an ``--every``
    schedule whose windows are not all windows of this one's: every run would wait for a
    window the other schedule never has, and fail. A schedule not made yet is not judged."""
    other = spec.after_schedule
    assert other is not None
    try:
        theirs = store.spec(other)
    except HandleNotFound:
        return
    if shares_windows(spec.timing(), theirs.timing()):
        return
    theirs_from = optional_second_text(theirs.start_at) or time_text(theirs.created)
    raise ConfigError(
        f"--after-schedule {other}: its windows (every {theirs.every}s from {theirs_from}) are "
        f"not all this schedule's (every {spec.every}s from "
        f"{optional_second_text(spec.start_at)}): a run of a window {other} does not have would "
        f"fail; give --every a multiple of {theirs.every}s without --start-at (windows at "
        "multiples of the interval), the same --start-at as its, or a --cron for both"
    )


def create(store: ScheduleStore, spec: ScheduleSpec, definition: JobDefinition) -> Schedule:
    """Store ``definition`` and publish ``spec`` (checked against the cluster's bounds and its
    chain by the caller first, before the definition is built); durable once this returns.
    :class:`~zkstore.errors.HandleExists` for a name taken."""
    return store.create(spec, definition)


def set_paused(store: ScheduleStore, name: str, paused: bool) -> ScheduleSpec:
    """Pause (windows until a resume are recorded skipped) or resume the schedule ``name``;
    the spec as written. :class:`HandleNotFound` if there is none."""
    return store.set_paused(name, paused)


def delete(store: ScheduleStore, name: str) -> None:
    """Delete the schedule ``name`` and its definition (its runs are left alone);
    :class:`HandleNotFound` if there is none."""
    if not store.delete(name):
        raise HandleNotFound(f"no schedule {name!r}")
