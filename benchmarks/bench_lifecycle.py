"""Lifecycle benchmark (issue 26): what the run's lifecycle costs ZooKeeper and the leader.

1. A leader's state change with its notification (the status write plus one outbox entry per
   URL, in one fenced transaction), against the same state change alone: the outbox must ride
   in the write the leader makes anyway (goal: at most 1.5x its time).
2. A driver's heartbeat (a 3-op transaction fenced on its attempt), against a raw kazoo
   ``set`` of the same bytes; and the write load a fleet puts on ZooKeeper at the most one write
   per heartbeat interval (printed).
3. The sender: events recorded, then delivered to a local HTTP receiver (POST, fenced delete),
   against the same number of raw aiohttp POSTs to that receiver (goal: at least 0.3x their
   throughput: each delivery also reads and deletes its entry in ZooKeeper).
4. A delivery behind a backlog (issue 60.4): one new event delivered while 10,000 entries wait
   for a later try, against one delivered while 10 wait, run by run (goal: at most 1.5x; each
   round lists the outbox and reads only what it has not read). Printed: the ZooKeeper
   requests of each delivery.

Ratios are per run, summarised as their median and range (``Result.of_runs``).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import threading
import time
from datetime import timedelta
from typing import Any

import aiohttp

from benchmarks.common import Result, connect, fresh_root, zookeeper
from recovery.leader.notifier import NotificationSender, SenderSettings
from zkstore.errors import NotLeader
from zkstore.layout import Layout
from zkstore.lifecycle.attempt_limits import heartbeat_interval
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.lifecycle_ops import heartbeat_ops
from zkstore.lifecycle.lifecycle_records import Heartbeat, NotificationEntry
from zkstore.lifecycle.outbox import (
    ATTEMPT_FAILED,
    SUCCEEDED,
    Event,
    Outbox,
    entry_name,
    notification_ops,
)
from zkstore.records.strict import utc_moment, utc_now
from zkstore.zookeeper.ops import Check, Create, Fence, SetData
from zkstore.zookeeper.zk import ZooKeeper


class Receiver:
    """A webhook that answers 200 to everything, counting."""

    def __init__(self) -> None:
        self.count = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.count += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)
        self.url = f"http://{host}:{port}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def leadership(zk: ZooKeeper, layout: Layout) -> Fence:
    zk.ensure_path(layout.election)
    node = zk.create(f"{layout.election}/n_", ephemeral=True, sequence=True)
    return Fence.check(node, error=NotLeader, description="no longer the leader")


def bench_state_change(
    zk: ZooKeeper, layout: Layout, rounds: int
) -> tuple[list[float], list[float]]:
    """Seconds of each fenced status write alone, and of the same with its event for two URLs
    right after it."""
    fence = leadership(zk, layout)
    Outbox(zk, layout).ensure()
    status = f"{layout.jobs}/j/status"
    zk.ensure_path(status)
    data = f'{{"attempt":3,"failures":1,"state":"RESTARTING","updated":"{utc_now()}"}}'.encode()
    alone, with_event = [], []
    urls = ["https://hooks.example.com/services/T0/B0/x", "http://127.0.0.1:9/n"]
    for n in range(rounds):
        start = time.perf_counter()
        zk.commit([SetData(status, data)], fence=fence)
        alone.append(time.perf_counter() - start)
        event = Event("j", n + 1, ATTEMPT_FAILED, utc_moment(), reason="ValueError: boom")
        ops = [SetData(status, data), *notification_ops(layout, [event], urls)]
        start = time.perf_counter()
        zk.commit(ops, fence=fence)
        with_event.append(time.perf_counter() - start)
    return alone, with_event


def bench_heartbeat(
    zk: ZooKeeper, layout: Layout, rounds: int
) -> tuple[list[float], list[float], int]:
    """Seconds of each fenced heartbeat and of the raw kazoo set after it; the heartbeat's
    bytes."""
    status, running = f"{layout.jobs}/h/status", f"{layout.jobs}/h/running"
    zk.ensure_path(status)
    zk.commit([Check(status, 0), Create(running, b"{}", ephemeral=True)])
    fence = Fence.check(status, 0) + Fence.check(running, 0)
    beat = Heartbeat(version=None, attempt=1, at=utc_moment(), beats=1)
    zk.commit(heartbeat_ops(layout, "h", beat, existing=None), fence=fence)
    raw_path = f"{layout.jobs}/h/raw"
    zk.create(raw_path, beat.to_bytes())
    fenced, raw = [], []
    for n in range(rounds):
        beat = Heartbeat(version=None, attempt=1, at=utc_moment(), beats=n + 2)
        start = time.perf_counter()
        zk.commit(heartbeat_ops(layout, "h", beat, existing=n), fence=fence)
        fenced.append(time.perf_counter() - start)
        start = time.perf_counter()
        zk.kazoo.set(raw_path, beat.to_bytes())
        raw.append(time.perf_counter() - start)
    return fenced, raw, len(beat.to_bytes())


def bench_sender(zk: ZooKeeper, layout: Layout, events: int) -> tuple[float, float]:
    """Seconds to deliver ``events`` through the outbox, and to POST as many raw."""
    receiver = Receiver()
    try:
        fence = leadership(zk, layout)
        outbox = Outbox(zk, layout)
        outbox.ensure()
        for chunk in range(0, events, 50):
            batch = [
                Event(f"job-{i}", 1, ATTEMPT_FAILED, utc_moment())
                for i in range(chunk, min(events, chunk + 50))
            ]
            zk.commit(notification_ops(layout, batch, [receiver.url]), fence=fence)
        sender = NotificationSender(
            outbox,
            fence=fence,
            settings=SenderSettings(deadline=10),
            destinations=Destinations.parse("127.0.0.1"),  # the receiver is on loopback
        )
        start = time.perf_counter()
        deadline = time.monotonic() + 600
        while outbox.pending()[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{receiver.count} of {events} events delivered in 600 s")
            sender.run_once()
        ours = time.perf_counter() - start
        assert receiver.count >= events, receiver.count

        async def raw_posts() -> None:
            limit = asyncio.Semaphore(SenderSettings().per_host)
            async with aiohttp.ClientSession() as session:

                async def one(i: int) -> None:
                    async with limit, session.post(receiver.url, data=b'{"k":1}') as answer:
                        await answer.read()

                await asyncio.gather(*(one(i) for i in range(events)))

        start = time.perf_counter()
        asyncio.run(raw_posts())
        raw = time.perf_counter() - start
        return ours, raw
    finally:
        receiver.stop()


def waiting(zk: ZooKeeper, layout: Layout, fence: Fence, count: int) -> None:
    """``count`` entries whose try failed and whose next is an hour away (a receiver down)."""
    later = utc_moment() + timedelta(seconds=3600)
    parent, url = layout.notifications, "http://127.0.0.1:9/down"
    transactions = []
    for n in range(count):
        event = Event(f"backlog-{n}", 1, ATTEMPT_FAILED, utc_moment())
        entry = NotificationEntry(
            version=None,
            key=event.key,
            job_id=event.job_id,
            attempt=1,
            state=event.state,
            at=event.at,
            url=url,
            created=event.at,
            tries=1,
            next_try=later,
            last_error="HTTP 500",
        )
        transactions.append([Create(f"{parent}/{entry_name(event, url, 'b')}", entry.to_bytes())])
    for start in range(0, count, 1000):
        errors = zk.commit_many(transactions[start : start + 1000], fence=fence)
        assert not any(errors), errors


def bench_backlog(
    zk: ZooKeeper, layouts: list[Layout], backlog: int, rounds: int
) -> tuple[list[float], list[float], tuple[int, int]]:
    """Seconds of each delivery of one new event behind ``backlog`` waiting entries and, right
    after it, behind 10; the ZooKeeper requests of the last of each."""
    receiver = Receiver()
    try:
        senders = []
        for layout, count in zip(layouts, (backlog, 10), strict=True):
            fence = leadership(zk, layout)
            outbox = Outbox(zk, layout)
            outbox.ensure()
            waiting(zk, layout, fence, count)
            sender = NotificationSender(
                outbox,
                fence=fence,
                settings=SenderSettings(deadline=10),
                destinations=Destinations.parse("127.0.0.1"),
            )
            assert sender.run_once().waiting == count  # a new leadership reads everything once
            senders.append((layout, fence, sender))
        took: list[list[float]] = [[], []]
        requests = [0, 0]
        for n in range(rounds):
            for side, (layout, fence, sender) in enumerate(senders):
                event = Event("fresh", n + 1, SUCCEEDED, utc_moment())
                zk.commit(notification_ops(layout, [event], [receiver.url]), fence=fence)
                sent = Counted(zk)
                start = time.perf_counter()
                with sent:
                    done = sender.run_once()
                took[side].append(time.perf_counter() - start)
                requests[side] = sent.count
                assert done.delivered == 1, done
        return took[0], took[1], (requests[0], requests[1])
    finally:
        receiver.stop()


class Counted:
    """Count the requests ``zk``'s kazoo client sends inside the block."""

    def __init__(self, zk: ZooKeeper) -> None:
        self.client, self.count = zk.kazoo, 0

    def __enter__(self) -> Counted:
        real = self.real = self.client._call

        def counted(request: object, async_object: object) -> object:
            self.count += 1
            return real(request, async_object)

        self.client._call = counted
        return self

    def __exit__(self, *exc: object) -> None:
        self.client._call = self.real


def main(argv: list[str] | None = None) -> list[Result]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--backlog", type=int, default=10_000, help="entries waiting")
    parser.add_argument("--deliveries", type=int, default=30, help="deliveries behind it")
    args = parser.parse_args(argv)
    with zookeeper() as hosts:
        zk = connect(hosts)
        try:
            layouts = [Layout(fresh_root()) for _ in range(5)]
            for layout in layouts:
                zk.ensure_path(layout.jobs)
            alone, with_event = bench_state_change(zk, layouts[0], args.rounds)
            fenced, raw, size = bench_heartbeat(zk, layouts[1], args.rounds)
            delivered, posted = bench_sender(zk, layouts[2], args.events)
            behind, beside, requests = bench_backlog(zk, layouts[3:], args.backlog, args.deliveries)
        finally:
            zk.stop()
    for jobs, progress in ((1000, 60.0), (1000, 600.0)):
        interval = heartbeat_interval(progress)
        print(
            f"heartbeats of {jobs} jobs with --progress-timeout {progress:g}s: at most "
            f"{jobs / interval:.0f} writes/s of {size} bytes (one per {interval:g} s per job)"
        )
    results = [
        Result.of_runs(
            "lifecycle: state change + its event for 2 URLs, vs the state change alone",
            with_event,
            alone,
            "<= 1.5",
            detail=f"medians of {args.rounds}; fenced transactions",
        ),
        Result.of_runs(
            "lifecycle: heartbeat (fenced 3-op transaction) vs raw kazoo set",
            fenced,
            raw,
            "<= 3",
            detail=f"medians of {args.rounds}; {size} bytes",
        ),
        Result(
            "lifecycle: events delivered per second vs raw POSTs per second",
            args.events / delivered,
            args.events / posted,
            ">= 0.3",
            unit="/s",
            higher_is_better=True,
            detail=f"{args.events} events, read from the outbox, POSTed, deleted (fenced)",
        ),
        Result.of_runs(
            f"lifecycle: one delivery behind {args.backlog} waiting entries vs behind 10",
            behind,
            beside,
            "<= 1.5",
            detail=f"medians of {args.deliveries}; ZooKeeper requests of a delivery: "
            f"{requests[0]} vs {requests[1]}",
        ),
    ]
    for result in results:
        result.show()
    return results


if __name__ == "__main__":
    main()
