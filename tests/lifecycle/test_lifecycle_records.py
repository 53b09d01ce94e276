"""The lifecycle's writes in the real ZooKeeper (zkstore.lifecycle.lifecycle_ops): a driver's
heartbeat, fenced on its attempt and gone with its session; the leader's end request, written only
for the attempt it read; STOPPED recorded only once no driver holds ``running``, fencing out a
driver that was about to start."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from zkstore.cluster import Cluster
from zkstore.errors import FenceLost, HandleExists, VersionConflict
from zkstore.jobs.request_pins import pin_of
from zkstore.lifecycle.lifecycle_ops import (
    EndNode,
    clear_end_ops,
    end_ops,
    heartbeat_ops,
    stopped_ops,
)
from zkstore.lifecycle.lifecycle_records import EndRequest, Heartbeat
from zkstore.lifecycle.lifecycle_states import STOPPED, TIMED_OUT
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import STARTING
from zkstore.records.record import read_record
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Check, Create, Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

JOB = "j"


@pytest.fixture
def placed(cluster: Cluster) -> int:
    """Attempt 2 of JOB placed by a leader: the status version the attempt is fenced on."""
    status = JobStatus(version=None, state=STARTING, attempt=2, updated=parse_time(utc_now()))
    cluster.zk.ensure_path(cluster.layout.job_dir(JOB))
    cluster.zk.create(cluster.layout.status(JOB), status.to_bytes())
    return 0


@pytest.fixture
def driver(stand_in_session: Callable[[], ZooKeeper]) -> ZooKeeper:
    """The driver's own session (a stand-in's: tests/conftest.py)."""
    return stand_in_session()


def take_running(cluster: Cluster, zk: ZooKeeper, status_version: int) -> Fence:
    """What a driver does first; its fence for every later write."""
    layout = cluster.layout
    info = RunningInfo(version=None, attempt=2, host="h", pid=1, started=parse_time(utc_now()))
    zk.commit(
        [
            Check(layout.status(JOB), status_version),
            Create(layout.running(JOB), info.to_bytes(), ephemeral=True),
        ]
    )
    return Fence.check(layout.status(JOB), status_version) + Fence.check(layout.running(JOB), 0)


def beat(cluster: Cluster, zk: ZooKeeper, fence: Fence, n: int, existing: int | None) -> int:
    record = Heartbeat(version=None, attempt=2, at=parse_time(utc_now()), beats=n)
    results = zk.commit(heartbeat_ops(cluster.layout, JOB, record, existing=existing), fence=fence)
    return 0 if existing is None else results[-1].version


def test_heartbeats_are_fenced_on_the_attempt_and_go_with_its_session(
    cluster: Cluster, driver: ZooKeeper, placed: int
) -> None:
    fence = take_running(cluster, driver, placed)
    version = beat(cluster, driver, fence, 1, None)
    for n in range(2, 12):
        version = beat(cluster, driver, fence, n, version)
    path = cluster.layout.heartbeat(JOB)
    seen = read_record(cluster.zk, Heartbeat, path)
    assert seen is not None and (seen.attempt, seen.beats, seen.version) == (2, 11, 10)
    # A leader placed the next attempt: this attempt's beats are refused.
    status = cluster.layout.status(JOB)
    cluster.zk.set(status, cluster.zk.get(status)[0], version=placed)
    with pytest.raises(FenceLost):
        beat(cluster, driver, fence, 12, version)
    driver.stop()  # its session ends: running and heartbeat go with it
    assert cluster.zk.exists(path) is None
    assert cluster.zk.exists(cluster.layout.running(JOB)) is None


def test_a_heartbeat_costs_one_small_transaction(
    cluster: Cluster, driver: ZooKeeper, placed: int
) -> None:
    fence = take_running(cluster, driver, placed)
    version = beat(cluster, driver, fence, 1, None)
    started = time.monotonic()
    for n in range(2, 102):
        version = beat(cluster, driver, fence, n, version)
    took = (time.monotonic() - started) / 100
    size = len(cluster.zk.get(cluster.layout.heartbeat(JOB))[0])
    print(f"\nheartbeat: {size} bytes, {took * 1000:.1f} ms per fenced write (3-op transaction)")
    assert size < 100


def test_the_end_request_is_written_only_for_the_attempt_read(
    cluster: Cluster, placed: int
) -> None:
    layout = cluster.layout
    request = EndRequest(
        version=None,
        attempt=2,
        reason=TIMED_OUT,
        requested=parse_time(utc_now()),
        grace_ms=30_000,
        detail="attempt 2 ran 1h00m05s: over its --timeout of 1h",
    )
    cluster.zk.commit(end_ops(layout, JOB, request, status_version=placed, existing=None, pin=True))
    written = read_record(cluster.zk, EndRequest, layout.end(JOB))
    assert written is not None and written.attempt == 2 and written.reason == TIMED_OUT
    assert cluster.zk.exists(pin_of(layout.end(JOB))) is not None
    # The attempt is over meanwhile (the status moved): a request for it is refused.
    cluster.zk.set(layout.status(JOB), cluster.zk.get(layout.status(JOB))[0], version=placed)
    pinned = EndNode(0, pinned=True)
    with pytest.raises(VersionConflict):
        cluster.zk.commit(
            end_ops(layout, JOB, request, status_version=placed, existing=pinned, pin=True)
        )
    cluster.zk.commit(clear_end_ops(layout, JOB, pinned))
    assert cluster.zk.exists(layout.end(JOB)) is None


def stopped_status() -> bytes:
    return JobStatus(
        version=None, state=STOPPED, attempt=2, updated=parse_time(utc_now())
    ).to_bytes()


def test_stopped_is_recorded_only_once_no_driver_holds_running(
    cluster: Cluster, driver: ZooKeeper, placed: int
) -> None:
    layout = cluster.layout
    take_running(cluster, driver, placed)
    with pytest.raises(HandleExists):
        cluster.zk.commit(
            stopped_ops(layout, JOB, stopped_status(), status_version=placed, end=None)
        )
    assert read_record(cluster.zk, JobStatus, layout.status(JOB)).state == STARTING  # type: ignore[union-attr]
    driver.stop()
    cluster.zk.commit(stopped_ops(layout, JOB, stopped_status(), status_version=placed, end=None))
    status = read_record(cluster.zk, JobStatus, layout.status(JOB))
    assert status is not None and status.state == STOPPED and status.version == placed + 1


def test_stopped_fences_out_a_driver_about_to_start(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper], placed: int
) -> None:
    layout = cluster.layout
    request = EndRequest(
        version=None, attempt=2, reason=STOPPED, requested=parse_time(utc_now()), grace_ms=1
    )
    cluster.zk.commit(
        end_ops(layout, JOB, request, status_version=placed, existing=None, pin=False)
    )
    cluster.zk.commit(
        stopped_ops(layout, JOB, stopped_status(), status_version=placed, end=EndNode(0))
    )
    assert cluster.zk.exists(layout.end(JOB)) is None
    with pytest.raises(VersionConflict):
        take_running(cluster, stand_in_session(), placed)  # the launch that was under way
    assert cluster.zk.exists(layout.running(JOB)) is None
