"""A claim under an extra artifact root is its job's alone (issue 54 item 5), against a real
ZooKeeper with credentials: the job's driver makes it under the job's own identity, no other
job's identity (nor the drivers' shared one) can delete, change or re-ACL it, and a release
deletes a place's data only under a claim that carries exactly that.

Both tests failed before: the drivers' shared identity had ALL on every claim (another job
deleted the claim, then took the place), and a release checked only the job named in it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.security import ACL, Id, Permissions

from recovery.driver.artifact_registry import JobArtifacts
from zkstore.admin.acl import apply_acl, walk
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import AccessDenied, UntrustedPayload
from zkstore.jobs.claims import Claim
from zkstore.jobs.job_artifacts import ATTEMPT, JOB, Artifact
from zkstore.records.strict import utc_now
from zkstore.zookeeper.identity import digest_id, driver_identity, drivers_auth
from zkstore.zookeeper.ops import Create, Delete, Fence
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

PLACE = "reports/daily"


@pytest.fixture
def extra(secure: StoreConfig, tmp_path: Path) -> Iterator[tuple[StoreConfig, Path]]:
    """The cluster's configuration with an extra artifact root, jobs v and a placed."""
    root = tmp_path / "extra"
    root.mkdir()
    config = secure.with_changes(artifact_roots=(f"file://{root}",))
    with Cluster.open(config) as cluster:
        for job in ("v", "a"):
            cluster.zk.ensure_path(cluster.layout.job_dir(job))
    yield config, root


def driver_config(config: StoreConfig, job_id: str) -> StoreConfig:
    identity = driver_identity(config.zk_auth, config.cluster_id, job_id, config.zk_read_acl)
    assert identity is not None
    return config.for_job(job_id, zk_driver=identity.to_json())


def job_id_entry(config: StoreConfig, job_id: str) -> Id:
    identity = driver_identity(config.zk_auth, config.cluster_id, job_id)
    assert identity is not None
    return digest_id(identity.job)


def artifacts_of(cluster: Cluster, job_id: str) -> JobArtifacts:
    """``ctx.artifacts`` as the job's driver has it (fenced on its job's directory)."""
    return JobArtifacts(
        cluster.artifacts(job_id),
        attempt=1,
        fence=Fence.check(cluster.layout.job_dir(job_id)),
        cancelled=threading.Event(),
    )


def test_no_other_identity_can_delete_or_change_a_jobs_claim(
    extra: tuple[StoreConfig, Path],
) -> None:
    config, root = extra
    with Cluster.open(driver_config(config, "v")) as victim:
        out = artifacts_of(victim, "v").register("out", f"file://{root}/{PLACE}", scope=JOB)
        claims = victim.artifacts("v").claims
        place = claims.nodes(out)[-1]
        mark = f"{place}/="
        with ZooKeeper.from_config(driver_config(config, "a")).start() as attacker:
            assert "zkstore-job.a" in attacker.identity
            denied: list[Callable[[], object]] = [
                lambda: attacker.commit([Delete(mark)]),
                lambda: attacker.set(mark, b'{"job": "a"}'),
                lambda: attacker.set_acls(mark, [ACL(Permissions.ALL, job_id_entry(config, "a"))]),
                lambda: attacker.set_acls(place, [ACL(Permissions.ALL, job_id_entry(config, "a"))]),
                lambda: attacker.commit([Create(f"{place}/below")]),
            ]
            for attempt in denied:
                with pytest.raises(AccessDenied):
                    attempt()
        assert config.zk_auth is not None
        drivers = digest_id(drivers_auth(config.zk_auth, config.cluster_id))
        with Cluster.open(config) as cluster:
            for node in walk(cluster.zk, cluster.layout.artifact_claims):
                acl, _ = cluster.zk.get_acls(node)
                rights = [e.perms for e in acl if e.id == drivers]
                assert rights and not rights[0] & (Permissions.WRITE | Permissions.ADMIN), node
            apply_acl(cluster.zk, cluster.layout)  # the operator's acl apply keeps it the job's
        assert (root / PLACE).exists() is False
        (root / PLACE).mkdir(parents=True)
        (root / PLACE / "part-0").write_bytes(b"data")
        artifacts_of(victim, "v").release("out")  # its own claim: released
        assert not (root / PLACE).exists()
        assert victim.zk.exists(place) is None, "its place's node goes with its claim"


def test_a_claim_not_made_under_the_jobs_own_identity_releases_nothing(
    extra: tuple[StoreConfig, Path],
) -> None:
    """A claim naming job a, but made under the drivers' shared identity (as every driver's
    was before): the leader's release refuses it and says why; the data stays."""
    config, root = extra
    uri = f"file://{root}/{PLACE}"
    with Cluster.open(config) as cluster:
        claims = cluster.artifacts("a").claims
        for node in claims.nodes(uri):  # the shared index's ACL: every driver's to change
            cluster.zk.ensure_path(node)
        claim = Claim(version=None, job="a", name="out", uri=uri, claimed=utc_now())
        cluster.zk.create(f"{claims.nodes(uri)[-1]}/=", claim.to_bytes())
        record = Artifact(
            version=None, name="out", uri=uri, scope=ATTEMPT, attempt=1, registered=utc_now()
        )
        cluster.zk.ensure_path(cluster.layout.artifacts("a"))
        cluster.zk.create(cluster.layout.artifact("a", "out"), record.to_bytes())
        (root / PLACE).mkdir(parents=True)
        (root / PLACE / "kept").write_bytes(b"victim's")
        with pytest.raises(UntrustedPayload, match="not the job's own"):
            cluster.artifacts("a").release("out", fence=None)
        assert (root / PLACE / "kept").read_bytes() == b"victim's"
