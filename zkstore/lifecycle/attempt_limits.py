"""Is an attempt over its limits? ``--timeout``, ``--start-timeout`` and ``--progress-timeout``.

From what the leader sees of an attempt (:class:`AttemptTimes`: when it was placed, since when
its driver holds ``running``, its newest checkpoint, its newest heartbeat), :func:`judge` says
whether a limit is passed (:class:`Expired`, with the limit and a reason that names it) or when
the earliest one will be (:class:`Within`: the leader looks again then, without a watch on the
heartbeat, which would wake it at every beat).

- ``--timeout``: the longest an attempt may run, from its driver taking ``running``. Counts as a
  failure of the job (the state says TIMED_OUT).
- ``--start-timeout``: the longest an attempt may be placed and not running. Counts as a failure
  too (the user said how long a start may take). Without it the daemon's own launch deadline
  applies, which counts as lost (:mod:`recovery.decide`).
- ``--progress-timeout`` (off by default): the longest a running attempt may go without
  progress: a checkpoint, or a call of ``ctx.heartbeat()``. Counts as lost (STUCK): the job is
  restarted from its checkpoint, as for a lost host.

Heartbeats cost ZooKeeper writes, so a driver writes one at most every
:func:`heartbeat_interval` (a quarter of the progress timeout, at least
:data:`MIN_HEARTBEAT_INTERVAL`, at most :data:`MAX_HEARTBEAT_INTERVAL`), only when the job called
``ctx.heartbeat()`` since the last write, only when no checkpoint was written meanwhile (a
checkpoint is progress already), and only for jobs that have a progress timeout at all. A job
that calls ``ctx.heartbeat()`` a million times a second costs one write per interval.

Times come from several clocks: placement from the leader's, ``running`` and checkpoints from
the driver's host. A time in the future (a clock ahead) counts as now; the limits are minutes
and hours, far above the skew NTP leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from zkstore.config import LoweredMinimums
from zkstore.errors import ConfigError
from zkstore.lifecycle.lifecycle_states import COUNTED_AS, STUCK, TIMED_OUT

__all__ = [
    "MAX_HEARTBEAT_INTERVAL",
    "MAX_LIMIT",
    "MIN_HEARTBEAT_INTERVAL",
    "MIN_PROGRESS_TIMEOUT",
    "PROGRESS_TIMEOUT",
    "START_TIMEOUT",
    "TIMEOUT",
    "AttemptTimes",
    "Expired",
    "Limits",
    "Within",
    "heartbeat_interval",
    "judge",
    "least_heartbeat_interval",
    "least_limits",
]

#: A progress timeout shorter than this is refused: a heartbeat every few seconds per job is
#: the most ZooKeeper should carry, and the leader's look again must fit well inside it.
MIN_PROGRESS_TIMEOUT = 30.0
MIN_HEARTBEAT_INTERVAL = 5.0
MAX_HEARTBEAT_INTERVAL = 60.0
#: The longest limit accepted: a year.
MAX_LIMIT = 366 * 86400.0

TIMEOUT = "timeout"
START_TIMEOUT = "start-timeout"
PROGRESS_TIMEOUT = "progress-timeout"


def heartbeat_interval(progress_timeout: float, least: float = MIN_HEARTBEAT_INTERVAL) -> float:
    """How often, at most, a driver writes a heartbeat for this progress timeout: a quarter of
    it (so that the leader sees at least three beats per timeout), within 5 s (``least``) to
    60 s."""
    return min(MAX_HEARTBEAT_INTERVAL, max(least, progress_timeout / 4))


def least_heartbeat_interval(lowered: LoweredMinimums | None) -> float:
    """:data:`MIN_HEARTBEAT_INTERVAL`, or less where the tests lowered it."""
    value = lowered.heartbeat_interval if lowered is not None else None
    return MIN_HEARTBEAT_INTERVAL if value is None else min(MIN_HEARTBEAT_INTERVAL, value)


def least_limits(lowered: LoweredMinimums | None) -> Limits:
    """No limits, accepting a progress timeout down to :data:`MIN_PROGRESS_TIMEOUT`, or less
    where the tests lowered it (what :meth:`zkstore.lifecycle.options.Lifecycle.with_options`
    then checks against)."""
    value = lowered.progress_timeout if lowered is not None else None
    if value is None:
        return Limits()
    return Limits(least_progress_timeout=min(MIN_PROGRESS_TIMEOUT, value))


@dataclass(frozen=True)
class Limits:
    """A job's limits in seconds; None: no limit."""

    timeout: float | None = None
    start_timeout: float | None = None
    progress_timeout: float | None = None
    #: the least progress timeout accepted (not part of the limits' value): the product's,
    #: lower only where the tests lowered it (:func:`least_limits`)
    least_progress_timeout: float = field(default=MIN_PROGRESS_TIMEOUT, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("timeout", "start_timeout", "progress_timeout"):
            value = getattr(self, name)
            if value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 < value <= MAX_LIMIT
            ):
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive duration")
        least = self.least_progress_timeout
        if self.progress_timeout is not None and self.progress_timeout < least:
            raise ConfigError(
                f"--progress-timeout must be at least {least:g} s "
                "(heartbeats are written at most every few seconds)"
            )


@dataclass(frozen=True)
class AttemptTimes:
    """What the leader sees of one attempt: when it was placed (the status that made it
    STARTING), since when its driver holds ``running`` (None: not running yet), and the times of
    its newest checkpoint and heartbeat (None: none from this attempt)."""

    attempt: int
    placed: datetime
    running_since: datetime | None = None
    checkpoint: datetime | None = None
    heartbeat: datetime | None = None


@dataclass(frozen=True)
class Expired:
    """A limit passed: the attempt must be ended (``outcome`` TIMED_OUT or STUCK), and counted
    as ``counts_as``. ``reason`` names the limit and its value, for the status and people."""

    limit: str
    seconds: float
    outcome: str
    reason: str

    @property
    def counts_as(self) -> str:
        return COUNTED_AS[self.outcome]


@dataclass(frozen=True)
class Within:
    """No limit passed; look again at ``next_check`` (None: no limit applies)."""

    next_check: datetime | None = None


def judge(times: AttemptTimes, limits: Limits, now: datetime) -> Expired | Within:
    """Whether the attempt is over one of its limits, or when to look again. Pure; never
    raises for any times (times in the future count as now)."""
    deadlines: list[tuple[datetime, str, float]] = []
    if times.running_since is None:
        if limits.start_timeout is not None:
            placed = min(times.placed, now)
            deadlines.append((placed + timedelta(seconds=limits.start_timeout), START_TIMEOUT, 0.0))
    else:
        started = min(times.running_since, now)
        if limits.timeout is not None:
            deadlines.append((started + timedelta(seconds=limits.timeout), TIMEOUT, 0.0))
        if limits.progress_timeout is not None:
            last = max(t for t in (started, times.checkpoint, times.heartbeat) if t is not None)
            last = min(last, now)
            idle = (now - last).total_seconds()
            deadlines.append(
                (last + timedelta(seconds=limits.progress_timeout), PROGRESS_TIMEOUT, idle)
            )
    if not deadlines:
        return Within()
    deadline, limit, idle = min(deadlines, key=lambda d: d[0])
    if now < deadline:
        return Within(next_check=deadline)
    return _expired(times, limits, limit, now, idle)


def _expired(
    times: AttemptTimes, limits: Limits, limit: str, now: datetime, idle: float
) -> Expired:
    n = times.attempt
    if limit == START_TIMEOUT:
        assert limits.start_timeout is not None
        seconds = limits.start_timeout
        waited = (now - min(times.placed, now)).total_seconds()
        reason = (
            f"attempt {n} was placed {_human(waited)} ago and is not running: "
            f"over its --start-timeout of {_human(seconds)}"
        )
        return Expired(limit, seconds, TIMED_OUT, reason)
    if limit == TIMEOUT:
        assert limits.timeout is not None and times.running_since is not None
        seconds = limits.timeout
        ran = (now - min(times.running_since, now)).total_seconds()
        reason = f"attempt {n} ran {_human(ran)}: over its --timeout of {_human(seconds)}"
        return Expired(limit, seconds, TIMED_OUT, reason)
    assert limits.progress_timeout is not None
    seconds = limits.progress_timeout
    reason = (
        f"attempt {n} made no progress (no checkpoint, no ctx.heartbeat()) for {_human(idle)}: "
        f"over its --progress-timeout of {_human(seconds)}"
    )
    return Expired(limit, seconds, STUCK, reason)


def _human(seconds: float) -> str:
    """A limit as it would be typed (``1h``, ``10m``, ``90s``), or an elapsed time as a clock
    reads (``1h00m05s``, ``10m50s``, ``59s``)."""
    whole = max(0, round(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{unit}"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
