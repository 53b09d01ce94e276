"""When a job's next attempt is due: exponential backoff with jitter, reset by a stable run.

A job's own failures (its code raised, its script exited non-zero, it ran past ``--timeout``)
and its lost attempts (the driver vanished: a host lost, a session expired, a driver killed or
stuck) are paced apart, each by its own :class:`Backoff` and its own *streak*: the number of
consecutive ends of that kind since the job last ran stably. The ``n``-th failure in a streak
waits ``delay * multiplier**(n-1)``, capped at ``max_delay``, less a jitter of up to
``jitter * 100`` percent. A lost attempt that is the first of its streak is placed again at once
(``first_at_once``): one lost host is the common case and says nothing about the job.

An attempt that ran for ``reset_after`` or longer before it ended resets both streaks: a job
that ran stably for an hour and then failed is retried after the first delay, not after the
fifth. (The limits ``--max-attempts`` and ``--max-lost-attempts`` count every end, as before;
the reset paces retries, it does not grant new ones.)

Why these defaults (``--retry-delay 5s --retry-max-delay 5m --retry-jitter 0.2
--retry-reset-after 10m``; lost: at once, then ``2s`` up to ``1m``):

- Kubernetes' CrashLoopBackOff, which every Spark-on-Kubernetes user knows: 10 s doubling to a
  cap of 5 minutes, reset after 10 minutes of running. We start lower (5 s: a driver is a
  process on a host we already hold, not a pod to schedule) and keep the cap and the reset.
- The Kubernetes Spark operator waits ``onFailureRetryInterval`` (5 s by default) times the
  number of attempts: linear, unbounded, with no reset, so restarts of a long-lived job crept to
  five minutes apart (kubeflow/spark-operator #1051) and a static interval was added (PR #2851).
  Exponential with a cap bounds the wait; the reset keeps a stable job's retries fast.
- apache/spark-kubernetes-operator: a fixed ``restartBackoffMillis`` of 30 s, and
  ``restartCounterResetMillis`` off by default. A fixed 30 s is slow for a one-off failure and
  fast for a crash loop; we reset the pacing by default (never the limits).
- Dagster's ``RetryPolicy``: no delay by default, ``Backoff.EXPONENTIAL`` (``(2**n - 1) *
  delay``), ``Jitter.FULL`` or ``PLUS_MINUS``. Jitter here only shortens a delay (by up to 20 %),
  so ``--retry-max-delay`` is a true maximum and ``--retry-delay`` the longest first wait; 20 %
  spreads jobs that failed together (a lost storage endpoint) without making a delay
  unpredictable.
- Lost attempts: the first at once (as zkstore always did); a host or driver that keeps being
  lost backs off from 2 s to a minute, not five: the job's code is not at fault, and a healthy
  member may take it any moment.

The jitter of an attempt is derived from the job id and the attempt number (a hash), not drawn
at random: every leader computes the same due time for the same end, a test can predict it, and
jobs that failed at the same moment still spread apart. Everything here is pure.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from zkstore.errors import ConfigError
from zkstore.lifecycle.lifecycle_states import FAILURE, LOST

__all__ = [
    "DEFAULT_FAILURE_BACKOFF",
    "DEFAULT_LOST_BACKOFF",
    "DEFAULT_RESET_AFTER",
    "MAX_DELAY_LIMIT",
    "AttemptEnd",
    "Backoff",
    "Due",
    "RetryPolicy",
    "Streak",
    "after_end",
    "jitter_fraction",
    "next_attempt_due",
]

#: The longest any delay may be: a day (a longer pause is a stop, not a retry).
MAX_DELAY_LIMIT = 86400.0


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``delay * multiplier**(n-1)`` for the ``n``-th end of a streak,
    capped at ``max_delay``, shortened by up to ``jitter`` (a fraction in [0, 1)); with
    ``first_at_once``, the first end of a streak waits nothing."""

    delay: float
    max_delay: float
    jitter: float = 0.2
    multiplier: float = 2.0
    first_at_once: bool = False

    def __post_init__(self) -> None:
        for name in ("delay", "max_delay", "jitter", "multiplier"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"retry {name} must be a number")
            if not math.isfinite(value):
                raise ConfigError(f"retry {name} must be finite")
        if not 0 <= self.delay <= self.max_delay <= MAX_DELAY_LIMIT:
            raise ConfigError(
                f"retry delays must satisfy 0 <= delay ({self.delay:g} s) <= max delay "
                f"({self.max_delay:g} s) <= {MAX_DELAY_LIMIT:g} s"
            )
        if not 0 <= self.jitter < 1:
            raise ConfigError(f"retry jitter must be in [0, 1), not {self.jitter:g}")
        if not 1 <= self.multiplier <= 10:
            raise ConfigError(f"retry multiplier must be in [1, 10], not {self.multiplier:g}")

    def base(self, streak: int) -> float:
        """The un-jittered delay before the next attempt after the ``streak``-th end in a row
        (``streak`` >= 1; 0 means nothing ended: no delay)."""
        if streak <= 0 or (self.first_at_once and streak == 1):
            return 0.0
        steps = streak - (2 if self.first_at_once else 1)
        # min() before the power: a streak of thousands must not overflow the float
        grown = self.delay * self.multiplier ** min(steps, 64)
        return float(min(self.max_delay, grown))

    def delay_for(self, streak: int, fraction: float) -> float:
        """The delay after the ``streak``-th end in a row, jittered by ``fraction`` in [0, 1)
        (0: the full delay; the delay shrinks by ``jitter * fraction`` of itself)."""
        if not 0 <= fraction < 1:
            raise ValueError(f"jitter fraction {fraction} is not in [0, 1)")
        return self.base(streak) * (1.0 - self.jitter * fraction)


DEFAULT_FAILURE_BACKOFF = Backoff(delay=5.0, max_delay=300.0, jitter=0.2)
DEFAULT_LOST_BACKOFF = Backoff(delay=2.0, max_delay=60.0, jitter=0.2, first_at_once=True)
DEFAULT_RESET_AFTER = 600.0


@dataclass(frozen=True)
class RetryPolicy:
    """How a job's next attempt is paced after a failed one and after a lost one;
    ``reset_after`` (seconds, None: never) of running resets both streaks."""

    failures: Backoff = DEFAULT_FAILURE_BACKOFF
    lost: Backoff = DEFAULT_LOST_BACKOFF
    reset_after: float | None = DEFAULT_RESET_AFTER

    def __post_init__(self) -> None:
        if self.reset_after is not None and not (
            isinstance(self.reset_after, int | float)
            and not isinstance(self.reset_after, bool)
            and 0 < self.reset_after <= 366 * 86400
        ):
            raise ConfigError("retry reset-after must be a positive duration (or never)")

    def backoff(self, kind: str) -> Backoff:
        if kind == FAILURE:
            return self.failures
        if kind == LOST:
            return self.lost
        raise ValueError(f"no backoff for attempts ended as {kind!r}")


@dataclass(frozen=True)
class AttemptEnd:
    """One ended attempt, as the pacing needs it: which, how it is counted (``failure`` or
    ``lost``), when it ended, and since when it ran (None: it never ran, no ``running`` node)."""

    attempt: int
    kind: str
    ended: datetime
    started: datetime | None = None

    @property
    def ran(self) -> float:
        """Seconds the attempt ran (0 if it never did, or the clocks disagree)."""
        if self.started is None:
            return 0.0
        return max(0.0, (self.ended - self.started).total_seconds())


@dataclass(frozen=True)
class Streak:
    """Consecutive failed and lost ends since the job last ran stably: what the status must
    carry (two small integers) for a leader to pace the next attempt without the history."""

    failures: int = 0
    lost: int = 0

    def after(self, end: AttemptEnd, policy: RetryPolicy) -> Streak:
        """The streak once ``end`` is counted (after a reset, if it ran long enough)."""
        base = self
        if policy.reset_after is not None and end.ran >= policy.reset_after:
            base = Streak()
        if end.kind == FAILURE:
            return Streak(base.failures + 1, base.lost)
        if end.kind == LOST:
            return Streak(base.failures, base.lost + 1)
        return base  # an end that is not counted (a stop) leaves the streak as it was

    def of(self, kind: str) -> int:
        return self.failures if kind == FAILURE else self.lost if kind == LOST else 0


def jitter_fraction(job_id: str, attempt: int) -> float:
    """A fraction in [0, 1) fixed by the job id and the attempt: the same on every leader."""
    digest = hashlib.sha256(f"{job_id}\x00{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True)
class Due:
    """When the next attempt may start (``at``), the delay that makes it, and the streak after
    the last end (to be recorded with it)."""

    at: datetime
    delay: float
    streak: Streak


def after_end(
    end: AttemptEnd,
    streak: Streak,
    policy: RetryPolicy,
    job_id: str,
    *,
    rng: random.Random | None = None,
) -> Due:
    """The next attempt's due time after ``end``, given the ``streak`` before it. The jitter
    is :func:`jitter_fraction` of the ended attempt, or drawn from ``rng`` if one is given."""
    after = streak.after(end, policy)
    fraction = rng.random() if rng is not None else jitter_fraction(job_id, end.attempt)
    if end.kind not in (FAILURE, LOST):
        return Due(end.ended, 0.0, after)
    delay = policy.backoff(end.kind).delay_for(after.of(end.kind), fraction)
    return Due(end.ended + timedelta(seconds=delay), delay, after)


def next_attempt_due(history: Sequence[AttemptEnd], policy: RetryPolicy, job_id: str) -> Due | None:
    """When the next attempt is due, given every ended attempt in order (oldest first); None
    if nothing ended yet (the first attempt starts at once)."""
    if not history:
        return None
    streak = Streak()
    due: Due | None = None
    for end in history:
        due = after_end(end, streak, policy, job_id)
        streak = due.streak
    return due
