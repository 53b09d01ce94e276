"""The notification sender: drains the outbox (:mod:`zkstore.lifecycle.outbox`) over HTTP.

A thread of the leader (started with the leadership, stopped with it), apart from
the leader's own thread: a receiver that is slow or down never delays a decision. Each round:

1. read the outbox (one children call, one pipelined read of the entries);
2. drop, at ERROR, what is past the retention or beyond the most entries kept;
3. POST every due entry (its ``next_try`` passed), at most ``concurrency`` at once, each within
   ``deadline`` seconds in all (aiohttp's total timeout: connect, send, answer), redirects not
   followed; the body is :func:`zkstore.lifecycle.outbox.body`, with the ``Idempotency-Key``;
4. a 2xx answer: delete the entry (fenced on the leadership, at the version read); anything
   else: write back one more try, its error and the next try's time (exponential backoff from
   ``backoff``, or the receiver's ``Retry-After`` if longer, jittered by the entry's key), also
   fenced. A lost fence (:class:`~zkstore.errors.FenceLost`: this daemon no longer leads) ends
   the sender; the next leader's sender goes on from the entries and their tries.

It wakes on a watch of the outbox's children (a new event), at the earliest ``next_try``, and at
least every ``poll`` seconds (a watch lost to a reconnect). A crash between a 2xx and the delete
delivers that event again from the next leader: at least once, with the same key. Receivers'
URLs are shown redacted (:func:`~zkstore.lifecycle.records.redact_url`) in every log line and
recorded error: a webhook's path is often its secret.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from zkstore.errors import (
    FenceLost,
    HandleNotFound,
    StoreUnavailable,
    VersionConflict,
    ZkStoreError,
)
from zkstore.lifecycle.outbox import DEFAULT_RETENTION, OUTBOX_LIMIT, Outbox, Pending, body
from zkstore.lifecycle.policy import Backoff, jitter_fraction
from zkstore.lifecycle.records import redact_url
from zkstore.ops import Fence
from zkstore.strict import parse_time
from zkstore.watch import NodeWatch

if TYPE_CHECKING:
    import aiohttp

logger = logging.getLogger(__name__)

USER_AGENT = "zkstore-notifier/1"
DEFAULT_BACKOFF = Backoff(delay=1.0, max_delay=300.0, jitter=0.2)


@dataclass(frozen=True)
class SenderSettings:
    """``deadline``: the longest one POST may take; ``retention``: how long an undelivered
    entry is kept; ``backoff``: the pause after the n-th failed try of an entry; ``poll``: the
    longest between two rounds; ``error_pause``: after a round that failed unexpectedly."""

    deadline: float = 10.0
    retention: float = DEFAULT_RETENTION
    backoff: Backoff = DEFAULT_BACKOFF
    concurrency: int = 4
    max_entries: int = OUTBOX_LIMIT
    poll: float = 30.0
    error_pause: float = 5.0


@dataclass(frozen=True)
class Answer:
    """How one POST went: ``ok`` for a 2xx; else why, and the receiver's Retry-After."""

    ok: bool
    error: str | None = None
    retry_after: float | None = None


@dataclass
class Round:
    """What one round did (for logs and tests)."""

    delivered: int = 0
    failed: int = 0
    dropped: int = 0
    waiting: int = 0
    next_due: datetime | None = None
    keys: list[str] = field(default_factory=list)


class NotificationSender:
    """Deliver the outbox's entries; :meth:`run_once` is one round, :meth:`start` a thread."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        fence: Fence | None,
        settings: SenderSettings | None = None,
        on_step: Callable[[str], None] | None = None,
        on_fence_lost: Callable[[FenceLost], None] | None = None,
    ) -> None:
        self.outbox = outbox
        self.fence = fence
        self.settings = settings or SenderSettings()
        self._on_step = on_step or (lambda step: None)
        self._on_fence_lost = on_fence_lost
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: NodeWatch | None = None
        self._garbage_seen: set[str] = set()
        self.fence_lost: FenceLost | None = None

    # -- one round -------------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> Round:
        """Read the outbox, drop what is too old, deliver what is due. Raises
        :class:`~zkstore.errors.FenceLost` when this sender may no longer write, and
        :class:`~zkstore.errors.StoreUnavailable` when ZooKeeper does not answer."""
        now = now or datetime.now(UTC)
        pending, garbage = self.outbox.pending()
        for name in set(garbage) - self._garbage_seen:
            logger.warning("outbox node %s is not a notification entry: left alone", name)
        self._garbage_seen = set(garbage)
        done = Round()
        pending = self._drop_old(pending, now, done)
        due = [p for p in pending if p.due(now)]
        answers = _post_all(due, self.settings) if due else []
        delivered = [item for item, answer in zip(due, answers, strict=True) if answer.ok]
        if delivered:
            self._on_step("notify:posted")
        failed = [
            self._next_try(item, answer, now)
            for item, answer in zip(due, answers, strict=True)
            if not answer.ok
        ]
        errors = self.outbox.settle(delivered, failed, fence=self.fence)
        self._count(delivered, failed, errors, done)
        rest = [p for p in pending if not p.due(now)]
        done.waiting = len(rest)
        # Due next: the entries not due in this round, and those it failed (at their new try;
        # settled or not: an entry changed meanwhile is read again then, at worst early).
        next_tries = [item.entry.next_try for item in rest] + [at for _, _, at in failed]
        done.next_due = min((parse_time(at) for at in next_tries if at is not None), default=None)
        return done

    def _drop_old(self, pending: list[Pending], now: datetime, done: Round) -> list[Pending]:
        kept: list[Pending] = []
        excess = max(0, len(pending) - self.settings.max_entries)
        for index, item in enumerate(pending):  # oldest first
            if index < excess:
                why = f"the outbox holds more than {self.settings.max_entries} entries"
            elif item.age(now) > self.settings.retention:
                why = f"older than the retention of {self.settings.retention:g} s"
            else:
                kept.append(item)
                continue
            try:
                self.outbox.drop(item, why, fence=self.fence)
                done.dropped += 1
            except (HandleNotFound, VersionConflict):
                pass  # delivered or changed by another sender meanwhile
        return kept

    def _next_try(self, item: Pending, answer: Answer, now: datetime) -> tuple[Pending, str, str]:
        """The failed try of ``item`` to record: its error and the next try's time."""
        tries = item.entry.tries + 1
        pause = self.settings.backoff.delay_for(tries, jitter_fraction(item.entry.key, tries))
        if answer.retry_after is not None:
            pause = max(pause, min(answer.retry_after, self.settings.backoff.max_delay))
        next_try = (now + timedelta(seconds=pause)).isoformat(timespec="milliseconds")
        error = answer.error or "failed"
        logger.info(
            "notification %s: try %d failed (%s); next in %.1f s",
            item.describe(),
            tries,
            error,
            pause,
        )
        return item, error, next_try.replace("+00:00", "Z")

    def _count(
        self,
        delivered: list[Pending],
        failed: list[tuple[Pending, str, str]],
        errors: list[ZkStoreError | None],
        done: Round,
    ) -> None:
        """Tally the settled entries; raise the fence's error if this sender lost it."""
        lost: FenceLost | None = None
        items = [*delivered, *(item for item, _, _ in failed)]
        for index, (item, error) in enumerate(zip(items, errors, strict=True)):
            if isinstance(error, FenceLost):
                lost = lost or error
            elif index < len(delivered):
                # delivered: removed now, or by another sender meanwhile (both are fine)
                done.delivered += 1
                done.keys.append(item.entry.key)
                logger.info("notification %s delivered", item.describe())
            elif error is None:
                done.failed += 1
        if lost is not None:
            raise lost

    # -- the thread ------------------------------------------------------------------------------

    def start(self) -> NotificationSender:
        """Deliver from a daemon thread until :meth:`stop` or a lost fence."""
        self.outbox.ensure()
        self._watch = NodeWatch(
            self.outbox.zk, self.outbox.path, lambda _: self._wake.set(), children=True
        )
        self._thread = threading.Thread(target=self._run, name="notifier", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the round under way (bounded by the POST deadline)."""
        self._stopped.set()
        self._wake.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            wait = self.settings.poll
            try:
                done = self.run_once()
                if done.next_due is not None:
                    ahead = (done.next_due - datetime.now(UTC)).total_seconds()
                    wait = min(wait, max(0.05, ahead))
            except FenceLost as exc:
                self.fence_lost = exc
                logger.info("notification sender stops: %s", exc)
                if self._on_fence_lost is not None:
                    self._on_fence_lost(exc)
                return
            except StoreUnavailable as exc:
                logger.warning("notification sender: ZooKeeper did not answer (%s)", exc)
                wait = min(wait, 1.0)
            except Exception:
                # The thread must not die silently: say so, and try again after a pause (an
                # entry that breaks a round every time is dropped at the end of its retention).
                logger.exception("notification sender: round failed; trying again")
                wait = min(wait, self.settings.error_pause)
            self._wake.wait(wait)


def _post_all(due: list[Pending], settings: SenderSettings) -> list[Answer]:
    """POST every due entry (``concurrency`` at once), each within the deadline."""
    return asyncio.run(_post_many(due, settings))


async def _post_many(due: list[Pending], settings: SenderSettings) -> list[Answer]:
    import aiohttp  # here: a daemon that never notifies never imports it (0.2 s of CPU)

    timeout = aiohttp.ClientTimeout(total=settings.deadline)
    connector = aiohttp.TCPConnector(limit=settings.concurrency)
    limit = asyncio.Semaphore(settings.concurrency)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one(item: Pending) -> Answer:
            async with limit:
                return await _post(session, item)

        return list(await asyncio.gather(*(one(item) for item in due)))


async def _post(session: aiohttp.ClientSession, item: Pending) -> Answer:
    import aiohttp

    entry = item.entry
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": entry.key,
        "User-Agent": USER_AGENT,
    }
    started = time.monotonic()
    try:
        async with session.post(
            entry.url, data=body(entry), headers=headers, allow_redirects=False
        ) as response:
            await response.read()
            if 200 <= response.status < 300:
                return Answer(ok=True)
            return Answer(
                ok=False,
                error=f"HTTP {response.status}",
                retry_after=_retry_after(response.headers.get("Retry-After")),
            )
    except TimeoutError:
        took = time.monotonic() - started
        return Answer(ok=False, error=f"no answer within {took:.1f} s")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return Answer(ok=False, error=_redacted(exc, entry.url))


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (the delay form only), or None."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


def _redacted(exc: BaseException, url: str) -> str:
    """An error's text without the URL's secret parts (aiohttp names the URL)."""
    text = f"{type(exc).__name__}: {exc}"
    return text.replace(url, redact_url(url))
