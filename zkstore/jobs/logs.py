"""The driver logs of a job, kept in object storage: written in chunks, read from any host.

Layout, under the job's storage prefix ``S/<cluster>/jobs/<job>/logs/``::

    attempt-<n>/<seq:08d>.log    the attempt's output (stdout and stderr), chunk by chunk, in order
    attempt-<n>/end.json         {"chunks", "bytes", "finished"}: the whole output is stored

Every chunk is written once, create-only, at a key that names its place in the order: a chunk
written again after a lost answer is recognised by its bytes, and a crash leaves at worst an
attempt without ``end.json`` (its last chunks up to the crash are kept). Logs are job-owned data:
the job's cleanup keeps them for a retention period after the result, then they are removed
by the leader's retention passes (:func:`logs_due`; :func:`logs_kept` is the same rule as
``handles lingering`` applies it); nothing here ever unpickles or runs what it reads.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from zkstore.errors import CorruptRecord, JobNotFound, PayloadMissing
from zkstore.layout import LOG_CHUNK_BYTES, StorageLayout
from zkstore.payloads.storage import TEMP_MARKER, StateStorage
from zkstore.records.job_states import CLEAN, DIRTY
from zkstore.records.result_records import JobResult
from zkstore.records.strict import load_object, utc_now

__all__ = [
    "END",
    "HISTORY",
    "MAX_CHUNK_BYTES",
    "MAX_TAIL_BYTES",
    "SEQ_WIDTH",
    "TAIL_BLOCK",
    "AttemptLog",
    "JobLogs",
    "LogChunk",
    "LogFollower",
    "chunk_name",
    "is_log_key",
    "logs_due",
    "logs_kept",
]

SEQ_WIDTH = 8
END = "end.json"
#: The job's attempt history (``R/jobs/<job>/history``), kept beside its logs once the job is
#: cleaned up, for as long as they are (the job page draws a finished job's timeline from it).
HISTORY = "history.json"
#: A shipper never writes bigger chunks; a reader refuses bigger objects (planted ones).
MAX_CHUNK_BYTES = LOG_CHUNK_BYTES
#: A tail reads a log from its end in blocks this big, and at most this much of it.
TAIL_BLOCK = 64 * 1024
MAX_TAIL_BYTES = 4 * 1024 * 1024
_ATTEMPT = re.compile(r"attempt-([1-9][0-9]{0,8})")
_CHUNK = re.compile(rf"([0-9]{{{SEQ_WIDTH}}})\.log")


def chunk_name(seq: int) -> str:
    return f"{seq:0{SEQ_WIDTH}d}.log"


@dataclass(frozen=True)
class LogChunk:
    """One stored chunk of an attempt's output."""

    attempt: int
    seq: int
    uri: str
    size: int


@dataclass
class AttemptLog:
    """What storage holds of one attempt's output."""

    attempt: int
    chunks: list[LogChunk] = field(default_factory=list)
    ended: bool = False

    @property
    def size(self) -> int:
        return sum(chunk.size for chunk in self.chunks)

    def as_dict(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "chunks": len(self.chunks),
            "bytes": self.size,
            "complete": self.ended,
        }


def is_log_key(key: str) -> bool:
    """True for a storage key ``<cluster>/jobs/<job>/logs/...`` (relative to the root)."""
    parts = key.split("/")
    return len(parts) > 4 and parts[1] == "jobs" and parts[3] == "logs"


class JobLogs:
    """The logs of one job: write chunks (the shipper), list and read them (anyone)."""

    def __init__(self, storage: StateStorage, storage_layout: StorageLayout, job_id: str) -> None:
        self.storage = storage
        self.layout = storage_layout
        self.job_id = job_id
        self.prefix = storage_layout.logs(job_id)

    # -- writing (the shipper of one attempt) --------------------------------------------------

    def write_chunk(self, attempt: int, seq: int, data: bytes) -> None:
        """Store chunk ``seq`` of ``attempt``; the same bytes again are fine, other bytes raise
        :class:`~zkstore.errors.HandleExists` (another shipper wrote that place)."""
        key = f"{self.layout.attempt_logs(self.job_id, attempt)}/{chunk_name(seq)}"
        self.storage.create(key, data)

    def finish(self, attempt: int, *, chunks: int, size: int) -> None:
        """Record that the attempt's whole output is stored (idempotent)."""
        body = {"chunks": chunks, "bytes": size, "finished": utc_now()}
        key = f"{self.layout.attempt_logs(self.job_id, attempt)}/{END}"
        if self.storage.exists(self.storage.url(key)):
            return
        self.storage.create(key, json.dumps(body, sort_keys=True).encode())

    def keep_history(self, data: bytes) -> None:
        """Keep the job's attempt history beside its logs (create-only: once kept, the same
        bytes again are fine and other bytes raise :class:`~zkstore.errors.HandleExists`)."""
        self.storage.create(f"{self.prefix}/{HISTORY}", data)

    # -- reading (anyone, any host) ------------------------------------------------------------

    def kept_history(self) -> bytes | None:
        """The attempt history kept when the job was cleaned up, or None."""
        try:
            return self.storage.fetch(
                self.storage.url(f"{self.prefix}/{HISTORY}"), max_bytes=MAX_CHUNK_BYTES
            )
        except PayloadMissing:
            return None

    def attempts(self) -> dict[int, AttemptLog]:
        """Every attempt with logs, by attempt number, chunks in order (one listing)."""
        found: dict[int, AttemptLog] = {}
        base = self.storage.url(self.prefix) + "/"
        for item in self.storage.list(self.prefix):
            parts = item.uri[len(base) :].split("/") if item.uri.startswith(base) else []
            match = _ATTEMPT.fullmatch(parts[0]) if len(parts) == 2 else None
            if match is None or TEMP_MARKER in parts[1]:
                continue
            attempt = int(match.group(1))
            log = found.setdefault(attempt, AttemptLog(attempt))
            chunk = _CHUNK.fullmatch(parts[1])
            if chunk is not None:
                log.chunks.append(LogChunk(attempt, int(chunk.group(1)), item.uri, item.size))
            elif parts[1] == END:
                log.ended = True
        for log in found.values():
            log.chunks.sort(key=lambda c: c.seq)
        return dict(sorted(found.items()))

    def attempt(self, attempt: int) -> AttemptLog:
        """One attempt's log (empty if nothing is stored for it)."""
        return self.attempts().get(attempt, AttemptLog(attempt))

    def read_chunk(self, chunk: LogChunk) -> bytes:
        """The bytes of one chunk (b"" if it was removed meanwhile)."""
        try:
            return self.storage.fetch(chunk.uri, max_bytes=MAX_CHUNK_BYTES)
        except PayloadMissing:
            return b""

    def read(self, log: AttemptLog, *, start: int = 0) -> Iterator[bytes]:
        """The attempt's output from chunk ``start`` on, one chunk at a time."""
        for chunk in log.chunks[start:]:
            yield self.read_chunk(chunk)

    def tail(self, log: AttemptLog, lines: int, *, max_bytes: int = MAX_TAIL_BYTES) -> bytes:
        """The last ``lines`` lines of the attempt's output, at most its last ``max_bytes``:
        read from the end in blocks of :data:`TAIL_BLOCK` bytes, each read once (a log of
        long lines costs what it holds up to the bound, not the square of it)."""
        if lines <= 0:
            return b""
        blocks: list[bytes] = []
        newlines = taken = 0
        for chunk in reversed(log.chunks):
            end = chunk.size
            while end > 0 and newlines <= lines and taken < max_bytes:
                start = max(0, end - TAIL_BLOCK, end - (max_bytes - taken))
                block = self._block(chunk, start, end - start)
                blocks.append(block)
                newlines += block.count(b"\n")
                taken += end - start
                end = start
            if newlines > lines or taken >= max_bytes:
                break
        kept = b"".join(reversed(blocks)).splitlines(keepends=True)[-lines:]
        return b"".join(kept)

    def _block(self, chunk: LogChunk, start: int, length: int) -> bytes:
        try:
            return self.storage.fetch_range(chunk.uri, start, length)
        except PayloadMissing:
            return b""

    def end(self, attempt: int) -> dict[str, object] | None:
        """The attempt's ``end.json``, or None if it was not written (yet)."""
        uri = self.storage.url(f"{self.layout.attempt_logs(self.job_id, attempt)}/{END}")
        try:
            data = self.storage.fetch(uri, max_bytes=4096)
        except PayloadMissing:
            return None
        try:
            return load_object(data, max_bytes=4096)
        except ValueError as exc:
            raise CorruptRecord(f"{uri}: {exc}") from None

    # -- removal (retention) -------------------------------------------------------------------

    def remove(self) -> int:
        """Discard every object of the job's logs; returns how many there were. Idempotent."""
        objects = self.storage.list(self.prefix)
        for item in objects:
            self.storage.discard(item.uri)
        return len(objects)


class LogFollower:
    """Follows a job's logs as they are stored: the current attempt, then each next one, until
    the job has a result and its last attempt's log is complete.

    An attempt's log is complete once its ``end.json`` is stored; if it never comes (its
    shipper was killed with its host), the follower moves on ``grace`` seconds after the last
    chunk, once a later attempt has started or the job has ended.
    """

    def __init__(
        self,
        logs: JobLogs,
        job_attempt: Callable[[], tuple[int, bool] | None],
        *,
        poll: float = 1.0,
        grace: float = 15.0,
    ) -> None:
        self.logs = logs
        #: the job's current attempt and whether it has ended, or None if the job is unknown
        self.job_attempt = job_attempt
        self.poll = poll
        self.grace = grace

    def start(self, attempt: int | None = None) -> int:
        """The attempt to follow first: the one asked for, else the latest with logs, else the
        job's current one. Raises :class:`JobNotFound` if there is no such job."""
        found = self.logs.attempts()
        job = self.job_attempt()
        if job is None and not found:
            raise JobNotFound(f"no job {self.logs.job_id!r} in this cluster")
        if attempt is not None:
            return attempt
        if found:
            return max(found)
        return max(1, job[0] if job is not None else 1)

    def follow(self, attempt: int, *, skip: int = 0) -> Iterator[tuple[int, bytes]]:
        """Yield ``(attempt, bytes)`` as chunks arrive, from chunk ``skip`` of ``attempt`` on."""
        done, quiet_since = skip, time.monotonic()
        while True:
            found = self.logs.attempts()
            log = found.get(attempt, AttemptLog(attempt))
            for chunk in log.chunks[done:]:
                yield attempt, self.logs.read_chunk(chunk)
                quiet_since = time.monotonic()
            done = max(done, len(log.chunks))
            job = self.job_attempt()
            latest = max([*found, job[0] if job is not None else 0])
            ended = job is None or job[1]
            settled = log.ended or time.monotonic() - quiet_since > self.grace
            if settled and latest > attempt:
                attempt, done, quiet_since = attempt + 1, 0, time.monotonic()
                continue
            if settled and ended:
                return
            time.sleep(self.poll)


# -- retention: the one rule, for the leader's passes and for ``handles lingering`` -----------


def logs_due(result: JobResult, now: datetime) -> bool:
    """True if ``result`` is CLEAN and the retention of its logs has passed at ``now``: the
    leader removes them, then drops ``logs_until``."""
    return result.state == CLEAN and _retention_over(result, now)


def logs_kept(live: bool, result: JobResult | None, now: datetime) -> bool:
    """Driver logs are kept while their job lives (current, with records, or quarantined) or is
    being cleaned up (DIRTY), and after that until the retention recorded with its result ends.
    A job's logs that are not kept are lingering (``handles lingering``)."""
    if live or (result is not None and result.state == DIRTY):
        return True
    return result is not None and result.logs_until is not None and not _retention_over(result, now)


def _retention_over(result: JobResult, now: datetime) -> bool:
    return result.logs_until is not None and result.logs_until <= now
