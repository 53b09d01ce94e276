"""When a schedule's windows are: a cron expression in a time zone, or a fixed interval.

Pure functions: no clock is read here, every "now" is an argument. A *window* is one scheduled
time, a whole second, aware and in UTC; a schedule's windows are strictly increasing, so each
names one run (:func:`zkstore.schedules.runs.run_id`).

**Cron expressions** are evaluated by cronsim (2.8, the engine of Healthchecks.io), chosen over
croniter 7 because it is small (one module of ~560 lines, no dependency; croniter needs
python-dateutil), typed (it ships ``py.typed``; croniter does not), and because its behaviour at
daylight-saving changes is a documented rule (Debian cron's) rather than heuristics. Five fields
(minute hour day-of-month month day-of-week, names and ``L``, ``LW``, ``#`` allowed), six with
seconds *first*, or one of the macros ``@yearly @annually @monthly @weekly @daily @midnight
@hourly``.

**Time zones** come from :mod:`zoneinfo` (the system's IANA database); the default is UTC, where
nothing below applies. At a daylight-saving change:

- An expression whose minute and hour fields are both fixed (neither starts with ``*``: ``30 2 *
  * *``, ``0 9-17 * * 1-5``) is read on the wall clock, as Debian's cron does. A wall-clock time
  that does not exist on a spring-forward day (02:30 when clocks jump from 02:00 to 03:00) fires
  once, at the first moment after the gap (03:00 local); a time that happens twice on an autumn
  day (02:30 when clocks go back from 03:00 to 02:00) fires once, at its first occurrence
  (summer time).
- Any other expression (``*/15 * * * *``, ``0 * * * *``, six fields) is read on real time: an
  hourly schedule runs every 60 minutes across both changes, so none in the hour that does not
  exist, and twice in the hour that happens twice (02:00 summer time and 02:00 winter time,
  two windows an hour apart in UTC). A window is exactly an instant whose wall-clock time, at
  the offset in force then, matches; that holds for changes of half an hour (Lord Howe
  Island) or at 02:45 (Chatham) too, where cronsim's own stepping (an hour at a time in real
  time) skips windows: these expressions are iterated one offset at a time (cronsim in UTC
  over that offset's wall clock), cut at the zone's changes (:func:`transitions`).
- ``--every DURATION`` counts real elapsed seconds from its anchor; the time zone plays no part.

**Bounds.** Windows are at or after ``start`` and strictly before ``end``. For ``every``, the
windows are ``start + k * every``. ``start`` is ``--start-at``; without it, ``schedules create``
stores the first multiple of the interval since the epoch after creation
(:func:`aligned_start`), so windows fall at multiples of the interval as cron's fall on the
clock (``--every 15m``: :00, :15, :30, :45 of every hour): two schedules of the same interval,
or of intervals one a multiple of the other, share windows, which ``--after-schedule`` needs.
A schedule created before that stored no start: its windows are creation plus one interval,
plus multiples of it (:meth:`~zkstore.schedules.schedule_records.ScheduleSpec.timing`), as before.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from zkstore.errors import ConfigError
from zkstore.records.strict import check_text, second_text

__all__ = [
    "EPOCH",
    "MACROS",
    "MAX_CRON_CHARS",
    "MAX_EVERY_SECONDS",
    "ONE_SECOND",
    "WEEKS",
    "Timing",
    "aligned_start",
    "ceil_second",
    "format_time",
    "on_wall_clock",
    "parse_cron",
    "parse_every",
    "parse_moment",
    "parse_timezone",
    "shares_windows",
    "transitions",
]

#: A cron expression is short; a longer one is a mistake (and bounds the parser's work).
MAX_CRON_CHARS = 200
#: The longest interval (a record's integers are 32 bits; a year is plenty).
MAX_EVERY_SECONDS = 366 * 86400
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_EVERY = re.compile(r"(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?")
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,3}")
ONE_SECOND = timedelta(seconds=1)
#: a year's offsets are first looked at a week apart (:func:`transitions`)
WEEKS = 53
#: cronsim's horizon: an expression that matches nothing for 50 years has no next window
_HORIZON = timedelta(days=50 * 366)


def parse_cron(expression: str) -> str:
    """The expression, normalized (macros expanded, single spaces); :class:`ConfigError`
    saying why it is not one cronsim reads."""
    if not isinstance(expression, str) or len(expression) > MAX_CRON_CHARS:
        raise ConfigError(f"a cron expression is at most {MAX_CRON_CHARS} characters")
    try:
        check_text(expression, "the cron expression")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    text = " ".join(expression.split())
    text = MACROS.get(text.lower(), text)
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:  # its only error (300,000 random expressions: no other)
        raise ConfigError(f"cron expression {expression!r}: {_cron_reason(str(exc))}") from None
    return text


#: What each field of a cron expression takes, for the reason of an expression refused.
_CRON_FIELDS = {
    "second": "0-59",
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31, L or LW (a day some month has)",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 (0 and 7 are Sunday) or SUN-SAT, with L or # (5#2: the second Friday)",
}


def _cron_reason(message: str) -> str:
    """cronsim's ``Bad minute`` as a reason a person can act on: the field, its position and
    what it takes (ranges, steps ``*/15`` and lists ``1,5`` of these)."""
    field = message.removeprefix("Bad ").strip()
    if message.startswith("Bad ") and field in _CRON_FIELDS:
        return (
            f"the {field} field is not valid: it takes {_CRON_FIELDS[field]} "
            "(a value, a range a-b, a list a,b or a step */n)"
        )
    if message == "Wrong number of fields":
        return (
            "it needs five fields (minute hour day-of-month month day-of-week), six with "
            "seconds first, or a macro such as @daily"
        )
    return message


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``Europe/Berlin``, ``UTC``); :class:`ConfigError` if this
    machine's time zone database does not know it."""
    if not isinstance(name, str) or len(name) > 64 or not _ZONE.fullmatch(name):
        raise ConfigError(f"{str(name)[:64]!r} is not a time zone name like Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError(f"unknown time zone {name!r}") from None


def parse_every(text: str) -> int:
    """``--every``: ``90s``, ``10m``, ``2h``, ``1d``, ``1h30m`` or plain seconds; whole seconds,
    at least one, at most :data:`MAX_EVERY_SECONDS`."""
    raw = str(text).strip().lower()
    seconds: int | None = None
    if raw.isdigit() and len(raw) <= 9:
        seconds = int(raw)
    elif raw and (match := _EVERY.fullmatch(raw)):
        seconds = sum(
            int(value) * _UNITS[unit]
            for value, unit in zip(match.groups(), "dhms", strict=True)
            if value
        )
    if seconds is None:
        raise ConfigError(f"{text!r} is not a duration like 30s, 10m, 2h, 1d or 1h30m")
    if not 1 <= seconds <= MAX_EVERY_SECONDS:
        raise ConfigError(f"--every must be between 1 s and {MAX_EVERY_SECONDS // 86400} days")
    return seconds


def parse_moment(text: str, zone: ZoneInfo) -> datetime:
    """``--start-at`` / ``--end-at``: ISO 8601 (``2026-11-24T02:00``, with or without an
    offset), a time without an offset being the schedule's wall-clock time. Returned in UTC,
    rounded up to a whole second. A wall-clock time that does not exist (in a spring-forward
    gap) is refused; one that happens twice means its first occurrence."""
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{text!r} is not a time like 2026-11-24T02:00[+01:00]") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone, fold=0)
        if moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != moment.replace(
            tzinfo=None
        ):
            raise ConfigError(f"{text} does not exist in {zone.key} (the clocks skip it)")
    if not 1970 <= moment.astimezone(UTC).year <= 9000:
        raise ConfigError(f"{text!r} is out of range")
    return ceil_second(moment.astimezone(UTC))


#: Where aligned ``--every`` windows are counted from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def aligned_start(every: int, now: datetime) -> datetime:
    """The first multiple of ``every`` seconds since :data:`EPOCH` strictly after ``now``:
    the first window of an ``--every`` schedule created at ``now`` without ``--start-at``."""
    elapsed = int((now - EPOCH).total_seconds() // 1)
    return EPOCH + timedelta(seconds=(elapsed // every + 1) * every)


def shares_windows(mine: Timing, theirs: Timing) -> bool:
    """True if every window of ``mine`` (an interval) is also one of ``theirs`` (an interval)
    where both run: the same grid, ``mine``'s interval a multiple of ``theirs``'. Two cron
    schedules, or a cron and an interval, are not judged here (True)."""
    if mine.every is None or theirs.every is None:
        return True
    offset = int((mine.start - theirs.start).total_seconds())
    return mine.every % theirs.every == 0 and offset % theirs.every == 0


def ceil_second(moment: datetime) -> datetime:
    """``moment`` rounded up to a whole second."""
    whole = moment.replace(microsecond=0)
    return whole if whole == moment else whole + ONE_SECOND


def format_time(moment: datetime) -> str:
    """A window or bound as schedules store it: ``2026-11-24T01:30:00Z`` (UTC, seconds)."""
    return second_text(moment)


@dataclass(frozen=True)
class Timing:
    """A schedule's windows: ``cron`` in ``zone``, or every ``every`` seconds from ``start``;
    at or after ``start``, strictly before ``end`` (None: no end). ``start`` and ``end`` are
    aware and whole seconds."""

    start: datetime
    cron: str | None = None
    every: int | None = None
    zone: tzinfo = UTC
    end: datetime | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ConfigError("a schedule has a cron expression or an interval, not both")
        if self.start.tzinfo is None or (self.end is not None and self.end.tzinfo is None):
            raise ConfigError("a schedule's bounds must be aware times")

    def after(self, moment: datetime | None) -> Iterator[datetime]:
        """The windows strictly after ``moment`` (every window if None), in order, in UTC."""
        lower = self.start - ONE_SECOND
        if moment is not None and moment > lower:
            lower = moment.astimezone(UTC).replace(microsecond=0)
        source = self._every(lower) if self.every is not None else self._cron(lower)
        previous = lower
        for window in source:
            if self.end is not None and window >= self.end:
                return
            if window > previous:  # strictly increasing, whatever the engine yields
                previous = window
                yield window

    def between(self, after: datetime | None, until: datetime, limit: int) -> list[datetime]:
        """At most ``limit`` windows ``w`` with ``after < w <= until``, oldest first."""
        found: list[datetime] = []
        if limit <= 0:
            return found
        for window in self.after(after):
            if window > until:
                break
            found.append(window)
            if len(found) >= limit:
                break
        return found

    def next_after(self, moment: datetime) -> datetime | None:
        """The first window strictly after ``moment``, None if there is none (the schedule
        ended, or its expression matches nothing in the next 50 years)."""
        return next(iter(self.after(moment)), None)

    def _every(self, lower: datetime) -> Iterator[datetime]:
        assert self.every is not None
        elapsed = int((lower - self.start).total_seconds())
        index = 0 if elapsed < 0 else elapsed // self.every + 1
        while True:
            yield self.start + timedelta(seconds=index * self.every)
            index += 1

    def _cron(self, lower: datetime) -> Iterator[datetime]:
        assert self.cron is not None
        if on_wall_clock(self.cron, self.zone):
            yield from self._wall_clock(self.cron, lower)
        else:
            yield from self._real_time(self.cron, lower)

    def _wall_clock(self, cron: str, lower: datetime) -> Iterator[datetime]:
        """Debian cron's rule (see the module), as cronsim applies it."""
        engine = CronSim(cron, lower.astimezone(self.zone))
        while True:
            try:
                window = next(engine)
            except StopIteration:  # nothing in the next 50 years
                return
            yield window.astimezone(UTC)

    def _real_time(self, cron: str, lower: datetime) -> Iterator[datetime]:
        """The instants whose wall-clock time, at the offset in force then, matches: cronsim
        run in UTC over the wall clock of one offset at a time, cut at the zone's offset
        changes (cronsim's own real-time stepping, an hour at a time, skips the windows next
        to a change of half an hour, as Lord Howe Island's)."""
        moment = lower  # windows lie strictly after it
        horizon = lower + _HORIZON
        while moment < horizon:
            offset = _offset(self.zone, moment + ONE_SECOND)
            change: datetime | None = None
            for wall in CronSim(cron, moment + offset):  # aware UTC: no daylight-saving rule
                window = wall - offset
                changes = transitions(self.zone, moment + ONE_SECOND, window)
                if changes:
                    change = changes[0]
                    break
                yield window
                moment = window
            if change is None:  # nothing in the next 50 years
                return
            moment = change - ONE_SECOND  # the next stretch: from the change, its offset


def on_wall_clock(cron: str, zone: tzinfo) -> bool:
    """True if ``cron`` in ``zone`` is read on the wall clock at daylight-saving changes
    (cronsim's Debian rule: five fields, minute and hour both fixed, a zone with changes);
    False: on real time."""
    fields = cron.split()
    return (
        len(fields) == 5
        and not fields[0].startswith("*")
        and not fields[1].startswith("*")
        and not isinstance(zone, timezone)
    )


def _offset(zone: tzinfo, moment: datetime) -> timedelta:
    found = moment.astimezone(zone).utcoffset()
    return found if found is not None else timedelta(0)


def _seconds(delta: timedelta) -> int:
    return delta.days * 86400 + delta.seconds


def transitions(zone: tzinfo, low: datetime, high: datetime) -> list[datetime]:
    """The instants ``t`` in ``(low, high]`` at which ``zone``'s offset changes (``t`` has the
    new offset, the second before it the old one), oldest first."""
    if isinstance(zone, timezone) or not isinstance(zone, ZoneInfo):
        return []
    found: list[datetime] = []
    for year in range(low.year, high.year + 1):
        found += [t for t in _year_transitions(zone, year) if low < t <= high]
    return found


@functools.lru_cache(maxsize=1024)
def _year_transitions(zone: ZoneInfo, year: int) -> tuple[datetime, ...]:
    """A zone's offset changes in one (UTC) year: sampled a week apart (none: none that
    year), then a day apart, then found to the second by bisection."""
    found: list[datetime] = []
    day = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    previous = _offset(zone, day - ONE_SECOND)
    weeks = [_offset(zone, day + timedelta(days=days)) for days in range(0, 7 * WEEKS, 7)]
    if all(offset == previous for offset in (*weeks, _offset(zone, end - ONE_SECOND))):
        return ()  # no change this year (UTC, or a zone without summer time then)
    while day < end:
        step = min(day + timedelta(days=1), end)
        current = _offset(zone, step - ONE_SECOND)
        if current != previous:
            low, high = day - ONE_SECOND, step - ONE_SECOND  # offset(low) old, offset(high) new
            while high - low > ONE_SECOND:
                middle = low + timedelta(seconds=_seconds(high - low) // 2)
                if _offset(zone, middle) == previous:
                    low = middle
                else:
                    high = middle
            found.append(high)
            previous = current
        day = step
    return tuple(found)
