"""A driver's own ZooKeeper identity against a real server with credentials (issue 43 item 3):
its job's records it writes, everything else it can at most read, whatever client it opens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zkstore.admin.acl import grant_job
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import AccessDenied
from zkstore.layout import Layout
from zkstore.zookeeper.identity import driver_identity
from zkstore.zookeeper.ops import Create, Delete
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def _driver_config(secure: StoreConfig, job_id: str) -> StoreConfig:
    driver = driver_identity(secure.zk_auth, secure.cluster_id, job_id, secure.zk_read_acl)
    assert driver is not None
    return secure.for_job(job_id, zk_driver=driver.to_json())


@pytest.fixture
def leader_side(secure: StoreConfig) -> Iterator[Cluster]:
    """The cluster's identity, with the records a leader and a client would have made: job
    a and job b, each placed, a result, a schedule, a notification."""
    with Cluster.open(secure) as cluster:
        zk, layout = cluster.zk, cluster.layout
        for job in ("a", "b"):
            zk.commit(
                [
                    Create(layout.job_handle(job), b"{}"),
                    Create(f"{layout.job_handle(job)}/locks"),
                    Create(layout.job_dir(job)),
                    Create(layout.status(job), b"{}"),
                ]
            )
        zk.create(layout.result("done"), b"{}")
        zk.ensure_path(f"{layout.base}/notifications")
        zk.create(f"{layout.base}/notifications/b~1~SUCCEEDED~x", b"{}")
        zk.create(f"{layout.schedules}/s", b"{}")
        yield cluster


def test_a_driver_writes_its_own_records_and_nothing_else(
    secure: StoreConfig, leader_side: Cluster
) -> None:
    layout = Layout(secure.base_path)
    with ZooKeeper.from_config(_driver_config(secure, "a")).start() as driver:
        assert "zkstore-job.a" in driver.identity
        # its own job: the running node, the outcome, a checkpoint, its lock, a heartbeat
        driver.commit(
            [
                Create(layout.running("a"), b"{}", ephemeral=True),
                Create(f"{layout.job_handle('a')}/locks/drv", ephemeral=True),
            ]
        )
        driver.ensure_path(layout.checkpoints("a"))
        driver.create(f"{layout.checkpoints('a')}/{'1'.zfill(19)}", b"{}")
        driver.commit([Delete(layout.running("a")), Create(layout.outcome("a"), b"{}")])
        driver.set(layout.outcome("a"), b'{"again": 1}')
        assert driver.get(layout.status("b"))[0] == b"{}", "reading is allowed"
        denied = [
            lambda: driver.set(layout.status("b"), b"{}"),
            lambda: driver.create(layout.running("b"), b"{}", ephemeral=True),
            lambda: driver.set(layout.job_handle("a"), b"{}"),
            lambda: driver.create(layout.job_handle("x"), b"{}"),
            lambda: driver.create(layout.result("a"), b"{}"),
            lambda: driver.delete(layout.result("done")),
            lambda: driver.create(f"{layout.base}/notifications/a~9~FAILED~y", b"{}"),
            lambda: driver.set(f"{layout.schedules}/s", b"{}"),
            lambda: driver.create(layout.quarantine_entry("b"), b"{}"),
            lambda: driver.create(layout.cleanup_entry("b"), b"{}"),
            lambda: driver.create(layout.member("evil"), b"{}", ephemeral=True),
            lambda: driver.create(layout.assignment("d1", "b"), b"{}", makepath=True),
            lambda: driver.set(layout.fleet, b"{}"),
            lambda: driver.create(f"{layout.job_handle('b')}/locks/drv", b"", ephemeral=True),
        ]
        for attempt in denied:
            with pytest.raises(AccessDenied):
                attempt()


def test_nodes_made_before_per_job_identities_are_opened_to_the_job_before_its_driver(
    secure: StoreConfig,
) -> None:
    """A job placed by a daemon of protocol 2 (its nodes with the cluster's ACL alone): its
    driver could not take its running node; grant_job gives the nodes the ACL of now."""
    layout = Layout(secure.base_path)
    with ZooKeeper.from_config(secure, acl_policy=None).start() as old:  # a protocol-2 daemon
        old.ensure_path(layout.current_jobs)
        old.ensure_path(layout.jobs)
        old.commit(
            [
                Create(layout.job_handle("a"), b"{}"),
                Create(f"{layout.job_handle('a')}/locks"),
                Create(layout.job_dir("a")),
                Create(layout.status("a"), b"{}"),
            ]
        )
    with ZooKeeper.from_config(_driver_config(secure, "a")).start() as driver:
        with pytest.raises(AccessDenied):
            driver.create(layout.running("a"), b"{}", ephemeral=True)
        with Cluster.open(secure) as cluster:
            assert grant_job(cluster.zk, cluster.layout, "a") == 3  # its dir, locks, locks' node
            assert grant_job(cluster.zk, cluster.layout, "a") == 0, "once is enough"
        driver.create(layout.running("a"), b"{}", ephemeral=True)
        driver.create(f"{layout.job_handle('a')}/locks/drv", ephemeral=True)
        with pytest.raises(AccessDenied):
            driver.set(layout.status("a"), b"{}")
