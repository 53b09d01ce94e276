"""Storing a growing log file in object storage: ``python -m zkstore.jobs.logship ...``.

One process per attempt of a job follows the attempt's log file (the driver's stdout and stderr)
from an offset and stores what is new every few seconds as the next chunk of the attempt's log
(:class:`~zkstore.jobs.logs.JobLogs`); once the driver has exited (its pidfd, inherited from the
launcher, becomes readable) it stores the rest and ``end.json``. The file is the buffer: the
driver never waits for storage, and nothing is dropped while storage is down. The runtime starts
it (:mod:`recovery.member.shipper` says why a process of its own); it lives here, with the
store, so that it starts without the runtime's imports, and it loads storage (fsspec: most of
its CPU) only at its first look, one interval after the driver started.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, HandleExists, StoreUnavailable, ZkStoreError
from zkstore.layout import LOG_CHUNK_BYTES as CHUNK_BYTES
from zkstore.throttle import Throttle

if TYPE_CHECKING:
    from zkstore.jobs.logs import JobLogs

logger = logging.getLogger("zkstore.jobs.logship")

#: Seconds between two looks at the file while the driver runs.
INTERVAL = 2.0
#: Seconds a dead driver's output may wait for storage to come back before the shipper gives up.
GIVE_UP = 600.0
MAX_BACKOFF = 60.0


class LogShipper:
    """Follows one attempt's log file from ``offset`` and stores it chunk by chunk.

    Chunks are cut at line ends where possible and hold at most ``chunk_bytes``; the file itself
    is the buffer, so a slow or unreachable storage never holds up the driver.
    """

    def __init__(
        self,
        logs: JobLogs,
        attempt: int,
        path: Path,
        *,
        offset: int = 0,
        interval: float = INTERVAL,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.logs = logs
        self.attempt = attempt
        self.path = path
        self.offset = offset
        self.interval = interval
        self.chunk_bytes = chunk_bytes
        self.seq = 0
        self.shipped = 0
        self._throttle = Throttle(logger)

    def run(
        self, exited: Callable[[float], bool], *, give_up: float = GIVE_UP, look_now: bool = False
    ) -> bool:
        """Ship until the driver has exited (``exited(timeout)`` waits for that up to
        ``timeout`` seconds) and everything is stored; returns False if it gave up. The first
        look is one interval from now, or at once with ``look_now``."""
        self.seq = self._next_seq()
        wait = 0.0 if look_now else self.interval
        deadline: float | None = None
        while True:
            done = exited(wait)
            if done and deadline is None:
                deadline = time.monotonic() + give_up
            if self._ship(final=done):
                wait = self.interval
                if done:
                    self._finish()
                    return True
            else:
                wait = min(MAX_BACKOFF, wait * 2)
                if deadline is not None and time.monotonic() > deadline:
                    logger.error(
                        "gave up storing the rest of %s attempt %d; it stays in %s",
                        self.logs.job_id,
                        self.attempt,
                        self.path,
                    )
                    return False

    def _next_seq(self) -> int:
        """After the chunks stored already (the same attempt's file appended to again)."""
        try:
            chunks = self.logs.attempt(self.attempt).chunks
        except StoreUnavailable:
            return 0  # a clash later says so, and moves past it
        return chunks[-1].seq + 1 if chunks else 0

    def _ship(self, *, final: bool) -> bool:
        """Store what is new in the file; False if storage failed (try again later)."""
        try:
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
        self._throttle.clear("storage", "storing the log of %s again", self.logs.job_id)
        return True

    def _read(self, final: bool) -> tuple[bytes, bool]:
        """The next chunk to store, and whether the file may hold more after it.

        While the driver runs, a chunk ends at a line end where it has one: the unfinished last
        line goes with the next chunk (one interval later at most, since a read without any
        line end is stored whole).
        """
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:
                    self.offset = 0  # truncated by somebody: start over
                f.seek(self.offset)
                data = f.read(self.chunk_bytes)
        except FileNotFoundError:
            return b"", False
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
        self.shipped += len(data)

    def _finish(self) -> None:
        try:
            self.logs.finish(self.attempt, chunks=self.seq, size=self.shipped)
        except ZkStoreError as exc:
            logger.warning("cannot mark the log of %s complete: %s", self.logs.job_id, exc)


def exit_waiter(pidfd: int) -> Callable[[float], bool]:
    """``wait(timeout)``: True once the process of ``pidfd`` has exited."""

    def wait(timeout: float) -> bool:
        readable, _, _ = select.select([pidfd], [], [], timeout)
        return bool(readable)

    return wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zkstore.jobs.logship", description=__doc__)
    parser.add_argument("--config-fd", type=int, required=True)
    parser.add_argument("--pidfd", type=int, required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--interval", type=float, default=INTERVAL)
    parser.add_argument("--give-up", type=float, default=GIVE_UP)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        with os.fdopen(args.config_fd, "rb") as pipe:
            config = StoreConfig.from_json(pipe.read(1 << 20).decode())
    except (OSError, UnicodeDecodeError, ConfigError) as exc:
        parser.error(f"cannot read the storage configuration: {exc}")
    exited = exit_waiter(args.pidfd)
    # Wait first, load later: storage (fsspec) costs most of this process's CPU to import, and
    # a short driver is done before it shares a core with that; a long one hardly notices.
    exited(args.interval)
    from zkstore.jobs.logs import JobLogs
    from zkstore.layout import StorageLayout
    from zkstore.storage import StateStorage

    try:
        storage = StateStorage(config.storage_url, config.storage_options, timeout=config.timeout)
    except ConfigError as exc:
        parser.error(f"invalid storage configuration: {exc}")
    logs = JobLogs(storage, StorageLayout(config.cluster_id), args.job_id)
    shipper = LogShipper(logs, args.attempt, args.log, offset=args.offset, interval=args.interval)
    return 0 if shipper.run(exited, give_up=args.give_up, look_now=True) else 1


if __name__ == "__main__":
    sys.exit(main())
