"""What the snapshot reads of a job's lifecycle, in the real ZooKeeper: the stop node of every
job, and the leader's ``end`` request only where it can matter: a placed attempt with a stop, a
limit, or no driver holding ``running`` (where the leader ends a driver that lost its session;
an unread one would make the leader write it again, and again)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.cli import show
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.snapshot import read_snapshot
from zkstore.jobs.stops import EndRequest, StopRequest
from zkstore.records.job_records import CancelRequest, JobStatus, RunningInfo
from zkstore.records.job_states import STARTING, STOPPING, STUCK
from zkstore.records.strict import parse_time, time_text, to_millisecond, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def job(ctx: object) -> None:
    return None


def placed(cluster: Cluster, job_id: str, **lifecycle: float) -> None:
    cluster.jobs.submit(JobDefinition.for_function(job_id, job, lifecycle=lifecycle))
    cluster.zk.ensure_path(cluster.layout.job_dir(job_id))
    status = JobStatus(version=None, state=STARTING, attempt=1, updated=parse_time(utc_now()))
    cluster.zk.create(cluster.layout.status(job_id), status.to_bytes())
    end = EndRequest(
        version=None, attempt=1, reason=STUCK, requested=parse_time(utc_now()), grace_ms=0
    )
    cluster.zk.create(cluster.layout.end(job_id), end.to_bytes())


def test_the_end_request_is_read_where_the_leader_may_have_written_it(
    cluster: Cluster, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    placed(cluster, "lost")
    found = read_snapshot(cluster.zk, cluster.layout, "lost")
    assert found.end is not None and found.end.reason == STUCK, "no running node: read"
    placed(cluster, "limited", timeout=60)
    driver = RunningInfo(version=None, attempt=1, host="h", pid=1, started=parse_time(utc_now()))
    stand_in = stand_in_session()
    stand_in.create(cluster.layout.running("limited"), driver.to_bytes(), ephemeral=True)
    assert read_snapshot(cluster.zk, cluster.layout, "limited").end is not None
    placed(cluster, "plain")
    stand_in.create(cluster.layout.running("plain"), driver.to_bytes(), ephemeral=True)
    plain = read_snapshot(cluster.zk, cluster.layout, "plain")
    assert plain.end is None and not plain.end_read, "a running job without limits: not read"


def test_a_stop_request_makes_the_job_stopping(cluster: Cluster) -> None:
    placed(cluster, "stopping")
    stop = StopRequest(version=None, requested=parse_time(utc_now()), by="me")
    cluster.zk.create(cluster.layout.stop("stopping"), stop.to_bytes())
    found = read_snapshot(cluster.zk, cluster.layout, "stopping")
    assert found.stop is not None and found.state == STOPPING


def test_a_cancel_is_dated_by_zookeeper_whatever_its_writer_says(cluster: Cluster) -> None:
    """The leader counts a cancel's grace from ``cancel_made``, the node's ``ctime``: a request
    its writer dated an hour ahead (or a job planted so) is made when ZooKeeper made it."""
    placed(cluster, "dated")
    ahead = CancelRequest(version=None, requested=datetime.now(UTC) + timedelta(hours=1), by="u")
    cluster.zk.create(cluster.layout.cancel("dated"), ahead.to_bytes())
    _, stat = cluster.zk.get(cluster.layout.cancel("dated"))
    found = read_snapshot(cluster.zk, cluster.layout, "dated")
    assert found.cancel is not None and found.cancel.requested == to_millisecond(ahead.requested)
    assert found.cancel_made == datetime.fromtimestamp(stat.ctime / 1000, UTC)
    assert abs((found.cancel_made - datetime.now(UTC)).total_seconds()) < 60, "not the hour"
    placed(cluster, "asked-nothing")
    nothing = read_snapshot(cluster.zk, cluster.layout, "asked-nothing")
    assert (nothing.cancel_made, nothing.stop_made) == (None, None)
    behind = StopRequest(version=None, requested=datetime.now(UTC) - timedelta(hours=1), by="u")
    cluster.zk.create(cluster.layout.stop("dated"), behind.to_bytes())
    _, stat = cluster.zk.get(cluster.layout.stop("dated"))
    stopped = read_snapshot(cluster.zk, cluster.layout, "dated")
    assert stopped.stop_made == datetime.fromtimestamp(stat.ctime / 1000, UTC)


def test_a_cancel_whose_planted_node_goes_before_it_is_read_is_written(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's code planted a ``cancel`` node and deletes it between the command's failed
    create and its read of the node: the command writes its own, and never answers with a
    request that is not there (it answered "requested" with nothing written)."""
    placed(cluster, "planted")
    path = cluster.layout.cancel("planted")
    cluster.zk.create(path, b"{}")
    read = cluster.state.cancel_request

    def deleted_first(job_id: str) -> CancelRequest | None:
        monkeypatch.setattr(cluster.state, "cancel_request", read)  # once: the job's one delete
        cluster.zk.delete(path)
        return read(job_id)

    monkeypatch.setattr(cluster.state, "cancel_request", deleted_first)
    asked = cluster.state.request_cancel("planted", by="operator", reason="runaway")
    stored = cluster.state.cancel_request("planted")
    assert stored is not None and (stored.by, stored.reason) == ("operator", "runaway")
    assert (asked.by, asked.reason) == ("operator", "runaway")
    made = datetime.fromtimestamp(cluster.zk.get(path)[1].ctime / 1000, UTC)
    assert asked.requested == made, "the answer is dated as ZooKeeper made the node it wrote"


def test_jobs_show_dates_a_cancel_and_a_stop_as_zookeeper_made_them(
    cluster: Cluster, config: StoreConfig
) -> None:
    """What people read of a cancel and a stop (``jobs show``, the installed script) is when
    ZooKeeper made the node, as the leader counts from it: not a writer's clock an hour ahead
    or behind (would fail before: the writer's own date was shown)."""
    placed(cluster, "skewed")
    ahead = CancelRequest(version=None, requested=datetime.now(UTC) + timedelta(hours=1), by="u")
    cluster.zk.create(cluster.layout.cancel("skewed"), ahead.to_bytes())
    behind = StopRequest(version=None, requested=datetime.now(UTC) - timedelta(hours=1), by="u")
    cluster.zk.create(cluster.layout.stop("skewed"), behind.to_bytes())
    made = {
        kind: time_text(datetime.fromtimestamp(cluster.zk.get(path)[1].ctime / 1000, UTC))
        for kind, path in (
            ("cancel", cluster.layout.cancel("skewed")),
            ("stop", cluster.layout.stop("skewed")),
        )
    }
    shown = show(config, "skewed")
    assert shown["cancel"]["requested"] == shown["cancel_requested"] == made["cancel"], shown
    assert shown["stop"]["requested"] == made["stop"], shown
    assert shown["cancel"]["by"] == shown["stop"]["by"] == "u", "the rest is the writer's"
