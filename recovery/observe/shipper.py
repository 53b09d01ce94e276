"""Shipping one attempt's output to storage: ``python -m recovery.observe.shipper ...``.

The driver writes its stdout and stderr (its Python logging, the job's prints, the Spark JVM's
output) to the attempt's log file on the host, exactly as without shipping: the driver never
waits for the shipper, and its writes never fail because of it. A shipper process, started by
the launcher beside the driver, follows that file and stores what is new every few seconds as a
chunk (:mod:`zkstore.jobs.logs`), then, once the driver has exited, the rest and ``end.json``.

Why a process of its own, not a thread of the daemon: drivers outlive their daemon by design (a
new leader adopts them), and so must the shipping of their output. A pipe into the daemon would
be worse still: the driver's next print would fail once the daemon died. The shipper learns of
the driver's exit through a pidfd the launcher opened while the driver was its unreaped child,
so it can never mistake another process for it; a SIGKILLed driver's last lines are in the file,
and the shipper stores them.

What a failure leaves: storage down, the chunks wait in the file (nothing is dropped; the
shipper retries with backoff, and gives up on a dead driver's output after ``--give-up``
seconds, leaving the file); the shipper killed, the chunks stored so far and the file.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from recovery.observe.throttle import Throttle
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError, HandleExists, StoreUnavailable, ZkStoreError
from zkstore.jobs.logs import MAX_CHUNK_BYTES, JobLogs
from zkstore.layout import StorageLayout
from zkstore.storage import StateStorage

logger = logging.getLogger("recovery.observe.shipper")

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
        chunk_bytes: int = MAX_CHUNK_BYTES,
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

    def run(self, exited: Callable[[float], bool], *, give_up: float = GIVE_UP) -> bool:
        """Ship until the driver has exited (``exited(timeout)`` waits for that up to
        ``timeout`` seconds) and everything is stored; returns False if it gave up."""
        self.seq = self._next_seq()
        wait = self.interval
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
                self.seq = self._next_seq()
        self.seq += 1
        self.offset += len(data)
        self.shipped += len(data)

    def _finish(self) -> None:
        try:
            self.logs.finish(self.attempt, chunks=self.seq, size=self.shipped)
        except ZkStoreError as exc:
            logger.warning("cannot mark the log of %s complete: %s", self.logs.job_id, exc)


# -- the launcher's side ----------------------------------------------------------------------


def start_shipper(
    config: StoreConfig,
    job_id: str,
    attempt: int,
    driver: subprocess.Popen[bytes],
    log_path: Path,
    offset: int,
    *,
    env: dict[str, str],
    python: str = sys.executable,
    interval: float = INTERVAL,
) -> subprocess.Popen[bytes] | None:
    """Start the shipper of a driver just launched (still an unreaped child of ours).

    ``env`` is the driver's environment (the daemon's secrets already taken out). Returns None,
    with a warning, if it cannot be started: the driver runs regardless and its output stays in
    ``log_path``.
    """
    try:
        pidfd = os.pidfd_open(driver.pid)
    except (OSError, AttributeError) as exc:
        logger.warning("cannot follow driver %d for log shipping: %s", driver.pid, exc)
        return None
    read_end, write_end = os.pipe()
    try:
        # The storage settings only: the shipper has no use for the signing key.
        os.write(write_end, config.with_changes(signing_key=None).to_json().encode())
        os.close(write_end)
        write_end = -1
        command = [python, "-m", "recovery.observe.shipper", "--config-fd", str(read_end)]
        command += ["--pidfd", str(pidfd), "--job-id", job_id, "--attempt", str(attempt)]
        command += ["--log", str(log_path), "--offset", str(offset), "--interval", str(interval)]
        shipper = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            pass_fds=(read_end, pidfd),
        )
    except OSError as exc:
        logger.warning("cannot start the log shipper of %s attempt %d: %s", job_id, attempt, exc)
        return None
    finally:
        for fd in (read_end, write_end, pidfd):
            if fd >= 0:
                os.close(fd)
    # Reap it when it ends, so that no zombie is left behind; nobody waits for it otherwise.
    threading.Thread(target=shipper.wait, name=f"shipper-{job_id}", daemon=True).start()
    return shipper


# -- the shipper process ----------------------------------------------------------------------


def exit_waiter(pidfd: int) -> Callable[[float], bool]:
    """``wait(timeout)``: True once the process of ``pidfd`` has exited."""

    def wait(timeout: float) -> bool:
        readable, _, _ = select.select([pidfd], [], [], timeout)
        return bool(readable)

    return wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.observe.shipper", description=__doc__)
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
        storage = StateStorage(config.storage_url, config.storage_options, timeout=config.timeout)
    except (OSError, UnicodeDecodeError, ConfigError) as exc:
        parser.error(f"cannot read the storage configuration: {exc}")
    logs = JobLogs(storage, StorageLayout(config.cluster_id), args.job_id)
    shipper = LogShipper(logs, args.attempt, args.log, offset=args.offset, interval=args.interval)
    return 0 if shipper.run(exit_waiter(args.pidfd), give_up=args.give_up) else 1


if __name__ == "__main__":
    sys.exit(main())
