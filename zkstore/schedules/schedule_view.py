"""What people and scripts see of schedules: one JSON shape for ``schedules list|show``, the
HTTP API (``/api/v1/schedules``) and the status page. Reads records only, never a payload.

A row says when the schedule fires (``cron``/``every``, its time zone), its policies, whether it
is paused, its next window, its counts, how many windows it is behind (decided by no leader
yet: a catch-up being worked off, or no leader) and its last run with that run's state;
``show`` adds the recent windows (fired with the run, skipped with why, missed with how many).
A schedule whose records are garbage is listed with ``error`` set, never raised.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from zkstore.conditions import SCHEDULE, ConditionStore
from zkstore.errors import ConfigError, CorruptRecord, JobNotFound, ZkStoreError
from zkstore.jobs.runoptions import LifecycleOptions
from zkstore.jobs.runspec import RunSpec
from zkstore.jobs.shown import run_options_shown
from zkstore.jobs.snapshot import read_snapshots
from zkstore.layout import Layout
from zkstore.records.strict import optional_second_text, time_text
from zkstore.schedules.due import behind
from zkstore.schedules.schedule_records import ScheduleSpec, ScheduleState
from zkstore.schedules.schedule_store import BrokenSchedule, Schedule, ScheduleStore
from zkstore.schedules.timing import format_time

if TYPE_CHECKING:
    from zkstore.zookeeper.zk import ZooKeeper

__all__ = [
    "COLUMNS",
    "broken_row",
    "detail",
    "listing",
    "next_window",
    "row",
    "run_states",
    "showing",
    "windows_behind",
]

#: the keys of a row, in the order of the table
COLUMNS = (
    "name",
    "when",
    "timezone",
    "paused",
    "next",
    "last_run",
    "last_state",
    "fired",
    "behind",
)


def next_window(spec: ScheduleSpec, now: datetime) -> str | None:
    """The schedule's next window after ``now`` (None: it has ended, or it is paused)."""
    if spec.paused:
        return None
    try:
        found = spec.timing().next_after(now)
    except ConfigError:
        return None
    return None if found is None else format_time(found)


def windows_behind(spec: ScheduleSpec, state: ScheduleState, now: datetime) -> int | None:
    """The windows up to ``now`` no leader decided yet (counted, not stepped through: see
    :func:`zkstore.schedules.due.behind`); None if the schedule's time zone is unknown here."""
    try:
        return behind(spec, state, now)
    except ConfigError:
        return None


def row(schedule: Schedule, now: datetime, last_state: str | None) -> dict[str, Any]:
    """The list row of one schedule."""
    spec, state = schedule.spec, schedule.state
    return {
        "name": spec.name,
        "when": spec.cron if spec.cron is not None else f"every {spec.every}s",
        "cron": spec.cron,
        "every": spec.every,
        "timezone": spec.timezone,
        "concurrency": spec.concurrency,
        "catchup": spec.catchup,
        "start_at": optional_second_text(spec.start_at),
        "end_at": optional_second_text(spec.end_at),
        "after_schedule": spec.after_schedule,
        "paused": spec.paused,
        "next": next_window(spec, now),
        "last": optional_second_text(state.last),
        "last_run": state.last_run,
        "last_state": last_state,
        "fired": state.fired,
        "skipped": state.skipped,
        "missed": state.missed,
        "behind": windows_behind(spec, state, now),
        "catchup_max": spec.catchup_limit,
        "created": time_text(spec.created),
        "error": None,
    }


def broken_row(broken: BrokenSchedule) -> dict[str, Any]:
    keys = (
        "cron",
        "every",
        "concurrency",
        "catchup",
        "catchup_max",
        "last",
        "skipped",
        "missed",
        "created",
    )
    return {
        **dict.fromkeys((*COLUMNS, *keys)),
        "name": broken.name,
        "error": f"{type(broken.error).__name__}: {broken.error}",
    }


def detail(schedule: Schedule, now: datetime, last_state: str | None) -> dict[str, Any]:
    """``show``: the row, the definition's summary (what its runs are, and the options of how
    they run: ``lifecycle``), the recent windows, newest first, and the schedule's changes
    (``schedules update``), newest first."""
    summary = dict(schedule.spec.handle.summary)
    keys = ("name", "kind", "entry", "max_attempts", "max_lost")
    return {
        **row(schedule, now, last_state),
        "job": {key: summary.get(key) for key in keys},
        "lifecycle": run_options_shown(_lifecycle(summary)),
        "history": [entry.to_json() for entry in reversed(schedule.state.history)],
        "changes": [change.to_json() for change in reversed(schedule.spec.changes)],
    }


def _lifecycle(summary: dict[str, Any]) -> LifecycleOptions:
    """The lifecycle options of a schedule's definition (none if its run options are
    garbled: ``schedules show`` still shows the schedule)."""
    try:
        return RunSpec.from_summary(summary).lifecycle
    except ValueError:
        return LifecycleOptions()


def run_states(zk: ZooKeeper, layout: Layout, job_ids: list[str]) -> dict[str, str]:
    """The state of each run (pipelined reads); runs the store has no trace of are left out."""
    try:
        return {job: snap.state for job, snap in read_snapshots(zk, layout, job_ids).items()}
    except JobNotFound:
        return {}


def listing(
    store: ScheduleStore, layout: Layout, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Every schedule's row (sorted by name); unreadable ones with ``error``."""
    moment = now or datetime.now(UTC)
    good, broken = store.all()
    runs = [s.state.last_run for s in good if s.state.last_run is not None]
    states = run_states(store.zk, layout, runs)
    rows = [row(s, moment, states.get(s.state.last_run or "")) for s in good]
    rows += [broken_row(b) for b in broken]
    return sorted(rows, key=lambda r: str(r["name"]))


def showing(
    store: ScheduleStore, layout: Layout, name: str, now: datetime | None = None
) -> dict[str, Any]:
    """One schedule's detail; :class:`~zkstore.errors.HandleNotFound` if there is none. A
    schedule whose records are garbage is shown with ``error`` (why), never raised."""
    try:
        schedule = store.get(name)
    except CorruptRecord as exc:
        broken = broken_row(BrokenSchedule(name, exc))
        return {
            **broken,
            "job": None,
            "lifecycle": None,
            "history": [],
            "changes": [],
            "conditions": conditions_of(store.zk, layout, name),
        }
    last = schedule.state.last_run
    try:
        states = run_states(store.zk, layout, [last]) if last is not None else {}
    except ZkStoreError:
        states = {}
    shown = detail(schedule, now or datetime.now(UTC), states.get(last or ""))
    shown["conditions"] = conditions_of(store.zk, layout, name)
    return shown


def conditions_of(zk: ZooKeeper, layout: Layout, name: str) -> list[dict[str, str]]:
    """The schedule's conditions (:mod:`zkstore.conditions`: what the leader does not do for
    it, and why), oldest first; unreadable ones are said as one condition of their own."""
    try:
        found = ConditionStore(zk, layout).read(SCHEDULE, name)
    except CorruptRecord as exc:
        return [
            {"type": "Unknown", "reason": "UnreadableConditions", "message": str(exc), "since": ""}
        ]
    return [condition.as_dict() for condition in found]
