"""A run's identity: the job id of a schedule's window, and what its handle says about it.

A run's job id is derived from its schedule and its window, ``<schedule>-<YYYYMMDDTHHMMSSZ>``
(the window in UTC), so that a repeated fire of one window (a new leader, a retry after
:class:`~zkstore.errors.OutcomeUnknown`) is a create of the same node in ``currentJobs``, which
ZooKeeper refuses: one window can never make a second run. Schedule names are at most
:data:`MAX_SCHEDULE_NAME_CHARS` characters so that every run id is a valid job id (128).

A run's definition handle carries, beside the job's usual summary, ``schedule`` (its schedule's
name) and ``scheduled`` (its window): the run records its scheduled time where every listing
(and, once it is finished, its result's copy of the summary) already looks. A job whose id looks
like a run's but whose handle does not say so is somebody else's (``submit --job-id`` got there
first): the window is recorded as skipped, never taken for fired.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from zkstore.errors import ConfigError
from zkstore.jobs.dependencies import Dependency
from zkstore.jobs.runspec import RunSpec
from zkstore.jobs.stored import AFTER_SCHEDULE, SCHEDULE, SCHEDULED
from zkstore.layout import MAX_SCHEDULE_NAME_CHARS, validate_schedule_name
from zkstore.records.handle import SummaryValue
from zkstore.records.strict import parse_time
from zkstore.schedules.timing import format_time

__all__ = [
    "AFTER_SCHEDULE",
    "MAX_SCHEDULE_NAME_CHARS",
    "chained",
    "dependencies_of",
    "is_run_of",
    "run_id",
    "run_summary",
    "split_run_id",
    "validate_name",
    "window_of",
]

#: 128 (a job id) less the ``-YYYYMMDDTHHMMSSZ`` of a window (17), less room to spare.
#: The schedule a run waits for (``--after-schedule``: its run of the same window).

_STAMP = "%Y%m%dT%H%M%SZ"
_STAMP_RE = re.compile(r"-(\d{8}T\d{6}Z)")


def validate_name(name: str) -> str:
    """``name`` if it can name a schedule (:func:`zkstore.layout.validate_schedule_name`)."""
    return validate_schedule_name(name)


def run_id(schedule: str, window: datetime) -> str:
    """The job id of ``schedule``'s run of ``window`` (a whole second)."""
    if window.tzinfo is None or window.microsecond:
        raise ValueError(f"a window is an aware whole second, not {window!r}")
    return f"{validate_name(schedule)}-{window.astimezone(UTC).strftime(_STAMP)}"


def window_of(schedule: str, job_id: str) -> datetime | None:
    """The window ``job_id`` is ``schedule``'s run of, or None if it is not such an id."""
    prefix = f"{schedule}-"
    if not job_id.startswith(prefix) or not _STAMP_RE.fullmatch(job_id[len(schedule) :]):
        return None
    try:
        return datetime.strptime(job_id[len(prefix) :], _STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


def split_run_id(job_id: str) -> tuple[str, datetime] | None:
    """``(schedule, window)`` if ``job_id`` has the form of a run's id (``NAME-<stamp>``,
    NAME a valid schedule name), else None; whether that schedule exists is not known here."""
    found = re.fullmatch(r"(.+)-(\d{8}T\d{6}Z)", job_id)
    if found is None:
        return None
    try:
        validate_name(found.group(1))
        window = datetime.strptime(found.group(2), _STAMP).replace(tzinfo=UTC)
    except (ConfigError, ValueError):
        return None
    return found.group(1), window


def run_summary(schedule: str, window: datetime) -> dict[str, SummaryValue]:
    """The fields a run's handle adds to its job's summary."""
    return {SCHEDULE: schedule, SCHEDULED: format_time(window)}


def is_run_of(summary: Mapping[str, SummaryValue], schedule: str, window: datetime) -> bool:
    """True if a handle's ``summary`` says it is ``schedule``'s run of ``window``."""
    return summary.get(SCHEDULE) == schedule and summary.get(SCHEDULED) == format_time(window)


def chained(schedule: str, window: datetime) -> Dependency:
    """The dependency of a run of ``window`` on ``schedule``'s run of the same window
    (``--after-schedule``): it must succeed."""
    return Dependency(run_id(schedule, window), schedule=schedule, window=window)


def dependencies_of(
    summary: Mapping[str, SummaryValue], run: RunSpec | None = None
) -> tuple[Dependency, ...]:
    """Every dependency a job's handle ``summary`` names: its run options' ``after``
    (``run``, parsed once by the caller, else read from ``summary``) and, for a run that
    chains after another schedule, that schedule's run of its window. :class:`ValueError` for
    a summary no writer makes."""
    found = list((run if run is not None else RunSpec.from_summary(summary)).after)
    after = summary.get(AFTER_SCHEDULE)
    if after is not None:
        scheduled = summary.get(SCHEDULED)
        if not isinstance(after, str) or not isinstance(scheduled, str):
            raise ValueError("'after_schedule' without a 'scheduled' window")
        try:
            found.append(chained(validate_name(after), parse_time(scheduled)))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return tuple(found)
