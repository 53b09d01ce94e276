"""The ZooKeeper identities and the ACL of each node (issue 43 item 3): derived, one-way, and
granting a job's identity its own job's records only."""

from __future__ import annotations

import pytest
from kazoo.security import Permissions

from zkstore.config import ZkAuth
from zkstore.zookeeper.identity import (
    DRIVERS_USER,
    AclPolicy,
    DriverIdentity,
    digest_id,
    driver_identity,
    job_auth,
)

pytestmark = pytest.mark.unit

CLUSTER = ZkAuth.parse("alice:s3cret")
BASE = "/zkstore/c1"


def _rights(acl: list, ident: object) -> int:
    return sum(entry.perms for entry in acl if entry.id == ident)


def test_identities_are_derived_apart_for_each_job_and_cluster() -> None:
    one = job_auth(CLUSTER, "c1", "job-a")
    assert one.user == "zkstore-job.job-a" and one.secret != CLUSTER.secret
    assert job_auth(CLUSTER, "c1", "job-b").secret != one.secret
    assert job_auth(CLUSTER, "c2", "job-a").secret != one.secret
    assert job_auth(ZkAuth.parse("alice:other"), "c1", "job-a").secret != one.secret
    driver = driver_identity(CLUSTER, "c1", "job-a")
    assert driver is not None and driver.drivers.user == DRIVERS_USER
    assert CLUSTER.secret not in repr(driver) and CLUSTER.secret not in str(driver.to_json())
    assert DriverIdentity.from_json(driver.to_json()) == driver
    assert driver_identity(None, "c1", "job-a") is None, "open ACLs: nothing to derive"
    sasl = ZkAuth.parse("sasl:DIGEST-MD5:bob:pw")
    assert driver_identity(sasl, "c1", "job-a") is None, "SASL identities are the operator's"


def test_a_job_gets_rights_on_its_own_records_only() -> None:
    policy = AclPolicy(BASE, "c1", cluster=CLUSTER)
    job = digest_id(job_auth(CLUSTER, "c1", "a"))
    other = digest_id(job_auth(CLUSTER, "c1", "b"))
    cluster = digest_id(CLUSTER)
    grow = Permissions.READ | Permissions.CREATE | Permissions.DELETE
    expected = {
        f"{BASE}/jobs/a": grow,
        f"{BASE}/jobs/a/running": Permissions.ALL,
        f"{BASE}/jobs/a/outcome": Permissions.ALL,
        f"{BASE}/jobs/a/heartbeat": Permissions.ALL,
        f"{BASE}/jobs/a/control-ack": Permissions.ALL,
        f"{BASE}/jobs/a/checkpoints": grow,
        f"{BASE}/jobs/a/checkpoints/0000000000000000001": Permissions.ALL,
        f"{BASE}/jobs/a/checkpoints/0000000000000000001/locks": Permissions.ALL,
        f"{BASE}/jobs/a/artifacts/out": Permissions.ALL,
        f"{BASE}/currentJobs/a/locks": Permissions.ALL,
        f"{BASE}/jobs/a/status": 0,
        f"{BASE}/jobs/a/stop": 0,
        f"{BASE}/jobs/a/control": 0,
        f"{BASE}/currentJobs/a": 0,
        f"{BASE}/results/a": 0,
        f"{BASE}/quarantine/a": 0,
        f"{BASE}/notifications/a~1~SUCCEEDED~x": 0,
        f"{BASE}/schedules/s": 0,
        f"{BASE}/leader/info": 0,
        f"{BASE}/fleet": 0,
    }
    for path, rights in expected.items():
        acl = policy.acl_for(path)
        assert _rights(acl, job) == rights, path
        assert _rights(acl, other) == 0, path
        assert _rights(acl, cluster) == Permissions.ALL, path


def test_a_driver_makes_its_own_records_with_the_clusters_rights_on_them() -> None:
    driver = driver_identity(CLUSTER, "c1", "a")
    assert driver is not None
    policy = AclPolicy(BASE, "c1", driver=driver)
    acl = policy.acl_for(f"{BASE}/jobs/a/running")
    assert _rights(acl, digest_id(CLUSTER)) == Permissions.ALL, "the leader removes it later"
    assert _rights(acl, digest_id(driver.job)) == Permissions.ALL
    assert policy.job_entry("b") is None, "a driver cannot name another job's identity"


def test_a_policy_keeps_a_bounded_number_of_jobs_ids() -> None:
    """A daemon's policy meets every job it ever runs: the ids it derived are a cache, bounded
    (it kept one per job for the life of the daemon, issue 62), derived again when needed."""
    policy = AclPolicy(BASE, "c1", cluster=CLUSTER)
    first = policy.acl_for(f"{BASE}/jobs/job-0/running")
    for n in range(3000):
        policy.acl_for(f"{BASE}/jobs/job-{n}/running")
    assert len(policy._jobs) <= 1024, "JOB_IDS_KEPT of the 3,000 met"
    assert policy.acl_for(f"{BASE}/jobs/job-0/running") == first, "derived again, the same"
