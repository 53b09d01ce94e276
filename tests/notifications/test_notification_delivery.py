"""Notifications end to end below the daemon: events written in fenced "leader" transactions
into the outbox of the real ZooKeeper, delivered by the sender (recovery.leader.notifier)
to a real HTTP receiver on 127.0.0.1 that fails some requests. Every event is delivered,
duplicates carry the same key, the next leader delivers what the previous one left (a crash
between the 2xx and the delete included), a deposed sender writes nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from recovery.leader.notifier import NotificationSender, SenderSettings
from tests.crash_cluster import CRASHED
from tests.helpers import run_child, wait_for
from tests.notification_leaders import FAST, LOOPBACK, lead, record
from tests.servers import NotificationReceiver
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import FenceLost, NotLeader
from zkstore.lifecycle.outbox import (
    ATTEMPT_FAILED,
    ATTEMPT_LOST,
    SUCCEEDED,
    Event,
    Outbox,
)
from zkstore.lifecycle.retry_backoff import Backoff
from zkstore.records.strict import utc_moment

pytestmark = pytest.mark.integration

#: A round against a receiver that answers at once takes milliseconds; one that times out,
#: the deadline. Conditions wait for this many rounds at most.
ROUNDS = 20
BOUND = ROUNDS * (FAST.deadline + FAST.backoff.max_delay)


@pytest.fixture
def receiver() -> Iterator[NotificationReceiver]:
    server = NotificationReceiver(fail=lambda n, key: n < int(key.split(":")[1]) % 3).start()
    yield server
    server.stop()


def events(count: int, job: str = "nightly") -> list[Event]:
    states = (ATTEMPT_FAILED, ATTEMPT_LOST)
    found = [Event(job, n, states[n % 2], utc_moment(), reason=f"e{n}") for n in range(1, count)]
    return [*found, Event(job, count, SUCCEEDED, utc_moment())]


def drain(sender: NotificationSender, outbox: Outbox) -> None:
    def empty() -> bool:
        sender.run_once()
        return not outbox.pending()[0]

    wait_for(empty, timeout=BOUND, interval=0.05, what="an empty outbox")


def test_every_event_is_delivered_and_retries_carry_the_same_key(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    sent = events(30)
    for event in sent:
        record(cluster, fence, [event], [receiver.url()])
    drain(NotificationSender(outbox, fence=fence, settings=FAST, destinations=LOOPBACK), outbox)
    requests, delivered = receiver.snapshot()
    assert set(delivered) == {e.key for e in sent}
    assert all(count == 1 for count in delivered.values())
    assert len(requests) == 30 + sum(n % 3 for n in range(1, 31))  # the failed tries
    for key, body in requests:
        assert body["key"] == key  # the header and the body agree, on every try
    retried = [body["delivery"] for key, body in requests if key == sent[1].key]
    assert retried == [1, 2, 3]


def test_a_second_leader_delivers_what_the_first_left_with_its_backoff(
    cluster: Cluster, config: StoreConfig
) -> None:
    down = NotificationReceiver(fail=lambda n, key: True).start()
    up = NotificationReceiver().start()
    try:
        fence, node = lead(cluster)
        outbox = Outbox(cluster.zk, cluster.layout)
        outbox.ensure()
        sent = events(10)
        for event in sent:
            record(cluster, fence, [event], [down.url(), up.url()])
        patient = SenderSettings(deadline=2.0, backoff=Backoff(60.0, 120.0, jitter=0.2))
        first = NotificationSender(outbox, fence=fence, settings=patient, destinations=LOOPBACK)
        done = first.run_once()
        assert (done.delivered, done.failed) == (10, 10)
        left = outbox.pending()[0]
        assert [p.entry.tries for p in left] == [1] * 10
        assert all(p.entry.last_error == "HTTP 500" for p in left)
        cluster.zk.delete(node)  # the first leader is gone (its session, its contender node)
        later = datetime.now(UTC) + timedelta(minutes=5)
        with pytest.raises(NotLeader):
            first.run_once(now=later)
        with Cluster.open(config) as other:
            fence2, _ = lead(other)
            second = NotificationSender(
                Outbox(other.zk, other.layout),
                fence=fence2,
                settings=patient,
                destinations=LOOPBACK,
            )
            # Not before the backoff the first leader recorded: a new leader does not hammer.
            tried = len(down.snapshot()[0])
            assert second.run_once().waiting == 10
            assert len(down.snapshot()[0]) == tried
            down.fail = lambda n, key: False  # the receiver comes back
            done = second.run_once(now=later)
            assert done.delivered == 10 and not outbox.pending()[0]
        assert set(up.snapshot()[1]) == set(down.snapshot()[1]) == {e.key for e in sent}
    finally:
        down.stop()
        up.stop()


def test_a_crash_between_the_2xx_and_the_delete_delivers_again_with_the_same_key(
    cluster: Cluster, config: StoreConfig, receiver: NotificationReceiver
) -> None:
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    receiver.fail = lambda n, key: False
    sent = events(5)
    for event in sent:
        record(cluster, fence, [event], [receiver.url()])
    spec = {"config": config.to_json(), "op": "send", "job": "-", "step": "notify:posted"}
    assert run_child("tests.crash_lifecycle", spec) == CRASHED
    # its other lanes' POSTs in flight at the crash are read after it: posted before it too
    wait_for(receiver.idle, timeout=BOUND, what="the crashed sender's POSTs answered")
    posted = {key for key, _ in receiver.snapshot()[0]}
    assert posted  # answered 2xx (the first POST of each lane at least), and nothing deleted
    assert len(outbox.pending()[0]) == 5
    fence2, _ = lead(cluster)  # the next leader
    drain(NotificationSender(outbox, fence=fence2, settings=FAST, destinations=LOOPBACK), outbox)
    requests, delivered = receiver.snapshot()
    assert sorted(delivered) == sorted(e.key for e in sent)
    # at least once: twice those posted before the crash, each time with the same key
    assert {key for key, count in delivered.items() if count == 2} == posted
    assert {key for key, _ in requests} == {e.key for e in sent}


def test_a_deposed_leader_records_no_event_and_its_sender_stops(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    fence, node = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    record(cluster, fence, events(1, job="a"), [receiver.url()])
    cluster.zk.delete(node)
    with pytest.raises(NotLeader):
        record(cluster, fence, events(1, job="b"), [receiver.url()])
    assert [p.entry.job_id for p in outbox.pending()[0]] == ["a"]  # b's change: no event either
    lost: list[FenceLost] = []
    sender = NotificationSender(
        outbox, fence=fence, settings=FAST, destinations=LOOPBACK, on_fence_lost=lost.append
    )
    sender.start()
    wait_for(lambda: not sender.running, timeout=BOUND, what="the deposed sender to stop")
    sender.stop()
    assert isinstance(sender.fence_lost, NotLeader) and lost == [sender.fence_lost]
    assert len(outbox.pending()[0]) == 1  # posted maybe, never deleted by a deposed leader


def test_the_thread_delivers_new_events_promptly(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    receiver.fail = lambda n, key: False
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    sender = NotificationSender(outbox, fence=fence, settings=FAST, destinations=LOOPBACK).start()
    try:
        latencies = []
        for n in range(1, 11):
            event = Event("live", n, ATTEMPT_FAILED, utc_moment())
            started = time.monotonic()
            record(cluster, fence, [event], [receiver.url()])
            wait_for(lambda e=event: receiver.snapshot()[1][e.key] == 1, timeout=BOUND)  # type: ignore[misc]
            latencies.append(time.monotonic() - started)
        # woken by the watch on the outbox, not by its poll of FAST.poll seconds
        assert sorted(latencies)[len(latencies) // 2] < FAST.poll
        wait_for(lambda: not outbox.pending()[0], timeout=BOUND, what="an empty outbox")
    finally:
        sender.stop(timeout=FAST.deadline * 2)
    assert not sender.running


def test_the_thread_tries_a_refused_event_again_after_its_backoff_not_its_poll(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    """A refused POST is tried again when its backoff says, though nothing else happens: the
    round that failed it knows its next try (a sender that forgot it slept for its whole poll,
    30 s by default, while its log said "next in 0.9 s")."""
    receiver.fail = lambda n, key: n == 0
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    settings = SenderSettings(deadline=2.0, backoff=FAST.backoff, poll=3600.0)
    sender = NotificationSender(
        outbox, fence=fence, settings=settings, destinations=LOOPBACK
    ).start()
    try:
        event = Event("refused", 1, SUCCEEDED, utc_moment())
        record(cluster, fence, [event], [receiver.url()])
        wait_for(
            lambda: receiver.snapshot()[1][event.key] == 1,
            timeout=BOUND,
            what="the second try's delivery",
        )
    finally:
        sender.stop(timeout=settings.deadline * 2)
    assert [key for key, _ in receiver.snapshot()[0]] == [event.key, event.key]


def test_a_round_says_when_its_refused_events_are_due_again(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    receiver.fail = lambda n, key: n == 0
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    record(cluster, fence, events(2), [receiver.url()])
    sender = NotificationSender(outbox, fence=fence, settings=FAST, destinations=LOOPBACK)
    now = datetime.now(UTC)
    done = sender.run_once(now)
    assert (done.failed, done.waiting) == (2, 0)
    assert done.next_due is not None
    assert now < done.next_due <= now + timedelta(seconds=FAST.backoff.max_delay)
    pending, _ = outbox.pending()
    assert done.next_due == min(p.entry.next_try for p in pending if p.entry.next_try)


def test_the_thread_survives_a_round_that_fails(
    cluster: Cluster, receiver: NotificationReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.fail = lambda n, key: False
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    broken = {"rounds": 1}

    def breaks_once(step: str) -> None:
        if step == "notify:posted" and broken["rounds"]:
            broken["rounds"] -= 1
            raise RuntimeError("a bug in a round")

    sent = events(3)
    record(cluster, fence, sent, [receiver.url()])
    settings = SenderSettings(deadline=2.0, backoff=FAST.backoff, poll=0.5, error_pause=0.2)
    sender = NotificationSender(
        outbox, fence=fence, settings=settings, destinations=LOOPBACK, on_step=breaks_once
    )
    with caplog.at_level(logging.ERROR):
        sender.start()
        try:
            wait_for(lambda: not outbox.pending()[0], timeout=BOUND, what="an empty outbox")
            assert sender.running
        finally:
            sender.stop(timeout=settings.deadline * 2)
    assert "round failed; trying again" in caplog.text
    # the one whose settling broke was posted again; the others once
    assert sorted(receiver.snapshot()[1].values()) == [1, 1, 2]
    assert set(receiver.snapshot()[1]) == {e.key for e in sent}


def test_a_stalled_receiver_costs_one_deadline_and_blocks_no_other_event(
    cluster: Cluster,
) -> None:
    stalled_key = "slow:1:ATTEMPT_FAILED"
    receiver = NotificationReceiver(stalled=frozenset({stalled_key}), stall=10.0).start()
    try:
        fence, _ = lead(cluster)
        outbox = Outbox(cluster.zk, cluster.layout)
        outbox.ensure()
        record(cluster, fence, [Event("slow", 1, ATTEMPT_FAILED, utc_moment())], [receiver.url()])
        record(cluster, fence, events(4, job="fast"), [receiver.url()])
        settings = SenderSettings(deadline=0.5, backoff=FAST.backoff)
        started = time.monotonic()
        done = NotificationSender(
            outbox, fence=fence, settings=settings, destinations=LOOPBACK
        ).run_once()
        took = time.monotonic() - started
        assert (done.delivered, done.failed) == (4, 1)
        assert took < settings.deadline + 3.0  # one deadline, not the receiver's 10 s
        (left,) = outbox.pending()[0]
        assert left.entry.key == stalled_key and left.entry.tries == 1
        assert left.entry.last_error is not None and "no answer within" in left.entry.last_error
    finally:
        receiver.stop()


def test_undeliverable_events_are_dropped_after_the_retention_at_error(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = NotificationReceiver(fail=lambda n, key: True).start()
    try:
        fence, _ = lead(cluster)
        outbox = Outbox(cluster.zk, cluster.layout)
        outbox.ensure()
        record(cluster, fence, events(2), [receiver.url("/hook/SECRET-token")])
        settings = SenderSettings(deadline=2.0, retention=1.0, backoff=FAST.backoff)
        sender = NotificationSender(outbox, fence=fence, settings=settings, destinations=LOOPBACK)
        with caplog.at_level(logging.INFO):
            wait_for(
                lambda: sender.run_once().dropped == 0 and not outbox.pending()[0],
                timeout=BOUND,
                what="the undeliverable events dropped",
            )
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 2
        assert "nightly:1:ATTEMPT_LOST" in caplog.text and "HTTP 500" in caplog.text
        assert "SECRET" not in caplog.text  # the URL's path is never logged
        assert len(receiver.snapshot()[0]) >= 2
    finally:
        receiver.stop()


def test_a_full_outbox_is_never_emptied_by_dropping_entries(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    """However many entries wait, the sender drops none but by age (the bound is kept when
    events are written: tests/notifications/test_notify_bounds.py)."""
    receiver.fail = lambda n, key: True
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    for event in events(8):
        record(cluster, fence, [event], [receiver.url()])
    sender = NotificationSender(outbox, fence=fence, settings=FAST, destinations=LOOPBACK)
    done = sender.run_once()
    assert (done.dropped, done.failed) == (0, 8)
    assert len(outbox.pending()[0]) == 8


def test_a_node_that_is_no_entry_is_left_alone(
    cluster: Cluster, receiver: NotificationReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.fail = lambda n, key: False
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    cluster.zk.create(f"{outbox.path}/planted", b"\xff garbage")
    record(cluster, fence, events(1), [receiver.url()])
    with caplog.at_level(logging.WARNING):
        done = NotificationSender(
            outbox, fence=fence, settings=FAST, destinations=LOOPBACK
        ).run_once()
    assert done.delivered == 1
    assert cluster.zk.exists(f"{outbox.path}/planted") is not None
    assert "planted is not a notification entry" in caplog.text


def test_delivery_throughput(cluster: Cluster, receiver: NotificationReceiver) -> None:
    """What one round costs: 200 events to one receiver (measured, printed for the report)."""
    receiver.fail = lambda n, key: False
    fence, _ = lead(cluster)
    outbox = Outbox(cluster.zk, cluster.layout)
    outbox.ensure()
    # distinct ids: six random hex digits for 200 jobs collided about once in 840 runs (an
    # entry of the same name twice: HandleExists)
    sent = [Event(f"job-{n:03d}", 1, SUCCEEDED, utc_moment()) for n in range(200)]
    started = time.monotonic()
    for chunk in range(0, 200, 20):
        record(cluster, fence, sent[chunk : chunk + 20], [receiver.url()])
    recorded = time.monotonic() - started
    sizes = [len(p.entry.to_bytes()) for p in outbox.pending()[0]]
    started = time.monotonic()
    drain(NotificationSender(outbox, fence=fence, settings=FAST, destinations=LOOPBACK), outbox)
    took = time.monotonic() - started
    print(
        f"\n200 events: recorded in {recorded:.2f} s (10 transactions), delivered in {took:.2f} s"
        f" ({200 / took:.0f}/s); entry {min(sizes)}-{max(sizes)} bytes;"
        f" at {datetime.now(UTC):%H:%M:%S}"
    )
    assert set(receiver.snapshot()[1]) == {e.key for e in sent}
