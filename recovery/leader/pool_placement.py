"""Placement by pool: which waiting job starts first, and whether its pool lets it start.

Pure functions of the pools' records (:mod:`zkstore.cluster.pools`), the pool of each job the
leader knows and the jobs that hold a driver slot: the leader's wiring
(:mod:`recovery.leader.grant`) calls them with what it keeps, and writes nothing here.

- Order: the highest pool priority first; within one priority, the order in which the jobs
  began to wait (first come, first served).
- Limit: a pool's running jobs are the jobs holding a slot (an assignment: an attempt running,
  being launched, or lost with its daemon and not yet replaced, plus the placements decided in
  the current batch). A job of a pool at its limit waits, and says so: ``waiting: pool backfill
  at 2 of 2``.
- Places kept: a free slot goes to the jobs ahead in that order first, whichever job the leader
  happens to look at. A job looked at for its own reason (submitted, its backoff ended, a label
  only some daemons have) takes a slot only if the waiting jobs ahead of it that could start now
  (their pools let them, a daemon with a free slot matches them) leave one it can use
  (:func:`ahead_of`, :func:`left_over`); else it waits and says for whom.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from recovery.leader.decide import NoSlot
from zkstore.cluster.pools import Pool

__all__ = [
    "PoolFull",
    "SlotKept",
    "ahead_of",
    "kept_reason",
    "left_over",
    "limit_of",
    "look_order",
    "order",
    "priority_of",
    "ready",
    "refusal",
    "running",
]


@dataclass(frozen=True)
class PoolFull(NoSlot):
    """The job's pool runs as many jobs as its limit allows: look again when one of them ends
    or the pool changes."""


@dataclass(frozen=True)
class SlotKept(NoSlot):
    """Every free slot the job could take is kept for waiting jobs ahead of it (a higher
    priority, or its own and waiting longer): look again when a slot frees up."""


def priority_of(pools: Mapping[str, Pool], pool: str) -> int:
    record = pools.get(pool)
    return 0 if record is None else record.priority


def limit_of(pools: Mapping[str, Pool], pool: str) -> int | None:
    record = pools.get(pool)
    return None if record is None else record.max_running


def running(held: Iterable[str], pool_of: Mapping[str, str]) -> Counter[str]:
    """How many of the jobs holding a slot (``held``) each pool has."""
    return Counter(pool_of[job] for job in held if job in pool_of)


def refusal(pools: Mapping[str, Pool], pool: str, count: int) -> str | None:
    """Why a job of ``pool``, which has ``count`` jobs holding a slot, may not start (None: it
    may)."""
    limit = limit_of(pools, pool)
    if limit is None or count < limit:
        return None
    return f"waiting: pool {pool} at {count} of {limit}"


def order(
    waiting: Iterable[str], pool_of: Mapping[str, str], pools: Mapping[str, Pool]
) -> list[str]:
    """``waiting`` (in the order the jobs began to wait) in the order they are to start: the
    highest priority first, first come first served within one (a stable sort)."""
    return sorted(waiting, key=lambda job: -priority_of(pools, pool_of.get(job, "")))


def ready(
    waiting: Iterable[tuple[str, Mapping[str, str]]],
    pool_of: Mapping[str, str],
    pools: Mapping[str, Pool],
    counts: Mapping[str, int],
) -> list[tuple[str, Mapping[str, str]]]:
    """The waiting jobs (job id, required labels; in the order they began to wait) that their
    pools let start now, in the order they are to start: each pool's jobs up to what its limit
    leaves (``counts``: its jobs holding a slot)."""
    return list(_ready(waiting, pool_of, pools, counts))


def _ready(
    waiting: Iterable[tuple[str, Mapping[str, str]]],
    pool_of: Mapping[str, str],
    pools: Mapping[str, Pool],
    counts: Mapping[str, int],
) -> Iterator[tuple[str, Mapping[str, str]]]:
    labels = dict(waiting)
    left = dict(counts)
    for job in order(labels, pool_of, pools):
        pool = pool_of.get(job, "")
        if refusal(pools, pool, left.get(pool, 0)) is not None:
            continue
        left[pool] = left.get(pool, 0) + 1
        yield job, labels[job]


def look_order(
    ids: Iterable[str],
    tier: Callable[[str], int],
    waiting: Iterable[str],
    pool_of: Mapping[str, str],
    pools: Mapping[str, Pool],
) -> list[str]:
    """``ids`` in the order the leader looks at them: by ``tier`` (dirty results, then the jobs
    holding a slot, whose pools are counted before any job is placed), then the highest
    priority first (a pool not known yet: 0), then the jobs ``waiting`` (in the order they are
    to start) before the others, then by id. A look that frees a slot gives it to the next
    one in this order: a new job of a higher priority goes before one waiting longer, and a
    leader that has just taken over (nobody waiting yet) places by priority, not by id."""
    position = {job: place for place, job in enumerate(waiting)}
    after = len(position)

    def key(job: str) -> tuple[int, int, int, str]:
        priority = priority_of(pools, pool_of.get(job, ""))
        return tier(job), -priority, position.get(job, after), job

    return sorted(ids, key=key)


def ahead_of(
    job: str,
    waiting: Iterable[tuple[str, Mapping[str, str]]],
    pool_of: Mapping[str, str],
    pools: Mapping[str, Pool],
    counts: Mapping[str, int],
) -> Iterator[tuple[str, Mapping[str, str]]]:
    """The waiting jobs (as for :func:`ready`) that go before ``job`` and that their pools let
    start now, in the order they are to start: those before it in the order if it waits, else
    every one of its priority or higher (a job that begins to wait goes behind them)."""
    mine = priority_of(pools, pool_of.get(job, ""))
    for other, labels in _ready(waiting, pool_of, pools, counts):
        if other == job or priority_of(pools, pool_of.get(other, "")) < mine:
            return
        yield other, labels


def left_over(
    free: Mapping[str, int],
    ahead: Iterable[tuple[str, Mapping[str, str]]],
    matches: Callable[[str, Mapping[str, str]], bool],
) -> dict[str, int]:
    """The free slots (per daemon) that the jobs ``ahead`` leave, each of them taking one on
    the first daemon (by name) that ``matches`` its labels and has one left, as the leader's
    offer of freed slots does (:meth:`recovery.leader.placement.Fleet.could_start`); a job no
    daemon with a free slot matches takes none."""
    left = {daemon: n for daemon, n in free.items() if n > 0}
    for _, labels in ahead:
        if not left:
            break
        daemon = next((d for d in sorted(left) if matches(d, labels)), None)
        if daemon is None:
            continue
        left[daemon] -= 1
        if left[daemon] == 0:
            del left[daemon]
    return left


def kept_reason(ahead: int, able: int) -> str:
    """Why a job waits although a slot is free: the jobs ahead of it take every one it could."""
    return (
        f"waiting: the {able} free driver slot(s) it could take are kept for "
        f"{ahead} job(s) ahead of it (a higher priority, or waiting longer)"
    )
