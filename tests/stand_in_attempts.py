"""Drivers played by a test (stand-ins): an attempt's standing without a driver (its job's
status at STARTING and its ``running`` node, in a session of its own), and ``ctx.artifacts``
as a driver builds it; for the tests of artifacts and of outputs, which are written by attempts.
The ``attempts`` fixture (tests/conftest.py) ends every stand-in a test started."""

from __future__ import annotations

import threading
from collections.abc import Callable

from recovery.driver.artifact_registry import JobArtifacts
from tests import jobs
from zkstore.cluster import Cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_records import JobStatus, RunningInfo
from zkstore.records.job_states import STARTING
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.zk import ZooKeeper


class Attempt:
    """A driver's standing without a driver: the job's status at STARTING ``attempt`` and its
    ``running`` node, held in a session of its own (:meth:`end` is the driver dying)."""

    def __init__(self, cluster: Cluster, zk: ZooKeeper, job_id: str, attempt: int = 1) -> None:
        layout = cluster.layout
        if cluster.jobs.handles.exists(job_id) is None:
            cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.noop))
        current = cluster.state.status(job_id)
        status = cluster.state.put_status(
            job_id,
            JobStatus(version=None, state=STARTING, attempt=attempt, updated=parse_time(utc_now())),
            expected_version=current.version if current is not None else None,
        )
        assert status.version is not None
        self.status_version = status.version
        self.attempt = attempt
        self.zk = zk  # a stand-in's session (tests/conftest.py stand_in_session)
        info = RunningInfo(
            version=None, attempt=attempt, host="h", pid=1, started=parse_time(utc_now())
        )
        self.zk.create(layout.running(job_id), info.to_bytes(), ephemeral=True)
        self.fence = Fence.check(layout.status(job_id), status.version) + Fence.check(
            layout.running(job_id), 0
        )

    def end(self) -> None:
        self.zk.stop()


class Attempts(list[Attempt]):
    """The stand-in attempts of a test, each in a stand-in session of its own."""

    def __init__(self, open_session: Callable[[], ZooKeeper]) -> None:
        super().__init__()
        self.open_session = open_session


def start(cluster: Cluster, attempts: Attempts, job_id: str, attempt: int = 1) -> Attempt:
    attempts.append(Attempt(cluster, attempts.open_session(), job_id, attempt))
    return attempts[-1]


def ctx_artifacts(cluster: Cluster, job_id: str, attempt: int = 1) -> JobArtifacts:
    """``ctx.artifacts`` of a job's attempt, as a driver builds it (fenced on the job's records
    existing: these tests are about places, not attempts)."""
    cluster.zk.ensure_path(cluster.layout.job_dir(job_id))
    return JobArtifacts(
        cluster.artifacts(job_id),
        attempt=attempt,
        fence=Fence.check(cluster.layout.job_dir(job_id)),
        cancelled=threading.Event(),
    )
