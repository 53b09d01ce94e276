"""Requests a job's identity made for itself (issue 54 item 4): a job may create any name under
its job's node (ZooKeeper's CREATE right is per parent), with an ACL that leaves the cluster
out. Such a ``cancel``, ``stop`` or ``end`` is an error of that job's snapshot only, and the
cluster's requests replace it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NotEmptyError
from kazoo.security import ACL, Id, Permissions, make_digest_acl

from tests import jobs
from zkstore.cluster import Cluster
from zkstore.cluster import fleet_protocol as fleet
from zkstore.cluster.triage import cancel
from zkstore.config import StoreConfig
from zkstore.errors import WrongState
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.request_pins import pin_of
from zkstore.jobs.snapshot import read_snapshot, read_snapshots
from zkstore.jobs.stops import EndRequest, StopRequest
from zkstore.lifecycle.lifecycle_ops import end_ops
from zkstore.lifecycle.lifecycle_states import STOPPED
from zkstore.lifecycle.stopstore import StopStore
from zkstore.records.job_records import CancelRequest
from zkstore.records.strict import utc_moment, utc_now
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


@contextlib.contextmanager
def as_job(secure: StoreConfig, job_id: str) -> Iterator[KazooClient]:
    """A raw kazoo client holding the job's driver identity, as job code can make one."""
    driver = driver_identity(secure.zk_auth, secure.cluster_id, job_id, secure.zk_read_acl)
    assert driver is not None
    with ZooKeeper.from_config(secure.for_job(job_id, zk_driver=driver.to_json())).start() as zk:
        yield zk.kazoo


def requests_of(cluster: Cluster, job_id: str) -> dict[str, str]:
    """The job's cancel, stop and end paths, by name."""
    layout = cluster.layout
    return {"cancel": layout.cancel(job_id), "stop": layout.stop(job_id), "end": layout.end(job_id)}


def ask_all(cluster: Cluster, job_id: str) -> None:
    """An operator's cancel and stop, and the leader's end of attempt 1, as each writes it."""
    cancel(cluster, job_id, reason="operator")
    StopStore(cluster).request(job_id, reason="operator")
    cluster.zk.create(cluster.layout.status(job_id), b"{}")  # the attempt's, which end checks
    status = 0
    request = EndRequest(
        version=None, attempt=1, reason=STOPPED, requested=utc_moment(), grace_ms=1000
    )
    pin = cluster.pins_requests()
    end = end_ops(cluster.layout, job_id, request, status_version=status, existing=None, pin=pin)
    cluster.zk.commit(end)


def test_a_jobs_identity_deletes_none_of_the_requests_made_of_it(secure: StoreConfig) -> None:
    """Job code holding its driver's identity may delete any leaf under its job's node (DELETE
    is the parent's right): each request lands with its pin, a child the job cannot delete, and
    ZooKeeper deletes no node with a child. The pin goes with the request when its writer's
    reader removes it (resume, the end recorded, the job's cleanup)."""
    with Cluster.open(secure) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("a", jobs.noop))
        cluster.zk.ensure_path(cluster.layout.job_dir("a"))
        assert cluster.pins_requests()  # a new cluster is at this code's protocol
        ask_all(cluster, "a")
        paths = requests_of(cluster, "a")
        with as_job(secure, "a") as job:
            for name, path in paths.items():
                with pytest.raises(NotEmptyError):
                    job.delete(path)
                with pytest.raises(NoAuthError):
                    job.delete(pin_of(path))
                with pytest.raises(NoAuthError):
                    job.set(path, b"{}")
                assert job.get(path)[0] == cluster.zk.get(path)[0], name  # read, unchanged
        snap = read_snapshot(cluster.zk, cluster.layout, "a")
        assert snap.cancel is not None and snap.cancel.reason == "operator"
        assert snap.stop is not None and snap.stop.reason == "operator"
        # the job's records go with their pins, in the cleanup's transactions
        assert cluster.zk.delete_tree(cluster.layout.job_dir("a"), shallow=True)
        assert cluster.zk.exists(cluster.layout.job_dir("a")) is None


def test_below_protocol_5_the_requests_are_written_as_protocol_4_did(
    secure: StoreConfig,
) -> None:
    """A fleet not finalized at protocol 5 may have a daemon or a command line that deletes a
    request with one ``Delete``: no pin, and so a job's identity can still delete them (what
    protocol 4 did; docs/operating.md says to finalize)."""
    with Cluster.open(secure) as cluster:
        record = fleet.FleetRecord(version=None, current=4, since=utc_now())
        cluster.zk.set(cluster.layout.fleet, record.to_bytes())
        cluster.jobs.submit(JobDefinition.for_function("a", jobs.noop))
        cluster.zk.ensure_path(cluster.layout.job_dir("a"))
        assert not cluster.pins_requests()
        ask_all(cluster, "a")
        with as_job(secure, "a") as job:
            for path in requests_of(cluster, "a").values():
                assert job.exists(pin_of(path)) is None
                job.delete(path)
                assert cluster.zk.exists(path) is None


def squat(secure: StoreConfig, job_id: str, name: str, data: bytes, *, child: bool) -> None:
    """As the job's identity, make ``name`` under its node first: a valid request anybody may
    read and the job alone may change (with a child of its own if ``child``)."""
    driver = driver_identity(secure.zk_auth, secure.cluster_id, job_id, secure.zk_read_acl)
    assert driver is not None
    own = make_digest_acl(driver.job.user, driver.job.secret, all=True)
    acl = [own, ACL(Permissions.READ, Id("world", "anyone"))]
    path = f"{secure.base_path}/jobs/{job_id}/{name}"
    with as_job(secure, job_id) as job:
        job.create(path, data, acl=acl)
        if child:
            job.create(pin_of(path), b"", acl=[own])


def test_a_request_the_job_made_first_is_replaced_by_the_operators(secure: StoreConfig) -> None:
    """A job may make its own ``cancel`` or ``stop`` before the operator's: a valid request the
    operator's command would take for its own, which the job deletes after. Once pins are
    written, one without a pin (or that the job may change) is not the cluster's: replaced by
    the operator's, pinned; one the job keeps the cluster out of is refused, saying why."""
    with Cluster.open(secure) as cluster:
        for job_id in ("a", "b"):
            cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
            cluster.zk.ensure_path(cluster.layout.job_dir(job_id))
        mine = CancelRequest(version=None, requested=utc_moment(), by="a", reason="mine")
        stop = StopRequest(version=None, requested=utc_moment(), by="a", reason="mine")
        squat(secure, "a", "cancel", mine.to_bytes(), child=False)
        squat(secure, "a", "stop", stop.to_bytes(), child=False)
        assert cancel(cluster, "a", reason="operator").reason == "operator"
        assert StopStore(cluster).request("a", reason="operator").reason == "operator"
        with as_job(secure, "a") as job:
            for path in (cluster.layout.cancel("a"), cluster.layout.stop("a")):
                assert job.exists(pin_of(path)) is not None
                with pytest.raises(NotEmptyError):
                    job.delete(path)
        shown = read_snapshot(cluster.zk, cluster.layout, "a")
        assert shown.cancel is not None and shown.cancel.reason == "operator"
        # with a child of its own under an ACL that keeps the cluster out: refused, untouched
        squat(secure, "b", "cancel", mine.to_bytes(), child=True)
        with pytest.raises(WrongState, match="made by its own job"):
            cancel(cluster, "b", reason="operator")
        assert cluster.zk.get(cluster.layout.cancel("b"))[0] == mine.to_bytes()
