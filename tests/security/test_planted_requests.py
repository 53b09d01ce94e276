"""Requests a job's identity made for itself (issue 54 item 4): a job may create any name under
its job's node (ZooKeeper's CREATE right is per parent), with an ACL that leaves the cluster
out. Such a ``cancel``, ``stop`` or ``end`` is an error of that job's snapshot only, and the
cluster's requests replace it."""

from __future__ import annotations

import pytest
from kazoo.security import make_digest_acl

from tests import jobs
from zkstore.cluster import Cluster
from zkstore.cluster.triage import cancel
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.snapshot import read_snapshot, read_snapshots
from zkstore.lifecycle.stopstore import StopStore
from zkstore.zookeeper.identity import driver_identity
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def plant(secure: StoreConfig, job_id: str, *names: str) -> None:
    """As the job's driver identity, make ``names`` under the job's node, its own ACL only."""
    driver = driver_identity(secure.zk_auth, secure.cluster_id, job_id, secure.zk_read_acl)
    assert driver is not None
    own = driver.job
    with ZooKeeper.from_config(secure.for_job(job_id, zk_driver=driver.to_json())).start() as zk:
        for name in names:
            path = f"{secure.base_path}/jobs/{job_id}/{name}"
            zk.kazoo.create(path, b"mine", acl=[make_digest_acl(own.user, own.secret, all=True)])


def test_planted_requests_are_one_jobs_errors_and_are_replaced(secure: StoreConfig) -> None:
    with Cluster.open(secure) as cluster:
        for job_id in ("a", "b"):
            cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
            cluster.zk.ensure_path(cluster.layout.job_dir(job_id))
        plant(secure, "a", "cancel", "stop", "end")
        snaps = read_snapshots(cluster.zk, cluster.layout, ["a", "b"], look_inside=True)
        assert {"cancel", "stop"} <= set(snaps["a"].errors), snaps["a"].errors
        assert snaps["b"].errors == {} and snaps["b"].handle is not None
        request = cancel(cluster, "a", reason="planted")
        assert request.reason == "planted"
        stop = StopStore(cluster).request("a", reason="planted too")
        assert stop.reason == "planted too"
        job = read_snapshot(cluster.zk, cluster.layout, "a")
        assert job.cancel is not None and job.cancel.reason == "planted"
        assert job.stop is not None and job.stop.reason == "planted too"
        assert "cancel" not in job.errors and "stop" not in job.errors
