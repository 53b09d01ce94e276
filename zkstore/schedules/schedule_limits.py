"""The bounds a cluster sets on schedules (invariant 15), checked where a schedule is made.

- **A minimum interval** between two windows (``--schedule-min-interval`` of the daemons,
  ``ZKSTORE_SCHEDULE_MIN_INTERVAL`` here; 10 s by default): ``schedules create`` refuses an
  ``--every`` or a cron whose windows are closer (a cron's as its expression reads:
  :func:`~zkstore.schedules.counting.shortest_gap`), and the leader fires none of such a
  schedule's windows (one made before the bound was raised, or written by hand).
- **A catch-up bounded in windows**: ``--catchup all`` fires the newest ``--catchup-max`` late
  windows at most (1000 by default, 10,000 at most); ``schedules create`` refuses a
  ``--start-at`` further back than that many windows, naming the numbers, rather than make a
  schedule whose first fire misses most of its past.

Pure: the clock and the environment are arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime

from zkstore.errors import ConfigError, OutOfBounds
from zkstore.schedules.counting import count, shortest_gap, split
from zkstore.schedules.schedule_records import ALL, MAX_CATCHUP_MAX, ScheduleSpec
from zkstore.schedules.timing import ONE_SECOND, format_time, parse_every

__all__ = [
    "DEFAULT_MIN_INTERVAL",
    "MIN_INTERVAL_ENV",
    "check_bounds",
    "interval_refusal",
    "min_interval_from_env",
]

MIN_INTERVAL_ENV = "ZKSTORE_SCHEDULE_MIN_INTERVAL"
#: the default minimum between two windows: a schedule's every run is a driver process
DEFAULT_MIN_INTERVAL = 10


def min_interval_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The minimum interval ``ZKSTORE_SCHEDULE_MIN_INTERVAL`` says (``10s``, ``1m``), else the
    default; :class:`ConfigError` naming the variable for a value that is not a duration."""
    value = (os.environ if environ is None else environ).get(MIN_INTERVAL_ENV)
    if not value:
        return DEFAULT_MIN_INTERVAL
    try:
        return parse_every(value)
    except ConfigError as exc:
        raise ConfigError(f"{MIN_INTERVAL_ENV}: {exc}") from None


def interval_refusal(gap: int, min_interval: int) -> str:
    """The leader's words for a schedule whose windows are ``gap`` seconds apart, under the
    cluster's ``min_interval``: what it logs, what its condition says, what a client refuses."""
    return f"its windows are {gap} s apart, under the cluster's minimum of {min_interval} s"


def check_bounds(
    spec: ScheduleSpec,
    now: datetime,
    min_interval: int,
    *,
    source: str = f"{MIN_INTERVAL_ENV}, the daemons' --schedule-min-interval",
) -> None:
    """Refuse (:class:`OutOfBounds`, one line naming the numbers) a schedule whose windows are
    closer than ``min_interval`` seconds, or whose ``--catchup all`` would have more late
    windows at ``now`` than its ``--catchup-max``. ``source`` says where the minimum comes
    from, and so how to change it."""
    timing = spec.timing()
    gap = shortest_gap(timing)
    if gap < min_interval:
        flag = "--every" if spec.every is not None else "--cron"
        raise OutOfBounds(
            f"{flag}: {interval_refusal(gap, min_interval)}: the leader would fire none of "
            f"its windows ({source})"
        )
    if spec.catchup != ALL or spec.start_at is None:
        return
    late = count(timing, None, now)
    if late > spec.catchup_limit:
        edge = split(timing, timing.start - ONE_SECOND, now, spec.catchup_limit)
        first = next(iter(timing.after(edge)), now)  # the oldest of the newest N windows
        raise OutOfBounds(
            f"--start-at {format_time(timing.start)} lies {late:,} windows back, over "
            f"--catchup-max {spec.catchup_limit:,} of --catchup all: start at "
            f"{format_time(first)} or later, raise --catchup-max (at most {MAX_CATCHUP_MAX:,}), "
            "or use --catchup latest, none or a number"
        )
