"""The leader's schedule passes against the real ZooKeeper (recovery.leader.schedule_firing): a pass
fires at most the leadership's budget over every schedule, the schedules take turns, a backlog
is worked off over several passes a moment apart (a timer, so that the loop serves what waits
first), a pass gives way to waiting events, and a schedule under the minimum interval is not
fired while the others are."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Event, Leadership, Loop
from recovery.leader.schedule_firing import BACKLOG_PAUSE, SCHEDULES
from recovery.settings import Bounds, DaemonSettings
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import utc_moment
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore

pytestmark = pytest.mark.integration

BUDGET = 5
EVERY = 60
BACKLOG = 12  # windows behind each schedule


def noop(ctx: object) -> None:
    return None


@pytest.fixture
def leader(cluster: Cluster, config: StoreConfig) -> Iterator[LeaderProcess]:
    election = LeaderElection(cluster.zk, cluster.layout, "passes", lambda: None)
    election.contend()
    assert election.check()
    settings = DaemonSettings(
        store=config,
        daemon_id="passes",
        bounds=Bounds(schedule_fire_budget=BUDGET, schedule_min_interval=10),
    )
    yield LeaderProcess(cluster, settings, Leadership(election.fence()), Loop(), election)


def create(cluster: Cluster, config: StoreConfig, name: str, every: int = EVERY) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    spec = ScheduleSpec(
        version=None,
        name=name,
        created=utc_moment(),
        every=every,
        catchup="all",
        grace=0,
        start_at=now - timedelta(seconds=every * BACKLOG - every // 2),
    )
    ScheduleStore.for_config(config, cluster.zk).create(
        spec, JobDefinition.for_function(name, noop)
    )


def fired(cluster: Cluster, config: StoreConfig, name: str) -> int:
    return ScheduleStore.for_config(config, cluster.zk).get(name).state.fired


def next_pass(loop: Loop) -> bool:
    """Whether the loop hands out a pass within the backlog's pause (its timer, if one is
    armed); the other events it hands out meanwhile are dropped (served)."""
    deadline = time.monotonic() + BACKLOG_PAUSE * 4
    while (left := deadline - time.monotonic()) > 0:
        if any(e.kind == SCHEDULES for e in loop.next_events(timeout=left)):
            return True
    return False


def test_a_backlog_is_worked_off_a_budget_a_pass_each_schedule_in_turn(
    cluster: Cluster, config: StoreConfig, leader: LeaderProcess
) -> None:
    names = ["alpha", "beta", "gamma"]
    for name in names:
        create(cluster, config, name)
    totals = [0]
    while True:
        leader.schedules.run_pass()
        totals.append(sum(fired(cluster, config, n) for n in names))
        # each pass fires within the budget, and at least one window while any is behind
        assert totals[-1] - totals[-2] <= BUDGET
        assert totals[-1] > totals[-2] or totals[-2] == BACKLOG * 3
        if not next_pass(leader.loop):  # (the runs' looks it posted are drained here too)
            break  # no timer at the backlog's pause: every schedule is up to date
        assert len(totals) < BACKLOG * 3
    assert [fired(cluster, config, n) for n in names] == [BACKLOG] * 3


def test_every_schedule_gets_its_turn_whoever_has_a_backlog(
    cluster: Cluster, config: StoreConfig, leader: LeaderProcess
) -> None:
    for name in ("alpha", "beta", "gamma"):
        create(cluster, config, name)
    for _ in range(3):
        leader.schedules.run_pass()
        next_pass(leader.loop)  # the loop serves the new runs' looks: a pass gives way to them
    # three passes: each schedule was first in one
    assert all(fired(cluster, config, n) >= BUDGET for n in ("alpha", "beta", "gamma"))


def test_a_pass_gives_way_to_waiting_events(
    cluster: Cluster, config: StoreConfig, leader: LeaderProcess
) -> None:
    for name in ("alpha", "beta"):
        create(cluster, config, name)
    leader.loop.post(Event("something-else"))  # a placement or a result waits
    leader.schedules.run_pass()
    # one window fired (progress), then the pass gave way
    assert [fired(cluster, config, n) for n in ("alpha", "beta")] == [1, 0]
    assert next_pass(leader.loop)  # and comes back a moment later


def test_a_schedule_under_the_minimum_interval_is_not_fired(
    cluster: Cluster,
    config: StoreConfig,
    leader: LeaderProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    create(cluster, config, "flood", every=1)
    create(cluster, config, "hourly")
    with caplog.at_level(logging.ERROR):
        leader.schedules.run_pass()
        leader.loop.next_events(timeout=0)  # the loop serves the runs' looks between passes
        leader.schedules.run_pass()
    assert fired(cluster, config, "flood") == 0
    assert fired(cluster, config, "hourly") == BACKLOG - 2  # 5 + 5 of the 12
    assert "schedule flood: cannot fire: its windows are 1 s apart" in caplog.text
    assert "--schedule-min-interval" in caplog.text
