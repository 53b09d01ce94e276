"""The notifier reads what changed (issue 60.4): a delivery costs the leader the same ZooKeeper
requests whether 10 or 2,000 entries wait in the outbox (before, each round read every entry
again: a backlog of undelivered events made every later delivery as dear as the backlog)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recovery.leader.notifier import NotificationSender
from tests.helpers import requests_sent
from tests.notification_leaders import FAST, LOOPBACK, lead, record
from tests.servers import NotificationReceiver
from zkstore.cluster import Cluster
from zkstore.lifecycle.lifecycle_records import NotificationEntry
from zkstore.lifecycle.outbox import ATTEMPT_FAILED, SUCCEEDED, Event, Outbox, entry_name
from zkstore.records.strict import parse_time, utc_in, utc_now
from zkstore.zookeeper.ops import Create, Fence

pytestmark = pytest.mark.integration


@pytest.fixture
def receiver() -> Iterator[NotificationReceiver]:
    server = NotificationReceiver().start()
    yield server
    server.stop()


def backlog(cluster: Cluster, fence: Fence, first: int, count: int, url: str) -> None:
    """``count`` entries that failed a try and wait an hour for the next (a receiver down)."""
    later, parent = utc_in(3600), cluster.layout.notifications
    transactions = []
    for n in range(first, first + count):
        event = Event(f"backlog-{n}", 1, ATTEMPT_FAILED, utc_now())
        entry = NotificationEntry(
            version=None,
            key=event.key,
            job_id=event.job_id,
            attempt=event.attempt,
            state=event.state,
            at=event.at,
            url=url,
            created=event.at,
            tries=1,
            next_try=parse_time(later),
            last_error="HTTP 500",
        )
        name = entry_name(event, url, "backlog")
        transactions.append([Create(f"{parent}/{name}", entry.to_bytes())])
    assert not any(cluster.zk.commit_many(transactions, fence=fence))


def requests_per_delivery(
    cluster: Cluster, fence: Fence, receiver: NotificationReceiver, waiting: int, tag: str
) -> list[list[str]]:
    """A new sender's first round (it reads the whole outbox once), then three deliveries of
    one new event each: the requests each of those rounds sent."""
    sender = NotificationSender(
        Outbox(cluster.zk, cluster.layout), fence=fence, settings=FAST, destinations=LOOPBACK
    )
    assert sender.run_once().waiting == waiting
    rounds = []
    for attempt in (1, 2, 3):
        record(cluster, fence, [Event(tag, attempt, SUCCEEDED, utc_now())], [receiver.url()])
        with requests_sent(cluster.zk) as sent:
            done = sender.run_once()
        assert (done.delivered, done.waiting) == (1, waiting), done
        rounds.append(sent)
    return rounds


def test_a_delivery_costs_the_same_requests_behind_10_or_2000_waiting_entries(
    cluster: Cluster, receiver: NotificationReceiver
) -> None:
    fence, _ = lead(cluster)
    Outbox(cluster.zk, cluster.layout).ensure()
    down = "http://127.0.0.1:9/down"  # never tried within the test: their next try is later
    backlog(cluster, fence, 0, 10, down)
    few = requests_per_delivery(cluster, fence, receiver, 10, "few")
    backlog(cluster, fence, 10, 1990, down)
    many = requests_per_delivery(cluster, fence, receiver, 2000, "many")
    assert many == few, (many, few)
    for sent in many:
        # the listing, the new entry, its removal: nothing read of the 2,000 that wait
        assert sent.count("GetData") == 1, sent
        assert len(sent) <= 4, sent
    assert set(receiver.snapshot()[1]) == {
        f"{t}:{a}:SUCCEEDED" for t in ("few", "many") for a in (1, 2, 3)
    }
