"""The leader's copy of the members' warm JVMs is read again as soon as a record changes.

A daemon whose warm JVM became ready writes ``warm_ready`` into its member record; a user who
then submits a Spark job expects it there. The leader used to trust its copy for a second, so a
job that came within a second of the leader's last read went to a daemon without a warm JVM
(seen in a fresh-clone ``make test``: ``test_spark_jobs_land_where_a_warm_jvm_is_ready``, its
ninth job). Here a second client does what the daemon and the user do, in that order, and the
leader's session sees the job's node only after the change: the copy is then known stale.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from recovery.leader.placement import Fleet, MemberChanges, read_fleet, refresh_warm
from tests.helpers import wait_for
from zkstore.config import StoreConfig
from zkstore.layout import Layout
from zkstore.records.fleet_records import MemberInfo
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def register(zk: ZooKeeper, layout: Layout, daemon_id: str, warm: int | None) -> MemberInfo:
    info = MemberInfo(
        version=None,
        daemon_id=daemon_id,
        host="test",
        pid=1,
        slots=4,
        started=utc_moment(),
        warm_ready=warm,
    )
    zk.create(layout.member(daemon_id), info.to_bytes(), makepath=True)
    return info


def test_a_warm_jvm_said_ready_before_a_job_arrives_is_seen_at_its_placement(
    config: StoreConfig, zk: ZooKeeper
) -> None:
    layout = Layout(config.base_path)
    register(zk, layout, "a", None)
    b = register(zk, layout, "b", 0)
    zk.ensure_path(layout.current_jobs)
    changes = MemberChanges()
    leader = ZooKeeper(
        config.zk_hosts, session_timeout=config.session_timeout, timeout=config.timeout
    ).start()
    try:
        fleet: Fleet = read_fleet(leader, layout)
        changes.unwatched()
        refresh_warm(fleet, leader, layout, changes)  # the records read with their watches
        assert not changes.changed and fleet.members["b"].warm_ready == 0
        assert fleet.place("first", {}, warm=True)[0] == "a", "no warm JVM anywhere: by id"
        arrived = threading.Event()
        leader.children(layout.current_jobs, watch=lambda event: arrived.set())
        # the daemon says its JVM is ready, then the user submits, within the second
        zk.set(layout.member("b"), replace(b, warm_ready=1).to_bytes())
        zk.create(f"{layout.current_jobs}/second", b"")
        wait_for(arrived.is_set, config.session_timeout, what="the job's node seen")
        assert changes.changed, "the member's change came before the job: it is known"
        refresh_warm(fleet, leader, layout, changes)
        assert fleet.members["b"].warm_ready == 1
        assert fleet.place("second", {}, warm=True) == ("b", "a warm driver ready there")
    finally:
        leader.stop()


def test_with_nothing_changed_the_copy_is_trusted_and_not_read_again(
    config: StoreConfig, zk: ZooKeeper
) -> None:
    layout = Layout(config.base_path)
    register(zk, layout, "b", 1)
    fleet = read_fleet(zk, layout)
    changes = MemberChanges()
    refresh_warm(fleet, zk, layout, changes)
    read_at = fleet.read_at
    refresh_warm(fleet, zk, layout, changes)
    assert fleet.read_at == read_at, "no change, within the second: no read"
    changes.unwatched()  # the fleet read again without watches (a batch's read)
    refresh_warm(fleet, zk, layout, changes)
    assert fleet.read_at > read_at and not changes.changed
