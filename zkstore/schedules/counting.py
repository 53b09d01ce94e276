"""Counting a schedule's windows between two instants without stepping through them.

A leader that finds a schedule years behind (``--start-at 1970-01-01`` with a per-second cron,
or an outage) must decide every window since, once: it records the ones it does not fire as a
row (first window, last window, how many) and fires the newest. So it needs three things, each
at a cost that does not grow with the number of windows (a per-second cron over 50 years costs
about what it costs over a minute):

- :func:`count`: how many windows lie in ``(after, until]``;
- :func:`newest_until`: the newest window at or before an instant (one step of cronsim,
  backwards, checked by a step forwards);
- :func:`split`: the instant after which exactly the newest ``n`` windows of a range lie (a
  binary search over :func:`count`).

**Intervals** (``every``) are arithmetic: windows are ``start + k * every``.

**Cron expressions** are counted on the wall clock. A window's fields (second, minute, hour;
day of month, month, day of week, with ``L``, ``W`` and ``#``) are matched by the same rules as
cronsim's (its own matcher is used for the days), so within one day every matching day has the
same windows, |seconds| x |minutes| x |hours| of them; the matching days of a month depend only
on its length and the weekday it starts on (28 patterns, each computed once), and a year's are
kept once counted. A range is then its first and last partial days, the whole months and the
whole years between: a few hundred operations for 50 years.

**Time zones.** An instant is shown on the wall clock with the offset in force then; the range
is cut at the zone's offset changes (found once per zone and year, cached), and each piece,
where the offset is constant, is counted on the wall clock. For expressions that cronsim reads
on real time (see :mod:`zkstore.schedules.timing`) that is exact: an hour that does not exist
has no window, one that happens twice has its windows twice. For the ones it reads on the
wall clock (a 5-field expression with both minute and hour fixed), a wall-clock time counts
once (its first occurrence), and the times of a spring-forward gap all fire at the gap's end,
as one window. Counted that way too, and the iteration that fires
(:meth:`~zkstore.schedules.timing.Timing.after`) agrees, also where a zone's offset changes
by a fraction of an hour or at a time that is not a whole hour (Lord Howe Island, Chatham).
"""

from __future__ import annotations

import bisect
import calendar
import functools
import itertools
from datetime import UTC, date, datetime, timedelta, tzinfo

from cronsim import CronSim, CronSimError

from zkstore.schedules.timing import ONE_SECOND, WEEKS, Timing, on_wall_clock, transitions

__all__ = ["WEEKS", "count", "newest_until", "shortest_gap", "split", "transitions"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def count(timing: Timing, after: datetime | None, until: datetime) -> int:
    """How many windows ``w`` of ``timing`` lie in ``after < w <= until`` (every window from
    the start if ``after`` is None)."""
    low, high = _clamp(timing, after, until)
    if high <= low:
        return 0
    if timing.every is not None:
        return _count_every(timing, low, high)
    assert timing.cron is not None
    return _counter(timing.cron, timing.zone).count(low, high)


def newest_until(
    timing: Timing, moment: datetime, after: datetime | None = None
) -> datetime | None:
    """The newest window at or before ``moment`` and after ``after`` (None if there is none)."""
    low, high = _clamp(timing, after, moment)
    if high <= low:
        return None
    if timing.every is not None:
        assert timing.every is not None
        index = _seconds(high - timing.start) // timing.every
        window = timing.start + timedelta(seconds=index * timing.every)
        return window if window > low else None
    if count(timing, low, high) == 0:
        return None
    # cronsim's reverse iteration can loop for ever at some daylight-saving changes: jump to
    # just before the newest window instead, and take it from the forward iteration (the
    # truth: it is what fires).
    found: datetime | None = None
    for window in timing.after(split(timing, low, high, 1)):
        if window > high:
            break
        found = window
    return found


def split(
    timing: Timing, after: datetime, until: datetime, newest: int, skip: _Skip = None
) -> datetime:
    """The instant ``t`` in ``[after, until]`` such that exactly the newest ``newest`` windows
    of ``(after, until]`` lie after it (``after`` if there are no more than that); ``skip``
    leaves a span out of the count (a pause). A binary search over whole seconds: about 31
    counts for 50 years."""

    def due(low: datetime) -> int:
        found = count(timing, low, until)
        if skip is not None:
            found -= count(timing, max(low, skip[0]), min(until, skip[1]))
        return found

    if newest <= 0:
        return until
    if due(after) <= newest:
        return after
    low, high = after, until  # due(low) > newest >= due(high)
    while high - low > ONE_SECOND:
        middle = low + timedelta(seconds=_seconds(high - low) // 2)
        if due(middle) > newest:
            low = middle
        else:
            high = middle
    return high


#: a span of instants ``(first, last]`` left out of a count
_Skip = tuple[datetime, datetime] | None


def _clamp(timing: Timing, after: datetime | None, until: datetime) -> tuple[datetime, datetime]:
    """The range ``(low, high]`` of whole seconds that windows may lie in."""
    low = timing.start - ONE_SECOND
    if after is not None and after > low:
        low = _floor(after)
    high = _floor(until)
    if timing.end is not None and high >= timing.end:
        high = timing.end - ONE_SECOND
    return low, high


def _floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(microsecond=0)


def _seconds(delta: timedelta) -> int:
    return delta.days * 86400 + delta.seconds


def _count_every(timing: Timing, low: datetime, high: datetime) -> int:
    assert timing.every is not None
    first = 0 if low < timing.start else _seconds(low - timing.start) // timing.every + 1
    last = _seconds(high - timing.start) // timing.every
    return max(0, last - first + 1)


@functools.lru_cache(maxsize=256)
def _counter(expression: str, zone: tzinfo) -> _CronCounter:
    return _CronCounter(expression, zone)


class _CronCounter:
    """The windows of one cron expression in one time zone, counted (see the module)."""

    def __init__(self, expression: str, zone: tzinfo) -> None:
        try:
            self._engine = CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:  # a parsed spec's expression always parses
            raise ValueError(str(exc)) from None
        self.seconds = sorted(self._engine.seconds)
        self.minutes = sorted(self._engine.minutes)
        self.hours = sorted(self._engine.hours)
        self.months = frozenset(self._engine.months)
        self.per_day = len(self.seconds) * len(self.minutes) * len(self.hours)
        self.zone = zone
        #: read on the wall clock at daylight-saving changes (cronsim's Debian rule)
        self.wall = on_wall_clock(expression, zone)
        self._patterns: dict[tuple[int, int], list[int]] = {}
        self._years: dict[int, int] = {}

    # -- on the wall clock (naive datetimes) -------------------------------------------------------

    def wall_count(self, low: datetime, high: datetime) -> int:
        """Matching wall-clock times ``w`` with ``low < w <= high`` (naive, whole seconds)."""
        if high <= low:
            return 0
        first, last = low.date(), high.date()
        if first == last:
            return self._day(first) * (self._upto(high) - self._upto(low))
        total = self._day(first) * (self.per_day - self._upto(low))
        total += self._days(first + timedelta(days=1), last - timedelta(days=1)) * self.per_day
        return total + self._day(last) * self._upto(high)

    def _upto(self, moment: datetime) -> int:
        """Matches of a matching day at or before ``moment``'s time of day."""
        per_hour = len(self.minutes) * len(self.seconds)
        found = bisect.bisect_left(self.hours, moment.hour) * per_hour
        if moment.hour in self._engine.hours:
            found += bisect.bisect_left(self.minutes, moment.minute) * len(self.seconds)
            if moment.minute in self._engine.minutes:
                found += bisect.bisect_right(self.seconds, moment.second)
        return found

    def _day(self, day: date) -> int:
        return int(day.month in self.months and self._engine.match_day(day))

    def _days(self, first: date, last: date) -> int:
        """Matching days from ``first`` to ``last``, both included."""
        if last < first:
            return 0
        if first.year == last.year:
            return self._months(first.year, first, last)
        total = self._months(first.year, first, date(first.year, 12, 31))
        total += sum(self._year(year) for year in range(first.year + 1, last.year))
        return total + self._months(last.year, date(last.year, 1, 1), last)

    def _year(self, year: int) -> int:
        found = self._years.get(year)
        if found is None:
            found = self._years[year] = self._months(year, date(year, 1, 1), date(year, 12, 31))
        return found

    def _months(self, year: int, first: date, last: date) -> int:
        total = 0
        for month in range(first.month, last.month + 1):
            if month not in self.months:
                continue
            days = self._pattern(year, month)
            low = first.day if month == first.month else 1
            high = last.day if month == last.month else 31
            total += bisect.bisect_right(days, high) - bisect.bisect_left(days, low)
        return total

    def _pattern(self, year: int, month: int) -> list[int]:
        """The matching days of a month: they depend on its length and first weekday only."""
        weekday, length = calendar.monthrange(year, month)
        key = (weekday, length)
        found = self._patterns.get(key)
        if found is None:
            # a month of that shape (any year has one in some month: 2000-2027 has them all)
            sample = _sample_month(weekday, length)
            days = [sample.replace(day=d) for d in range(1, length + 1)]
            found = [day.day for day in days if self._engine.match_day(day)]
            self._patterns[key] = found
        return found

    # -- on real time ------------------------------------------------------------------------------

    def count(self, low: datetime, high: datetime) -> int:
        """Windows in ``(low, high]`` (aware UTC, whole seconds, ``low < high``)."""
        changes = transitions(self.zone, low, high)
        if self.wall:
            return self._count_wall_clock(low, high, changes)
        if not changes:
            offset = _offset(self.zone, high)
            return self.wall_count(_wall(low, offset), _wall(high, offset))
        total, start = 0, low
        for change in (*changes, None):
            end = high if change is None else change - ONE_SECOND
            offset = _offset(self.zone, end)
            total += self.wall_count(_wall(start, offset), _wall(end, offset))
            start = end
        return total

    def _count_wall_clock(self, low: datetime, high: datetime, changes: list[datetime]) -> int:
        """Cronsim's Debian rule: each wall-clock time once, a spring gap's times as one."""
        total = self.wall_count(self._wall_at_most(low), self._wall_at_most(high))
        for change in changes:
            before, after = _offset(self.zone, change - ONE_SECOND), _offset(self.zone, change)
            if after <= before:
                continue  # clocks went back: each wall-clock time fires once, already so counted
            gap = self.wall_count(_wall(change, before) - ONE_SECOND, _wall(change, after))
            total -= max(0, gap - 1)
        return total

    def _wall_at_most(self, moment: datetime) -> datetime:
        """The newest wall-clock time whose window (its first occurrence) is at or before
        ``moment``."""
        local = moment.astimezone(self.zone)
        if not local.fold:
            return local.replace(tzinfo=None)
        # In the hour that happens twice, second time: every wall-clock time of that hour
        # fired the first time, so all of them are at or before ``moment``.
        change = max(t for t in transitions(self.zone, _EPOCH, moment) if t <= moment)
        return _wall(change, _offset(self.zone, change - ONE_SECOND)) - ONE_SECOND


def _sample_month(weekday: int, length: int) -> date:
    for year in range(2000, 2028):
        for month in range(1, 13):
            if calendar.monthrange(year, month) == (weekday, length):
                return date(year, month, 1)
    raise AssertionError(f"no month starts on weekday {weekday} with {length} days")


def _wall(moment: datetime, offset: timedelta) -> datetime:
    return (moment + offset).replace(tzinfo=None)


def _offset(zone: tzinfo, moment: datetime) -> timedelta:
    found = moment.astimezone(zone).utcoffset()
    return found if found is not None else timedelta(0)


def shortest_gap(timing: Timing) -> int:
    """The fewest seconds between two windows of ``timing``, as its expression reads (a lower
    bound for a cron: the finest field with more than one value, its closest two values, the
    wrap to the next minute, hour or day included; a daylight-saving change can bring two
    wall-clock windows closer once a year, which is not counted)."""
    if timing.every is not None:
        return timing.every
    assert timing.cron is not None
    engine = _counter(timing.cron, UTC)
    for values, period, unit in (
        (engine.seconds, 60, 1),
        (engine.minutes, 60, 60),
        (engine.hours, 24, 3600),
    ):
        if len(values) > 1:
            steps = [b - a for a, b in itertools.pairwise(values)]
            return unit * min(*steps, period - values[-1] + values[0])
    return 86400
