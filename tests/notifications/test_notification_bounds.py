"""The notification sender's bounds against the real ZooKeeper and real (hostile) receivers on
loopback (recovery.leader.courier, recovery.leader.notifier): an answer's body is not read, a
receiver that never answers holds up its own events only, a destination that is not allowed is
dropped at send time (an entry planted in the outbox), and the error stored for a failed try
says its class, never the receiver's words."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from recovery.leader.notifier import NotificationSender, SenderSettings
from tests.helpers import wait_for
from tests.servers import HostileReceiver, NotificationReceiver
from zkstore.cluster import Cluster
from zkstore.dev.embedded import free_port
from zkstore.errors import NotLeader
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.outbox import ATTEMPT_FAILED, SUCCEEDED, Event, Outbox, notification_ops
from zkstore.lifecycle.retry_backoff import Backoff
from zkstore.records.strict import utc_moment
from zkstore.zookeeper.ops import Fence

pytestmark = pytest.mark.integration

LOOPBACK = Destinations.parse("127.0.0.1")
FAST = SenderSettings(deadline=2.0, backoff=Backoff(0.05, 0.2, jitter=0.2), poll=0.5)
#: a try answered at once takes milliseconds, a timed-out one the deadline: at most this long
BOUND = 20 * (FAST.deadline + FAST.backoff.max_delay)


@pytest.fixture
def outbox(cluster: Cluster) -> Outbox:
    found = Outbox(cluster.zk, cluster.layout)
    found.ensure()
    return found


@pytest.fixture
def fence(cluster: Cluster) -> Fence:
    node = cluster.zk.create(f"{cluster.layout.election}/n_", ephemeral=True, sequence=True)
    return Fence.check(node, error=NotLeader, description="no longer the leader")


def record(cluster: Cluster, fence: Fence, job: str, count: int, url: str) -> list[str]:
    """``count`` events of ``job`` to ``url``, as the leader writes them; their keys."""
    found = [Event(job, n, ATTEMPT_FAILED, utc_moment()) for n in range(1, count + 1)]
    cluster.zk.commit(notification_ops(cluster.layout, found, [url]), fence=fence)
    return [e.key for e in found]


@pytest.fixture
def good() -> Iterator[NotificationReceiver]:
    server = NotificationReceiver().start()
    yield server
    server.stop()


def test_a_huge_answer_is_not_read(
    cluster: Cluster, fence: Fence, outbox: Outbox, good: NotificationReceiver
) -> None:
    """A receiver answering 200 with a 128 MB body: the sender takes the status line and
    closes; what the receiver got to send is what the socket buffers held, not the body."""
    huge = HostileReceiver("huge").start()
    try:
        record(cluster, fence, "big", 1, huge.url())
        done = NotificationSender(
            outbox, fence=fence, settings=FAST, destinations=LOOPBACK
        ).run_once()
        assert done.delivered == 1  # a 2xx is a 2xx, whatever follows it
        assert not outbox.pending()[0]
        # the receiver's writes failed once the sender closed: what it took is all it takes
        wait_for(lambda: huge.finished == 1, timeout=BOUND, what="the receiver cut off")
        assert huge.sent < huge.huge // 8, f"{huge.sent} of {huge.huge} bytes were taken"
    finally:
        huge.stop()


def test_a_receiver_that_never_answers_holds_up_only_its_own_events(
    cluster: Cluster, fence: Fence, outbox: Outbox, good: NotificationReceiver
) -> None:
    silent = HostileReceiver("silent").start()
    patient = SenderSettings(deadline=120.0, backoff=FAST.backoff, poll=0.5, per_host=2)
    sender = NotificationSender(outbox, fence=fence, settings=patient, destinations=LOOPBACK)
    try:
        record(cluster, fence, "stuck", 5, silent.url())
        sender.start()
        wait_for(lambda: silent.held == patient.per_host, timeout=BOUND, what="held POSTs")
        keys = record(cluster, fence, "other", 10, good.url())
        # while the silent receiver holds its two POSTs (and three more wait behind them):
        wait_for(
            lambda: set(good.snapshot()[1]) == set(keys),
            timeout=BOUND,
            what="the other receiver's events delivered",
        )
        assert silent.held == patient.per_host and silent.requests == patient.per_host
        silent.release.set()
        wait_for(lambda: not outbox.pending()[0], timeout=BOUND, what="the outbox drained")
    finally:
        sender.stop(timeout=patient.deadline)
        silent.stop()


def test_a_destination_that_is_not_allowed_is_dropped_at_send_time(
    cluster: Cluster,
    fence: Fence,
    outbox: Outbox,
    good: NotificationReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Entries a ZooKeeper writer planted: one to a loopback address the rule does not allow,
    one to a name that resolves to loopback; a global-only sender POSTs neither."""
    port = good.url().split(":")[2].split("/")[0]
    record(cluster, fence, "by-address", 1, f"http://127.0.0.1:{port}/hook/SECRET")
    record(cluster, fence, "by-name", 1, f"http://localhost:{port}/hook/SECRET")
    sender = NotificationSender(outbox, fence=fence, settings=FAST)  # global addresses only
    with caplog.at_level(logging.ERROR):
        done = sender.run_once()
    assert done.dropped == 2 and not outbox.pending()[0]
    assert good.snapshot()[0] == []  # nothing reached the receiver
    assert "refused destination (loopback address)" in caplog.text
    assert "by-address:1:ATTEMPT_FAILED" in caplog.text and "by-name:1" in caplog.text
    assert "SECRET" not in caplog.text


def test_a_failed_try_stores_the_class_of_its_failure_not_the_answer(
    cluster: Cluster, fence: Fence, outbox: Outbox
) -> None:
    erring = HostileReceiver("error").start()
    silent = HostileReceiver("silent").start()
    try:
        closed = f"http://127.0.0.1:{free_port()}/hook"  # nobody listens there
        record(cluster, fence, "erring", 1, erring.url())
        record(cluster, fence, "closed", 1, closed)
        record(cluster, fence, "silent", 1, silent.url())
        settings = SenderSettings(deadline=1.0, backoff=Backoff(60.0, 60.0, jitter=0.0))
        done = NotificationSender(
            outbox, fence=fence, settings=settings, destinations=LOOPBACK
        ).run_once()
        assert done.failed == 3
        errors = {p.entry.job_id: p.entry.last_error for p in outbox.pending()[0]}
        assert errors["erring"] == "HTTP 500"
        assert errors["closed"] == "connection refused"
        assert errors["silent"] is not None and errors["silent"].startswith("timeout")
        assert "SECRET-BODY" not in str(errors)
    finally:
        erring.stop()
        silent.stop()


def test_an_outcome_is_delivered_beside_a_flood_of_another_jobs_events(
    cluster: Cluster, fence: Fence, outbox: Outbox, good: NotificationReceiver
) -> None:
    """Many entries of one job to a silent receiver do not hold up another job's outcome to
    another receiver, in one round."""
    silent = HostileReceiver("silent").start()
    try:
        record(cluster, fence, "flood", 6, silent.url())
        outcome = Event("quiet", 1, SUCCEEDED, utc_moment())
        cluster.zk.commit(notification_ops(cluster.layout, [outcome], [good.url()]), fence=fence)
        settings = SenderSettings(deadline=1.0, backoff=Backoff(60.0, 60.0, jitter=0.0))
        sender = NotificationSender(outbox, fence=fence, settings=settings, destinations=LOOPBACK)
        done = sender.run_once()
        assert good.snapshot()[1] == {outcome.key: 1}
        assert done.delivered == 1 and done.failed == 6
    finally:
        silent.release.set()
        silent.stop()
