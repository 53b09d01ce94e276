"""One retry policy for every compare-and-set loop and every write whose outcome is unknown.

As kazoo has ``KazooRetry``: a :class:`Retry` names its tries, its backoff and its deadline, and
:meth:`Retry.call` runs an attempt until it returns, raises, or the policy is spent. An attempt
asks for another by raising :class:`TryAgain` (it read, then lost a race to another writer; or
its answer was lost and reading back did not find the write), or one of the ``retry_on`` errors.
A policy that is spent **raises**, an error of :mod:`zkstore.errors` naming what was tried, how
often and for how long: it never gives up silently (a caller that must not raise logs it at
ERROR).

The policies of zkstore:

- :data:`RACES`: a read-then-write that lost a race to another writer reads again and retries,
  :data:`RACE_TRIES` times in all, with a short jittered backoff. More tries than that means
  somebody keeps changing the nodes: the caller hears :class:`~zkstore.errors.VersionConflict`.
- :data:`WHILE_STANDING`: a write whose outcome must not be lost (an attempt's outcome) is
  retried, with a backoff growing to a second, for as long as the writer still has standing
  (the caller's ``give_up``: the driver's session lease), and stops at once when a fence says
  it has none.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from zkstore.errors import ConflictError, HandleNotFound, VersionConflict, ZkStoreError

__all__ = ["JITTER", "RACES", "RACE_TRIES", "WHILE_STANDING", "Retry", "TryAgain", "within"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Tries of a read-then-write that lost a race (somebody changed the nodes in between).
RACE_TRIES = 5


class TryAgain(Exception):
    """Raised by an attempt to ask its :class:`Retry` for another (the reason is the message)."""


@dataclass(frozen=True)
class Retry:
    """How often and how long to try: ``tries`` attempts in all (None: no limit but the
    ``deadline`` or the caller's ``give_up``), ``deadline`` seconds from the first try (None:
    none), pausing ``backoff`` seconds after the first failure, doubling up to ``max_backoff``
    (each pause jittered down to half, so that racing writers drift apart)."""

    tries: int | None = RACE_TRIES
    backoff: float = 0.01
    max_backoff: float = 0.2
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.tries is not None and self.tries < 1:
            raise ValueError("a retry policy makes at least one try")

    def call(
        self,
        attempt: Callable[[], T],
        *,
        what: str,
        retry_on: tuple[type[BaseException], ...] = (),
        give_up: Callable[[], bool] | None = None,
        error: type[ZkStoreError] = VersionConflict,
        path: str | None = None,
    ) -> T:
        """``attempt()``'s value, trying again after :class:`TryAgain` or a ``retry_on`` error
        until the policy is spent or ``give_up()`` says so; then raise ``error`` (with ``path``
        for a conflict) saying ``what`` was tried, chained to the last reason. Any other error
        of the attempt is raised at once."""
        if self.tries is None and self.deadline is None and give_up is None:
            raise ValueError(f"{what}: a retry without a limit, a deadline or a give_up")
        retried: tuple[type[BaseException], ...] = (TryAgain, *retry_on)
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            try:
                return attempt()
            except retried as exc:
                reason: BaseException = exc
            elapsed = time.monotonic() - started
            pause = self.pause(tries)
            if (
                (self.tries is not None and tries >= self.tries)
                or (self.deadline is not None and elapsed + pause > self.deadline)
                or (give_up is not None and give_up())
            ):
                message = (
                    f"{what}: gave up after {tries} tries in {elapsed:.1f} s "
                    f"(last: {_describe(reason)})"
                )
                if issubclass(error, ConflictError | HandleNotFound):
                    raise error(message, path=path) from reason
                raise error(message) from reason
            logger.debug("%s: try %d failed (%s); again in %.2f s", what, tries, reason, pause)
            time.sleep(pause)

    def pause(self, tries: int) -> float:
        """The pause after the ``tries``-th failed try."""
        full: float = min(self.max_backoff, self.backoff * 2.0 ** min(tries - 1, 30))
        return full * JITTER.uniform(0.5, 1.0)


#: the generator of zkstore's jitter (its retries', and kazoo's pings' in ``zkstore.zookeeper.zk``),
#: never the global one: a job that seeds that for reproducible results must draw the same numbers
#: whatever its driver's session did meanwhile. Seeded again in every forked child, as the
#: global one is (drivers forked from one fork server must not back off in step).
JITTER = random.Random()
os.register_at_fork(after_in_child=JITTER.seed)

#: Read-then-write loops that lost a race: read again and write again, a few times.
RACES = Retry()

#: Writes whose outcome must not be lost (a driver's outcome): no limit of tries, only the
#: caller's ``give_up`` (the writer's standing: the driver's session lease) ends them.
WHILE_STANDING = Retry(tries=None, backoff=0.1, max_backoff=1.0)


def within(seconds: float) -> Retry:
    """Resolving a lost answer (read back; if the write is not there, send it again) within a
    call's deadline of ``seconds``."""
    return Retry(tries=None, backoff=0.05, max_backoff=0.5, deadline=seconds)


def _describe(reason: BaseException) -> str:
    text = str(reason)
    if isinstance(reason, TryAgain) and text:
        return text
    return f"{type(reason).__name__}: {text}" if text else type(reason).__name__
