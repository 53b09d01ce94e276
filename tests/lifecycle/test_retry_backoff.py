"""Retry pacing (zkstore.lifecycle.retry_backoff): exponential backoff with jitter, failed and lost
attempts paced apart, a stable run resetting the pace; when the next attempt is due."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkstore.errors import ConfigError
from zkstore.lifecycle.lifecycle_states import FAILURE, LOST
from zkstore.lifecycle.retry_backoff import (
    DEFAULT_FAILURE_BACKOFF,
    DEFAULT_LOST_BACKOFF,
    AttemptEnd,
    Backoff,
    RetryPolicy,
    Streak,
    after_end,
    jitter_fraction,
    next_attempt_due,
)

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
EXACT = RetryPolicy(
    failures=Backoff(delay=5, max_delay=300, jitter=0),
    lost=Backoff(delay=2, max_delay=60, jitter=0, first_at_once=True),
    reset_after=600,
)


def ends(*kinds: str, ran: float = 10.0, gap: float = 100.0) -> list[AttemptEnd]:
    """Attempts 1..n ending ``gap`` seconds apart, each having run ``ran`` seconds."""
    found = []
    for n, kind in enumerate(kinds, start=1):
        ended = T0 + timedelta(seconds=gap * n)
        found.append(AttemptEnd(n, kind, ended, ended - timedelta(seconds=ran)))
    return found


def delays(history: list[AttemptEnd], policy: RetryPolicy = EXACT) -> list[float]:
    out, streak = [], Streak()
    for end in history:
        due = after_end(end, streak, policy, "job")
        out.append(due.delay)
        streak = due.streak
    return out


def test_failures_double_from_the_delay_up_to_the_max() -> None:
    assert delays(ends(*[FAILURE] * 9)) == [5, 10, 20, 40, 80, 160, 300, 300, 300]


def test_the_first_lost_attempt_is_placed_at_once_then_lost_ones_back_off() -> None:
    assert delays(ends(*[LOST] * 8)) == [0, 2, 4, 8, 16, 32, 60, 60]


def test_failed_and_lost_attempts_keep_their_own_streaks() -> None:
    # A lost host in the middle of a crash loop neither resets nor steps the failures' pace.
    assert delays(ends(FAILURE, FAILURE, LOST, FAILURE, LOST, LOST)) == [5, 10, 0, 20, 2, 4]


def test_a_stable_run_resets_both_streaks() -> None:
    history = ends(FAILURE, FAILURE, LOST, FAILURE)
    stable = T0 + timedelta(hours=3)
    history.append(AttemptEnd(5, FAILURE, stable, stable - timedelta(seconds=600)))
    history.append(AttemptEnd(6, FAILURE, stable + timedelta(seconds=60), stable))
    history.append(AttemptEnd(7, LOST, stable + timedelta(seconds=90), stable))
    # 600 s of running is "at least reset_after": attempt 5 starts a new streak of one
    assert delays(history) == [5, 10, 0, 20, 5, 10, 0]


def test_a_run_just_short_of_the_reset_does_not_reset() -> None:
    history = ends(FAILURE, FAILURE, ran=599.9)
    assert delays(history) == [5, 10]


def test_no_reset_when_the_policy_says_never() -> None:
    never = RetryPolicy(failures=EXACT.failures, lost=EXACT.lost, reset_after=None)
    assert delays(ends(FAILURE, FAILURE, FAILURE, ran=10**6), never) == [5, 10, 20]


def test_an_attempt_that_never_ran_does_not_reset() -> None:
    ended = T0 + timedelta(hours=5)
    history = [*ends(FAILURE, FAILURE), AttemptEnd(3, FAILURE, ended, None)]
    assert delays(history) == [5, 10, 20]


def test_the_due_time_is_the_end_plus_the_delay() -> None:
    history = ends(FAILURE, FAILURE, FAILURE)
    due = next_attempt_due(history, EXACT, "job")
    assert due is not None
    assert due.at == history[-1].ended + timedelta(seconds=20)
    assert due.streak == Streak(failures=3, lost=0)
    assert next_attempt_due([], EXACT, "job") is None


def test_jitter_only_shortens_and_by_at_most_its_fraction() -> None:
    rng = random.Random(26)
    policy = RetryPolicy(failures=Backoff(5, 300, jitter=0.2), lost=EXACT.lost)
    for streak in range(1, 12):
        base = policy.failures.base(streak)
        for _ in range(200):
            end = AttemptEnd(streak, FAILURE, T0)
            got = after_end(end, Streak(failures=streak - 1), policy, "job", rng=rng).delay
            assert base * 0.8 <= got <= base <= 300


def test_jitter_spreads_jobs_that_failed_together() -> None:
    policy = RetryPolicy(failures=Backoff(60, 300, jitter=0.2), lost=EXACT.lost)
    due = {
        after_end(AttemptEnd(1, FAILURE, T0), Streak(), policy, f"job-{n}").delay
        for n in range(100)
    }
    assert len(due) == 100 and min(due) >= 48 and max(due) <= 60
    assert max(due) - min(due) > 8  # spread over most of the 12 s window


def test_jitter_is_the_same_on_every_leader() -> None:
    policy = RetryPolicy()
    end = AttemptEnd(3, FAILURE, T0)
    first = after_end(end, Streak(failures=2), policy, "nightly")
    again = after_end(end, Streak(failures=2), policy, "nightly")
    assert first == again
    assert 0 <= jitter_fraction("nightly", 3) < 1
    assert jitter_fraction("nightly", 3) != jitter_fraction("nightly", 4)


@given(
    delay=st.floats(0, 3600),
    extra=st.floats(0, 3600),
    jitter=st.floats(0, 0.99),
    multiplier=st.floats(1, 10),
    streak=st.integers(0, 10_000),
    fraction=st.floats(0, 0.999999),
)
def test_any_delay_is_within_zero_and_the_max(
    delay: float, extra: float, jitter: float, multiplier: float, streak: int, fraction: float
) -> None:
    backoff = Backoff(delay, delay + extra, jitter=jitter, multiplier=multiplier)
    got = backoff.delay_for(streak, fraction)
    assert 0 <= got <= backoff.max_delay
    if streak >= 1:
        assert got >= backoff.base(streak) * (1 - jitter) - 1e-9


def test_defaults_are_the_documented_ones() -> None:
    policy = RetryPolicy()
    failures = policy.failures
    assert (failures.delay, failures.max_delay, failures.jitter) == (5, 300, 0.2)
    assert policy.failures is DEFAULT_FAILURE_BACKOFF and policy.lost is DEFAULT_LOST_BACKOFF
    assert (policy.lost.delay, policy.lost.max_delay, policy.lost.first_at_once) == (2, 60, True)
    assert policy.reset_after == 600


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": -1, "max_delay": 5},
        {"delay": 10, "max_delay": 5},
        {"delay": 1, "max_delay": 10**6},
        {"delay": 1, "max_delay": 5, "jitter": 1.0},
        {"delay": 1, "max_delay": 5, "jitter": -0.1},
        {"delay": 1, "max_delay": 5, "multiplier": 0.5},
        {"delay": float("nan"), "max_delay": 5},
        {"delay": True, "max_delay": 5},
    ],
)
def test_bad_backoffs_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        Backoff(**kwargs)


def test_bad_reset_is_refused() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(reset_after=0)
    with pytest.raises(ConfigError):
        RetryPolicy(reset_after=-5)


def test_a_stop_is_not_counted() -> None:
    streak = Streak(failures=2, lost=1)
    end = AttemptEnd(4, "not-counted", T0, T0 - timedelta(seconds=5))
    due = after_end(end, streak, EXACT, "job")
    assert due.delay == 0 and due.streak == streak
