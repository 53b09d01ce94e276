"""The notification sender: drains the outbox (:mod:`zkstore.lifecycle.outbox`) over HTTP.

A thread of the leader (started with the leadership, stopped with it), apart from the leader's
own thread: a receiver that is slow or down never delays a decision. It reads the outbox (one
children call, one pipelined read of the entries), drops at ERROR what is past the retention,
and hands every due entry (its ``next_try`` passed) to its receiver's lane
(:class:`~recovery.leader.courier.Lanes`: one queue per host and port, ``per_host`` POSTs at
once each): a receiver that is slow or never answers holds up its own events only. Each POST
is bounded (:class:`~recovery.leader.courier.Courier`: a deadline, no redirect, no answer body
read, checked destinations), and its entry is settled as soon as its answer is in, before that
lane's next POST:

- a 2xx answer: the entry is deleted (fenced on the leadership, at the version read);
- a refused destination (an address notifications may not go to, :mod:`zkstore.lifecycle.
  destinations`): the entry is dropped, with a line at ERROR;
- anything else: one more try is written back with the class of its failure (``HTTP 503``,
  ``timeout``...; never the receiver's words) and the next try's time (exponential backoff from
  ``backoff``, or the receiver's ``Retry-After`` if longer, jittered by the entry's key), also
  fenced. A new leader goes on from the entries and their tries.

A lost fence (:class:`~zkstore.errors.FenceLost`: this daemon no longer leads) ends the sender.
It reads the outbox again on a watch of its children (a new event), at the earliest
``next_try``, and at least every ``poll`` seconds (a watch lost to a reconnect). A crash between
a 2xx and the delete delivers that event again from the next leader: at least once, with the
same key. Receivers' URLs are shown redacted
(:func:`~zkstore.lifecycle.lifecycle_records.redact_url`) in every log line: a webhook's path is
often its secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from recovery.leader.courier import Answer, Courier, Lanes
from recovery.leader.job_conditions import JobConditions
from zkstore.errors import (
    FenceLost,
    HandleNotFound,
    StoreUnavailable,
    VersionConflict,
    ZkStoreError,
)
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.outbox import DEFAULT_RETENTION, Outbox, OutboxView, Pending
from zkstore.lifecycle.outboxcap import OutboxCounts
from zkstore.lifecycle.retry_backoff import Backoff, jitter_fraction
from zkstore.zookeeper.ops import Fence
from zkstore.zookeeper.watch import NodeWatch

__all__ = ["DEFAULT_BACKOFF", "READ_GAP", "NotificationSender", "Round", "SenderSettings"]

logger = logging.getLogger(__name__)

DEFAULT_BACKOFF = Backoff(delay=1.0, max_delay=300.0, jitter=0.2)
#: the least time between two reads of the outbox (each delivered entry's delete fires the
#: watch: they are read together)
READ_GAP = 0.05


@dataclass(frozen=True)
class SenderSettings:
    """``deadline``: the longest one POST may take; ``retention``: how long an undelivered
    entry is kept; ``backoff``: the pause after the n-th failed try of an entry; ``per_host``:
    POSTs at once to one receiver; ``poll``: the longest between two reads of the outbox;
    ``error_pause``: after a read that failed unexpectedly."""

    deadline: float = 10.0
    retention: float = DEFAULT_RETENTION
    backoff: Backoff = DEFAULT_BACKOFF
    per_host: int = 2
    poll: float = 30.0
    error_pause: float = 5.0


@dataclass
class Round:
    """What one round did (for logs and tests): in a thread, what was settled meanwhile."""

    delivered: int = 0
    failed: int = 0
    dropped: int = 0
    waiting: int = 0
    next_due: datetime | None = None
    keys: list[str] = field(default_factory=list)

    def due_at(self, when: datetime) -> None:
        self.next_due = when if self.next_due is None else min(self.next_due, when)


class NotificationSender:
    """Deliver the outbox's entries; :meth:`run_once` is one round, :meth:`start` a thread."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        fence: Fence | None,
        settings: SenderSettings | None = None,
        destinations: Destinations | None = None,
        counts: OutboxCounts | None = None,
        on_step: Callable[[str], None] | None = None,
        on_fence_lost: Callable[[FenceLost], None] | None = None,
        conditions: JobConditions | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``conditions``: where a dropped notification is said on its job (and cleared by a
        delivered one: :mod:`recovery.leader.job_conditions`)."""
        self.outbox = outbox
        self.conditions = conditions
        #: what this sender read of the outbox: a round reads only what is new (issue 60.4)
        self.view = OutboxView(outbox)
        self.fence = fence
        self.settings = settings or SenderSettings()
        self.destinations = destinations or Destinations()
        self.counts = counts
        #: the time entries are judged by (a leader's: ZooKeeper's, as their ``created``)
        self._now = clock or (lambda: datetime.now(UTC))
        self._on_step = on_step or (lambda step: None)
        self._on_fence_lost = on_fence_lost
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: NodeWatch | None = None
        self._garbage_seen: set[str] = set()
        self.fence_lost: FenceLost | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        #: when the thread's next read is due (monotonic): a failed try due earlier wakes it
        self._wake_at = 0.0

    # -- one round -------------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> Round:
        """Read the outbox, drop what is too old, deliver what is due (each receiver's lane
        apart), settle each; return when every due entry is settled. Raises
        :class:`~zkstore.errors.FenceLost` when this sender may no longer write, and
        :class:`~zkstore.errors.StoreUnavailable` when ZooKeeper does not answer."""
        return asyncio.run(self._once(now or self._now()))

    async def _once(self, now: datetime) -> Round:
        done = Round()
        async with self._courier() as courier:
            lanes = Lanes(courier.post, lambda i, a: self._settle(i, a, done, now), self._hosts)
            self._dispatch(await asyncio.to_thread(self._read, now, done), lanes, now, done)
            await lanes.join()
        if self.fence_lost is not None:
            raise self.fence_lost
        return done

    @property
    def _hosts(self) -> int:
        return self.settings.per_host

    def _courier(self) -> Courier:
        return Courier(self.destinations, self.settings.deadline, self.settings.per_host)

    def _read(self, now: datetime, done: Round) -> list[Pending]:
        """The outbox's entries (oldest first), less those past the retention (dropped)."""
        began = time.monotonic()
        pending, garbage = self.view.pending()
        if self.counts is not None:
            self.counts.listed([p.name for p in pending], began)
        for name in set(garbage) - self._garbage_seen:
            logger.warning("outbox node %s is not a notification entry: left alone", name)
        self._garbage_seen = set(garbage)
        kept: list[Pending] = []
        for item in pending:
            if item.age(now) <= self.settings.retention:
                kept.append(item)
                continue
            why = f"older than the retention of {self.settings.retention:g} s"
            try:
                self.outbox.drop(item, why, fence=self.fence)
                done.dropped += 1
            except (HandleNotFound, VersionConflict):
                continue  # delivered or changed by another sender meanwhile
            finally:
                self.view.forget(item.name)
            if self.conditions is not None:
                self.conditions.dropped(item, why)
        return kept

    def _dispatch(self, pending: list[Pending], lanes: Lanes, now: datetime, done: Round) -> None:
        """Queue the due entries on their lanes; note when the others are due."""
        for item in pending:
            if item.due(now):
                lanes.submit(item)
            elif item.name not in lanes.busy:
                done.waiting += 1
                if item.entry.next_try is not None:
                    done.due_at(item.entry.next_try)

    async def _settle(self, item: Pending, answer: Answer, done: Round, now: datetime) -> None:
        """Record what came of one try (off the event loop: ZooKeeper calls block); never
        raises: a lost fence stops the sender, anything else leaves the entry to a later
        round."""
        try:
            await asyncio.to_thread(self._settle_one, item, answer, done, now)
        except FenceLost as exc:
            self._lost(exc)
        except ZkStoreError as exc:
            logger.warning(
                "notification %s: its try is not recorded (%s); tried again later",
                item.describe(),
                exc,
            )
        except Exception:
            logger.exception("notification sender: round failed; trying again")

    def _settle_one(self, item: Pending, answer: Answer, done: Round, now: datetime) -> None:
        try:
            self._record_try(item, answer, done, now)
        finally:
            self.view.forget(item.name)  # changed (or not, if the write failed): read it again

    def _record_try(self, item: Pending, answer: Answer, done: Round, now: datetime) -> None:
        if answer.refused:
            why = f"its destination is refused: {answer.error}"
            try:
                self.outbox.drop(item, why, fence=self.fence)
                done.dropped += 1
            except (HandleNotFound, VersionConflict):
                return
            if self.conditions is not None:
                self.conditions.dropped(item, why)
            return
        if answer.ok:
            self._on_step("notify:posted")
            (error,) = self.outbox.settle([item], [], fence=self.fence)
            if isinstance(error, FenceLost):
                raise error
            done.delivered += 1  # removed now, or by another sender meanwhile: both fine
            done.keys.append(item.entry.key)
            logger.info("notification %s delivered", item.describe())
            if self.conditions is not None:
                self.conditions.delivered(item)
            return
        failure = self._next_try(item, answer, now)
        (error,) = self.outbox.settle([], [failure], fence=self.fence)
        if isinstance(error, FenceLost):
            raise error
        if error is None:
            done.failed += 1
        due = failure[2]
        done.due_at(due)
        self._due_again(due)

    def _next_try(
        self, item: Pending, answer: Answer, now: datetime
    ) -> tuple[Pending, str, datetime]:
        """The failed try of ``item`` to record: its error and the next try's time."""
        tries = item.entry.tries + 1
        pause = self.settings.backoff.delay_for(tries, jitter_fraction(item.entry.key, tries))
        if answer.retry_after is not None:
            pause = max(pause, min(answer.retry_after, self.settings.backoff.max_delay))
        next_try = now + timedelta(seconds=pause)
        next_try = next_try.replace(microsecond=next_try.microsecond // 1000 * 1000)
        error = answer.error or "failed"
        logger.info(
            "notification %s: try %d failed (%s); next in %.1f s",
            item.describe(),
            tries,
            error,
            pause,
        )
        return item, error, next_try

    def _lost(self, exc: FenceLost) -> None:
        if self.fence_lost is None:
            self.fence_lost = exc
            logger.info("notification sender stops: %s", exc)
            if self._on_fence_lost is not None:
                self._on_fence_lost(exc)
        self._stopped.set()
        self._poke()

    # -- the thread ------------------------------------------------------------------------------

    def start(self) -> NotificationSender:
        """Deliver from a daemon thread until :meth:`stop` or a lost fence."""
        self.outbox.ensure()
        self._watch = NodeWatch(
            self.outbox.zk, self.outbox.path, lambda _: self._poke(), children=True
        )
        self._thread = threading.Thread(target=self._run, name="notifier", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop (the POSTs under way are abandoned: their entries are tried again later)."""
        self._stopped.set()
        self._poke()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _poke(self) -> None:
        """Any thread: read the outbox again now."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    def _due_again(self, due: datetime) -> None:
        """A failed try's next is due at ``due``: wake the thread then if it sleeps longer."""
        if self._loop is None:
            return
        at = time.monotonic() + max(0.0, (due - self._now()).total_seconds())
        if at < self._wake_at:
            self._poke()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        async with self._courier() as courier:
            lanes = Lanes(courier.post, self._settle_now, self._hosts)
            try:
                while not self._stopped.is_set():
                    self._wake.clear()
                    wait = await self._round(lanes)
                    self._wake_at = time.monotonic() + wait
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), wait)
                    await asyncio.sleep(READ_GAP)
            finally:
                lanes.cancel()
                await lanes.join()

    async def _settle_now(self, item: Pending, answer: Answer) -> None:
        await self._settle(item, answer, Round(), self._now())

    async def _round(self, lanes: Lanes) -> float:
        """Read the outbox and queue what is due; seconds until the next read."""
        wait = self.settings.poll
        done = Round()
        try:
            now = self._now()
            self._dispatch(await asyncio.to_thread(self._read, now, done), lanes, now, done)
        except FenceLost as exc:
            self._lost(exc)
        except StoreUnavailable as exc:
            logger.warning("notification sender: ZooKeeper did not answer (%s)", exc)
            wait = min(wait, 1.0)
        except Exception:
            # The thread must not die silently: say so, and try again after a pause (an entry
            # that breaks a round every time is dropped at the end of its retention).
            logger.exception("notification sender: round failed; trying again")
            wait = min(wait, self.settings.error_pause)
        if done.next_due is not None:
            ahead = (done.next_due - self._now()).total_seconds()
            wait = min(wait, max(READ_GAP, ahead))
        return wait
