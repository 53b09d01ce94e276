"""A deposed leader deletes nothing (invariants 3 and 10): its session expired, kazoo opened a
new one by itself, and the leader, not knowing yet, goes on with its duties.

The leader here is the real one (:class:`recovery.leader.LeaderProcess` over its own session,
fenced on its contender node), run in this process so that the test can depose it between two
steps: a job's cleanup (records, checkpoints, definition, artifacts in the storage root and in
an extra root, an interrupted release, stray objects, orphan payloads), the creation of a new
job's records, a retention pass over driver logs. Everything in ZooKeeper and in storage is
compared before and after, byte for byte; then a successor that does lead runs the same duties
and removes what it should (so the scenarios do exercise every delete).

On d1eeb4d the deposed leader deleted the interrupted release's data (a RELEASING record's data
went before any fenced write), the objects a job left under its artifact prefix (the sweep) and
a job's records (an unfenced ``delete_tree``), created the new job's directory (an unfenced
``create_many``) and removed the logs (before its first fenced write).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from recovery.leader.election import LeaderElection
from recovery.leader.grant import LeaderProcess
from recovery.leader.loop import Leadership, Loop
from recovery.leader.retention import Retention
from recovery.settings import DaemonSettings
from tests.helpers import expire_session, leader_turn
from zkstore.admin.acl import walk
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.errors import NotLeader
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.job_artifacts import JOB, RELEASING
from zkstore.jobs.logs import JobLogs
from zkstore.records.job_states import CLEAN, FAILED
from zkstore.zookeeper.ops import SetData
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def noop(ctx: Any) -> None:
    return None


@pytest.fixture
def scoped(config: StoreConfig, tmp_path: Path) -> StoreConfig:
    (tmp_path / "scratch").mkdir()
    return config.with_changes(artifact_roots=(f"file://{tmp_path / 'scratch'}",))


def write(path: str, data: bytes = b"data") -> None:
    local = path.removeprefix("file://")
    os.makedirs(os.path.dirname(local), exist_ok=True)
    Path(local).write_bytes(data)


def finished_job(config: StoreConfig, job_id: str, scratch: Path) -> None:
    """A job that ran and failed, with something of every kind the cleanup removes."""
    with Cluster.open(config) as writer:  # its own session: gone (and its locks) at the end
        writer.jobs.submit(JobDefinition.for_function(job_id, noop))
        writer.checkpoints(job_id).add({"step": 1})
        store = writer.artifacts(job_id)
        staging = store.register("staging", None, scope=JOB, keep=False, attempt=1, fence=None)
        write(f"{staging.uri}/part-0")
        parts = store.register(
            "parts", f"{scratch}/{job_id}/parts", scope=JOB, keep=False, attempt=1, fence=None
        )
        write(f"{parts.uri}/part-0")
        half = store.register("half", None, scope=JOB, keep=False, attempt=1, fence=None)
        write(f"{half.uri}/part-0")
        assert half.version is not None
        path = writer.layout.artifact(job_id, "half")  # a release interrupted after its mark
        writer.zk.commit([SetData(path, replace(half, state=RELEASING).to_bytes(), 0)])
        write(f"{writer.artifact_space.job_prefix(job_id)}/stray/never-registered")
        write(writer.storage.url(f"{writer.storage_layout.definitions(job_id)}/orphan.pkl"))
        JobLogs(writer.storage, writer.storage_layout, job_id).write_chunk(1, 0, b"hello\n")
        writer.results.create_dirty(job_id, FAILED, attempts=1)


def finished_bare(config: StoreConfig, job_id: str) -> None:
    """A job that ended with no artifact record left: only its records, payloads and what it
    wrote under its artifact prefix without registering it."""
    with Cluster.open(config) as writer:
        writer.jobs.submit(JobDefinition.for_function(job_id, noop))
        writer.zk.ensure_path(writer.layout.job_dir(job_id))
        writer.zk.create(writer.layout.cancel(job_id), b"{}")
        write(f"{writer.artifact_space.job_prefix(job_id)}/never-registered")
        writer.results.create_dirty(job_id, FAILED, attempts=1)


def finished_long_ago(config: StoreConfig, job_id: str) -> None:
    """A job cleaned up, whose driver logs are past their retention."""
    with Cluster.open(config) as writer:
        writer.jobs.submit(JobDefinition.for_function(job_id, noop))
        JobLogs(writer.storage, writer.storage_layout, job_id).write_chunk(1, 0, b"bye\n")
        writer.results.create_dirty(job_id, FAILED, attempts=1)
        assert clean_up(writer, job_id, keep_logs=0)


def everything(zk: ZooKeeper, base: str, tmp_path: Path) -> dict[str, bytes]:
    """Every znode under the cluster root and every file (and link) under the test's directory,
    with its data."""
    found = {f"zk:{path}": zk.get(path)[0] for path in walk(zk, base)}
    for directory, dirs, files in os.walk(tmp_path):
        for name in dirs + files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found[f"link:{path}"] = os.readlink(path).encode()
            elif os.path.isfile(path):
                found[f"file:{path}"] = Path(path).read_bytes()
    return found


class Leader:
    """A leader in this process, over a session of its own."""

    def __init__(self, config: StoreConfig, daemon_id: str) -> None:
        self.zk = ZooKeeper.from_config(config).start()
        self.cluster = Cluster(config, zk=self.zk).start()
        self.election = LeaderElection(self.zk, self.cluster.layout, daemon_id, lambda: None)
        self.election.contend()
        self.settings = DaemonSettings(store=config, daemon_id=daemon_id, keep_logs=0.0)

    def leads(self) -> bool:
        return self.election.check()

    def process(self) -> LeaderProcess:
        """A leadership grant's duties, as the daemon builds them."""
        leadership = Leadership(self.election.fence())
        return LeaderProcess(self.cluster, self.settings, leadership, Loop(), self.election)

    def stop(self) -> None:
        self.zk.stop()


@pytest.fixture
def leaders(scoped: StoreConfig) -> Iterator[list[Leader]]:
    made: list[Leader] = []
    yield made
    for leader in made:
        leader.stop()


def test_a_deposed_leader_deletes_and_creates_nothing(
    scoped: StoreConfig, tmp_path: Path, leaders: list[Leader]
) -> None:
    finished_job(scoped, "done", tmp_path / "scratch")
    finished_bare(scoped, "bare")
    finished_long_ago(scoped, "old")
    with Cluster.open(scoped) as writer:
        writer.jobs.submit(JobDefinition.for_function("fresh", noop))  # no records yet
    old = Leader(scoped, "old-leader")
    leaders.append(old)
    assert old.leads()
    duties = [old.process() for _ in range(4)]  # granted before it was deposed
    expire_session(old.zk)  # kazoo reconnected with a new session: the contender node is gone
    assert old.zk.connected and not old.election.owns_node()
    before = everything(old.zk, old.cluster.layout.base, tmp_path)

    for duty, job_id in zip(duties, ("done", "bare"), strict=False):
        duty.reconcile([job_id])  # the cleanup: its first fenced step fails, and it stops
        assert not duty.active, "the leader noticed it lost its leadership"
    with pytest.raises(NotLeader):
        duties[2].reconcile(["fresh"])  # a new job: its directory would be created first
    with pytest.raises(NotLeader):
        Retention(duties[3]).run_pass()  # the logs of "old" are past their retention
    with pytest.raises(NotLeader):
        clean_up(old.cluster, "done", fence=duties[0].fence)
    assert everything(old.zk, old.cluster.layout.base, tmp_path) == before, "nothing changed"

    successor = Leader(scoped, "successor")
    leaders.append(successor)
    assert successor.leads()
    new = successor.process()
    leader_turn(new, ["done", "bare", "fresh"])
    Retention(new).run_pass()
    cluster, layout = successor.cluster, successor.cluster.layout
    result = cluster.results.get("done")
    assert result is not None and result.state == CLEAN
    assert cluster.zk.exists(layout.job_dir("done")) is None
    assert cluster.zk.exists(layout.job_dir("bare")) is None
    assert cluster.zk.exists(layout.job_dir("fresh")) is not None
    left = sorted(
        k.removeprefix(f"file:{tmp_path}/")
        for k in everything(cluster.zk, layout.base, tmp_path)
        if k.startswith("file:") and "/jobs/fresh/" not in k  # a live job's definition
    )
    assert left == [], "the successor removed what the deposed leader left alone"
