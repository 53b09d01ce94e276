"""Timeouts and hung drivers (zkstore.lifecycle.attempt_limits): is an attempt over --timeout,
--start-timeout or --progress-timeout, and when to look again; the driver's heartbeat gate
(recovery.driver.heartbeat) that bounds ZooKeeper writes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from recovery.driver.heartbeat import HeartbeatGate
from zkstore.errors import ConfigError
from zkstore.lifecycle.attempt_limits import (
    PROGRESS_TIMEOUT,
    START_TIMEOUT,
    TIMEOUT,
    AttemptTimes,
    Expired,
    Limits,
    Within,
    heartbeat_interval,
    judge,
)
from zkstore.lifecycle.lifecycle_states import FAILURE, LOST, STUCK, TIMED_OUT

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def test_no_limits_no_check() -> None:
    assert judge(AttemptTimes(1, placed=ago(10**6), running_since=ago(10**6)), Limits(), NOW) == (
        Within()
    )


def test_a_run_over_its_timeout_is_timed_out_with_the_limit_in_the_reason() -> None:
    times = AttemptTimes(3, placed=ago(4000), running_since=ago(3605))
    verdict = judge(times, Limits(timeout=3600), NOW)
    assert isinstance(verdict, Expired)
    assert (verdict.limit, verdict.outcome, verdict.counts_as) == (TIMEOUT, TIMED_OUT, FAILURE)
    assert verdict.seconds == 3600
    assert verdict.reason == "attempt 3 ran 1h00m05s: over its --timeout of 1h"


def test_a_run_within_its_timeout_is_looked_at_again_at_the_deadline() -> None:
    times = AttemptTimes(1, placed=ago(100), running_since=ago(60))
    expected = Within(next_check=ago(60) + timedelta(hours=1))
    assert judge(times, Limits(timeout=3600), NOW) == expected


def test_the_timeout_counts_from_running_not_from_placement() -> None:
    times = AttemptTimes(1, placed=ago(7200), running_since=ago(60))
    assert isinstance(judge(times, Limits(timeout=3600), NOW), Within)


def test_placed_and_not_running_past_the_start_timeout() -> None:
    times = AttemptTimes(2, placed=ago(121))
    verdict = judge(times, Limits(start_timeout=120, timeout=60), NOW)
    assert isinstance(verdict, Expired)
    assert (verdict.limit, verdict.outcome, verdict.counts_as) == (
        START_TIMEOUT,
        TIMED_OUT,
        FAILURE,
    )
    assert "over its --start-timeout of 2m" in verdict.reason
    assert judge(AttemptTimes(2, placed=ago(30)), Limits(start_timeout=120), NOW) == Within(
        next_check=ago(30) + timedelta(seconds=120)
    )


def test_the_start_timeout_no_longer_applies_once_running() -> None:
    times = AttemptTimes(1, placed=ago(1000), running_since=ago(1))
    assert judge(times, Limits(start_timeout=60), NOW) == Within()


def test_no_progress_is_stuck_and_counts_as_lost() -> None:
    times = AttemptTimes(
        4, placed=ago(900), running_since=ago(800), checkpoint=ago(700), heartbeat=ago(650)
    )
    verdict = judge(times, Limits(progress_timeout=600), NOW)
    assert isinstance(verdict, Expired)
    assert (verdict.limit, verdict.outcome, verdict.counts_as) == (PROGRESS_TIMEOUT, STUCK, LOST)
    assert verdict.reason.startswith("attempt 4 made no progress (no checkpoint, no ")
    assert "for 10m50s: over its --progress-timeout of 10m" in verdict.reason


@pytest.mark.parametrize(
    ("checkpoint", "heartbeat"), [(ago(100), None), (None, ago(100)), (ago(500), ago(100))]
)
def test_a_checkpoint_or_a_heartbeat_is_progress(
    checkpoint: datetime | None, heartbeat: datetime | None
) -> None:
    times = AttemptTimes(
        1, placed=ago(900), running_since=ago(800), checkpoint=checkpoint, heartbeat=heartbeat
    )
    assert judge(times, Limits(progress_timeout=600), NOW) == Within(
        next_check=ago(100) + timedelta(seconds=600)
    )


def test_a_new_driver_counts_as_progress() -> None:
    times = AttemptTimes(1, placed=ago(900), running_since=ago(30), heartbeat=None)
    assert isinstance(judge(times, Limits(progress_timeout=60), NOW), Within)


def test_the_earliest_deadline_wins() -> None:
    times = AttemptTimes(1, placed=ago(900), running_since=ago(800), heartbeat=ago(10))
    verdict = judge(times, Limits(timeout=3600, progress_timeout=120), NOW)
    assert verdict == Within(next_check=ago(10) + timedelta(seconds=120))
    times = AttemptTimes(1, placed=ago(900), running_since=ago(3601), heartbeat=ago(10))
    verdict = judge(times, Limits(timeout=3600, progress_timeout=120), NOW)
    assert isinstance(verdict, Expired) and verdict.limit == TIMEOUT


def test_times_from_a_clock_ahead_count_as_now() -> None:
    future = NOW + timedelta(hours=5)
    times = AttemptTimes(1, placed=future, running_since=future, heartbeat=future)
    verdict = judge(times, Limits(timeout=60, progress_timeout=60), NOW)
    assert verdict == Within(next_check=NOW + timedelta(seconds=60))


@pytest.mark.parametrize(
    "limits",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"start_timeout": float("inf")},
        {"progress_timeout": 10},
        {"timeout": True},
    ],
)
def test_bad_limits_are_refused(limits: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        Limits(**limits)


def test_heartbeat_interval_is_a_quarter_within_bounds() -> None:
    assert heartbeat_interval(30) == 7.5
    assert heartbeat_interval(120) == 30
    assert heartbeat_interval(3600) == 60
    assert heartbeat_interval(1) == 5


def test_a_job_without_progress_timeout_writes_no_heartbeat() -> None:
    gate = HeartbeatGate(progress_timeout=None)
    for t in range(1000):
        gate.beat(float(t))
    assert not gate.due(1000.0)


def test_a_million_beats_make_one_write_per_interval() -> None:
    gate = HeartbeatGate(progress_timeout=120)  # interval 30 s
    writes = []
    now = 0.0
    while now < 300:
        gate.beat(now)  # a beat every millisecond
        if gate.due(now):
            gate.written(now, gate.beats)
            writes.append(now)
        now += 0.001
    assert len(writes) == 10  # at 0, 30, ..., 270
    assert all(b - a >= 30 - 1e-6 for a, b in itertools.pairwise(writes))


def test_no_write_without_a_new_beat() -> None:
    gate = HeartbeatGate(progress_timeout=60)
    gate.beat(0.0)
    assert gate.due(0.0)
    gate.written(0.0, gate.beats)
    assert not gate.due(1000.0)  # a deadlocked job beats no more: nothing is written for it
    gate.beat(1001.0)
    assert gate.due(1001.0)


def test_a_recent_checkpoint_makes_a_heartbeat_unnecessary() -> None:
    gate = HeartbeatGate(progress_timeout=60)  # interval 15 s
    gate.checkpointed(0.0)
    gate.beat(1.0)
    assert not gate.due(10.0)
    assert gate.due(15.0)
