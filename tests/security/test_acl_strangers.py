"""ACLs on a real ZooKeeper: strangers can neither read nor change anything."""

from __future__ import annotations

import pytest

from tests import jobs
from tests.helpers import MONITOR_SECRET, SECRET, session
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig, ZkAuth
from zkstore.errors import AccessDenied
from zkstore.jobs.definition import JobDefinition
from zkstore.zookeeper.zk import default_acl

pytestmark = pytest.mark.integration


def test_strangers_can_neither_read_handles_nor_change_anything(secure: StoreConfig) -> None:
    with Cluster.open(secure) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("job1", jobs.noop))
        handle = cluster.layout.job_handle("job1")
        results = cluster.layout.results
    for auth in (None, f"alice:wrong-{SECRET}", f"bob:{SECRET}"):
        with session(secure, auth) as stranger:
            for read in (
                lambda: stranger.get(handle),
                lambda: stranger.children(secure.base_path + "/currentJobs"),
            ):
                with pytest.raises(AccessDenied):
                    read()
            for write in (
                lambda: stranger.set(handle, b"{}"),
                lambda: stranger.delete(handle),
                lambda: stranger.create(f"{secure.base_path}/currentJobs/evil", b"{}"),
                lambda: stranger.create(f"{results}/job1", b"{}"),
                lambda: stranger.set_acls(handle, default_acl(ZkAuth.parse("x:y")) or []),
            ):
                with pytest.raises(AccessDenied) as caught:
                    write()
                assert SECRET not in str(caught.value)
    with session(secure, f"monitor:{MONITOR_SECRET}") as monitor:
        assert monitor.get(handle)[0].startswith(b"{")
        with pytest.raises(AccessDenied):
            monitor.set(handle, b"{}")
    with Cluster.open(secure) as cluster:
        assert cluster.jobs.recover("job1").state.job_id == "job1", "nothing was changed"
