"""Storing a growing log file in object storage, chunk by chunk: one attempt's follower.

A :class:`LogShipper` follows one attempt's log file (the driver's stdout and stderr) from an
offset and, at each look, stores what is new as the next chunk of the attempt's log
(:class:`~zkstore.jobs.logs.JobLogs`); once told that the driver has exited it stores the rest
and ``end.json``. The file is the buffer: the driver never waits for storage, and nothing is
dropped while storage is down. It does not decide when to look, nor how a driver's exit is seen:
the daemon's log shipper (:mod:`recovery.member.log_shipper`, one process per daemon) follows every
attempt of its daemon with one of these each.

Where to go on from is found in storage (:meth:`LogShipper.resume`), so that a shipper that
died is replaced by one that neither stores a byte twice nor skips one: the chunks of one follow
are stored in order, contiguous from its first offset and first sequence number, so the
offset reached is the first offset plus the sizes of the chunks stored since.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from zkstore.errors import HandleExists, StoreUnavailable, ZkStoreError
from zkstore.layout import LOG_CHUNK_BYTES as CHUNK_BYTES
from zkstore.zookeeper.throttle import Throttle

if TYPE_CHECKING:
    from zkstore.jobs.logs import JobLogs

__all__ = ["GIVE_UP", "INTERVAL", "MAX_BACKOFF", "LogShipper"]

logger = logging.getLogger("zkstore.jobs.log_follower")

#: Seconds between two looks at the file while the driver runs.
INTERVAL = 2.0
#: Seconds a dead driver's output may wait for storage to come back before the shipper gives up.
GIVE_UP = 600.0
MAX_BACKOFF = 60.0


class LogShipper:
    """Follows one attempt's log file and stores it chunk by chunk.

    ``offset`` is where this follow begins in the file (None: after what storage holds of the
    attempt already, for a follow begun without a record of where the driver started);
    ``first_seq`` the sequence number of its first chunk (None until :meth:`resume` finds it,
    after the chunks stored already: the same attempt's file appended to again). Chunks are cut
    at line ends where possible and hold at most ``chunk_bytes``.
    """

    def __init__(
        self,
        logs: JobLogs,
        attempt: int,
        path: Path,
        *,
        offset: int | None = 0,
        first_seq: int | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.logs = logs
        self.attempt = attempt
        self.path = path
        self.first_offset = offset
        self.first_seq = first_seq
        self.offset = offset or 0
        self.seq = first_seq or 0
        self.chunk_bytes = chunk_bytes
        #: bytes of the attempt's chunks in storage (earlier follows' included), for end.json
        self.stored = 0
        self.resumed = False
        self._throttle = Throttle(logger)

    def resume(self) -> bool:
        """Find the place to go on from in storage (one listing and a read of ``end.json``);
        False if the attempt's log is complete already. Raises ZkStoreError (storage down: try
        again later)."""
        if self.logs.end(self.attempt) is not None:
            return False
        chunks = self.logs.attempt(self.attempt).chunks
        if self.first_seq is None:
            self.first_seq = chunks[-1].seq + 1 if chunks else 0
        if self.first_offset is None:  # no record of where it began: after what is stored
            self.first_offset = sum(c.size for c in chunks if c.seq < self.first_seq)
        self.offset, self.seq = self.first_offset, self.first_seq
        for chunk in chunks:  # this follow's chunks stored already, in order
            if chunk.seq == self.seq:
                self.offset += chunk.size
                self.seq += 1
        self.stored = sum(c.size for c in chunks)
        self.resumed = True
        return True

    def start(self) -> bool:
        """Find where to go on from (:meth:`resume`), unless found already; False if storage
        failed (said in a warning: try again later). Then :attr:`first_offset` and
        :attr:`first_seq` say where this follow began (still None if the log is complete)."""
        if self.resumed:
            return True
        try:
            self.resume()
        except ZkStoreError as exc:
            self._throttle.warning(
                "storage", "cannot store the log of %s: %s", self.logs.job_id, exc
            )
            return False
        return True

    def ship(self, *, final: bool) -> bool:
        """Store what is new in the file (all of it with ``final``: the driver has exited);
        False if storage failed (the file keeps it: try again later)."""
        try:
            if not self.resumed and not self.resume():
                return True
            more = True
            while more:
                data, more = self._read(final)
                if data:
                    self._store(data)
        except ZkStoreError as exc:  # an outage, or storage refusing: the file keeps it all
            self._throttle.warning(
                "storage", "cannot store the log of %s: %s", self.logs.job_id, exc
            )
            return False
        except OSError as exc:  # the file itself: unreadable, or not a regular file
            self._throttle.warning("file", "cannot read the log of %s: %s", self.logs.job_id, exc)
            return False
        self._throttle.clear("storage", "storing the log of %s again", self.logs.job_id)
        return True

    def finish(self) -> bool:
        """Record that the whole output is stored (``end.json``); False if storage failed."""
        try:
            self.logs.finish(self.attempt, chunks=self.seq, size=self.stored)
        except ZkStoreError as exc:
            self._throttle.warning(
                "storage", "cannot mark the log of %s complete: %s", self.logs.job_id, exc
            )
            return False
        return True

    def _next_seq(self) -> int:
        """After the chunks stored already."""
        try:
            chunks = self.logs.attempt(self.attempt).chunks
        except StoreUnavailable:
            return 0  # a clash later says so, and moves past it
        return chunks[-1].seq + 1 if chunks else 0

    def _read(self, final: bool) -> tuple[bytes, bool]:
        """The next chunk to store, and whether the file may hold more after it.

        While the driver runs, a chunk ends at a line end where it has one: the unfinished last
        line goes with the next chunk (one interval later at most, since a read without any
        line end is stored whole).
        """
        try:
            # Never through a symlink, and only a regular file: the path is the daemon's.
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return b"", False
        with os.fdopen(fd, "rb") as f:
            status = os.fstat(f.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise OSError(f"{self.path} is not a regular file")
            if status.st_size < self.offset:
                self.offset = 0  # truncated by somebody: start over
            f.seek(self.offset)
            data = f.read(self.chunk_bytes)
        full = len(data) == self.chunk_bytes
        if final or data.endswith(b"\n"):
            return data, full
        end = data.rfind(b"\n")
        return (data, full) if end < 0 else (data[: end + 1], full)

    def _store(self, data: bytes) -> None:
        while True:
            try:
                self.logs.write_chunk(self.attempt, self.seq, data)
                break
            except HandleExists:
                logger.warning(
                    "chunk %d of %s attempt %d was written by someone else; moving past it",
                    self.seq,
                    self.logs.job_id,
                    self.attempt,
                )
                self.seq = max(self.seq + 1, self._next_seq())  # always forward
        self.seq += 1
        self.offset += len(data)
        self.stored += len(data)
