"""The outbox's bounds, kept when an event is written (invariant 15): a job has at most
``per_job`` undelivered entries, the outbox at most ``total``; an event past them is not
written (a line at WARNING, once per job a minute, and a count the daemon's metrics show),
and no entry of any job is ever evicted to make room.

A job's outcome (SUCCEEDED, FAILED, CANCELLED) is always written: a job has one, so it cannot
flood, and it is the event a receiver waits for. What a flood can fill is the rest: a job
failing in a fast loop of attempts, or quarantined and released again and again.

The counts are the sender's last listing of the outbox (one children call a round: entries are
named ``<job>~...``) plus what the leader wrote since; a write that then failed counts until
the next listing (at worst an event refused early, never one written past the bound).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable

from zkstore.lifecycle.outbox import CANCELLED, FAILED, OUTBOX_LIMIT, SUCCEEDED

__all__ = ["DEFAULT_PER_JOB", "OUTCOMES", "OutboxCounts"]

#: A job's events kept undelivered at most, unless the daemon says (``--notify-max-per-job``).
DEFAULT_PER_JOB = 100
OUTCOMES = frozenset({SUCCEEDED, FAILED, CANCELLED})


class OutboxCounts:
    """How many entries each job has in the outbox, and what may be added (thread-safe: the
    leader's thread asks, the sender's tells)."""

    def __init__(
        self,
        per_job: int = DEFAULT_PER_JOB,
        total: int = OUTBOX_LIMIT,
        refused: Counter[str] | None = None,
    ) -> None:
        self.per_job = per_job
        self.total = total
        self._lock = threading.Lock()
        self._listed: Counter[str] = Counter()
        #: entries written since the listing began: (monotonic time, job)
        self._added: list[tuple[float, str]] = []
        #: events not written, per why ("job" or "outbox"): the daemon's, kept across its
        #: leaderships (a metric)
        self.refused: Counter[str] = Counter() if refused is None else refused

    def listed(self, names: Iterable[str], began: float) -> None:
        """The outbox's entry names as a listing started at monotonic ``began`` saw them."""
        counts = Counter(name.split("~", 1)[0] for name in names)
        with self._lock:
            self._listed = counts
            # writes from before the listing are in it; later ones may not be (counted twice
            # at worst until the next listing: refused early, never written past the bound)
            self._added = [(at, job) for at, job in self._added if at >= began]

    def admit(self, job_id: str, state: str, entries: int) -> bool:
        """Whether ``entries`` new entries of ``job_id``'s event ``state`` may be written; if
        so they are counted as written, if not the refusal is."""
        with self._lock:
            job = self._listed[job_id] + sum(1 for _, j in self._added if j == job_id)
            total = sum(self._listed.values()) + len(self._added)
            if state not in OUTCOMES:
                why = "job" if job + entries > self.per_job else None
                if why is None and total + entries > self.total:
                    why = "outbox"
                if why is not None:
                    self.refused[why] += 1
                    return False
            now = time.monotonic()
            self._added += [(now, job_id)] * entries
            return True

    def waiting(self, job_id: str) -> int:
        """The job's entries as counted now."""
        with self._lock:
            return self._listed[job_id] + sum(1 for _, j in self._added if j == job_id)
