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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recovery.leader.decide import NoSlot
from zkstore.cluster.pools import Pool

__all__ = ["PoolFull", "limit_of", "order", "priority_of", "ready", "refusal", "running"]


@dataclass(frozen=True)
class PoolFull(NoSlot):
    """The job's pool runs as many jobs as its limit allows: look again when one of them ends
    or the pool changes."""


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
    labels = dict(waiting)
    left = dict(counts)
    chosen: list[tuple[str, Mapping[str, str]]] = []
    for job in order(labels, pool_of, pools):
        pool = pool_of.get(job, "")
        if refusal(pools, pool, left.get(pool, 0)) is not None:
            continue
        left[pool] = left.get(pool, 0) + 1
        chosen.append((job, labels[job]))
    return chosen
