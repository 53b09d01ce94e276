"""The daemon's log shipper: one process per daemon stores the output of all its drivers.

The driver writes its stdout and stderr (its Python logging, the job's prints, the Spark JVM's
output) to the attempt's log file on the host, exactly as without shipping: the driver never
waits for the shipper, and its writes never fail because of it. The shipper follows every
attempt of its daemon and stores what is new every few seconds as a chunk
(:class:`zkstore.jobs.log_follower.LogShipper`, one per attempt), then, once the driver has exited,
the rest and ``end.json``. It runs at a lower priority than the drivers, so that it costs the
jobs little, and one for all of them: a process per attempt cost a no-op job a tenth of its CPU.

Why a process, not a thread of the daemon: drivers outlive their daemon by design (a restarted
daemon adopts them), and so must the shipping of their output. A pipe into the daemon would be
worse still: the driver's next print would fail once the daemon died. So the daemon hands each
attempt over through a file, and the shipper goes on while it has attempts to follow, daemon or
not. Its directory, ``<work dir>/.shipping/<daemon>/`` (private to the user, like the launch
records beside it)::

    <job>-attempt-<n>.json   a follow request: the log's path, where the driver's output begins,
                             the driver (pid, start time, boot); written by the daemon after the
                             launch, removed by the shipper once ``end.json`` is stored
    wake                     a FIFO: a byte tells the shipper to look for new requests; no
                             reader means no shipper (the daemon starts one)
    service.lock             held (flock) by the shipper: never two
    daemon.lock              held (shared flock) by every live daemon of the id: while one is
                             held, the shipper waits for more work; once none is and nothing is
                             left to follow, it exits
    shipper.log              the shipper's own messages

It sees a driver's exit through a pidfd (opened, then the start time checked, so it can never
follow another process that took the pid), so a SIGKILLed driver's last lines are in the file
and the shipper stores them at once. What a failure leaves: storage down, the chunks wait in the
file (nothing is dropped; the shipper retries with backoff and gives up on a dead driver's
output after ``--give-up`` seconds, leaving the file); the shipper killed, a new one (started by
the daemon's next launch, or at its start) resumes every request from where storage says the
last one got to (:meth:`~zkstore.jobs.log_follower.LogShipper.resume`): no byte stored twice or
skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import select
import stat
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from recovery.member.log_shipping import (
    DAEMON_LOCK,
    REQUEST_NAME,
    SERVICE_LOCK,
    WAKE,
    FollowRequest,
    is_held,
    private_dir,
    write_atomically,
)
from recovery.shared.processes import Adopted
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError
from zkstore.jobs.log_follower import GIVE_UP, INTERVAL, MAX_BACKOFF, LogShipper
from zkstore.payloads import secrecy

if TYPE_CHECKING:
    from zkstore.payloads.storage import StateStorage

__all__ = ["IDLE_CHECK", "LOCK_WAIT", "ShipperService", "main"]

logger = logging.getLogger(__name__)

#: Seconds between two checks, while nothing is followed, that a daemon still holds its lock.
IDLE_CHECK = 5.0
#: Seconds a new shipper waits for one that is exiting to let go of the service lock.
LOCK_WAIT = 10.0


# -- the shipper (a process of its own) ---------------------------------------------------------


@dataclass
class _Followed:
    request: FollowRequest
    shipper: LogShipper
    process: Adopted | None  # None: its driver is gone already
    next_look: float
    ended_at: float | None = None
    backoff: float = 0.0


class ShipperService:
    """Follows every request of ``directory`` until none is left and no daemon holds its lock."""

    def __init__(
        self,
        directory: Path,
        storage: StateStorage,
        cluster_id: str,
        *,
        interval: float = INTERVAL,
        give_up: float = GIVE_UP,
    ) -> None:
        self.directory = directory
        self.storage = storage
        self.cluster_id = cluster_id
        self.interval = interval
        self.give_up = give_up
        self.followed: dict[str, _Followed] = {}
        self._wake = -1

    def run(self) -> int:
        lock = self._take_service_lock()
        if lock is None:
            logger.info("another log shipper serves %s", self.directory)
            return 0
        try:
            self._open_wake()
            while True:
                self._scan()
                if not self.followed and self._may_exit():
                    return 0
                self._wait()
                self._look()
        finally:
            if self._wake >= 0:
                os.close(self._wake)
            os.close(lock)

    # -- one round --

    def _scan(self) -> None:
        """Pick up the requests not followed yet."""
        try:
            names = sorted(p.name for p in self.directory.iterdir())
        except OSError as exc:
            logger.error("cannot list %s: %s", self.directory, exc)
            return
        for name in names:
            if name in self.followed or REQUEST_NAME.fullmatch(name) is None:
                continue
            path = self.directory / name
            try:
                request = FollowRequest.parse(path.read_bytes())
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                logger.error("unreadable follow request %s: %s; removed", path, exc)
                path.unlink(missing_ok=True)
                continue
            self.followed[name] = self._follow(request)

    def _follow(self, request: FollowRequest) -> _Followed:
        from zkstore.jobs.logs import JobLogs
        from zkstore.layout import StorageLayout

        logs = JobLogs(self.storage, StorageLayout(self.cluster_id), request.job_id)
        shipper = LogShipper(
            logs,
            request.attempt,
            Path(request.log),
            offset=request.offset,
            first_seq=request.first_seq,
        )
        process = Adopted.open(request.identity)
        now = time.monotonic()
        followed = _Followed(request, shipper, process, now + self.interval)
        if process is None:  # gone already: store the rest now
            followed.ended_at, followed.next_look = now, now
        return followed

    def _wait(self) -> None:
        """Until the next look is due, a driver exits, or the daemon wakes us."""
        now = time.monotonic()
        due = min((f.next_look for f in self.followed.values()), default=now + IDLE_CHECK)
        poller = select.poll()
        poller.register(self._wake, select.POLLIN)
        by_fd: dict[int, _Followed] = {}
        for followed in self.followed.values():
            if followed.process is not None and followed.ended_at is None:
                by_fd[followed.process.fileno()] = followed
                poller.register(followed.process.fileno(), select.POLLIN)
        ready = poller.poll(max(0.0, due - now) * 1000)
        now = time.monotonic()
        for fd, _ in ready:
            if fd == self._wake:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake, 4096)
            elif fd in by_fd:
                by_fd[fd].ended_at = now
                by_fd[fd].next_look = now

    def _look(self) -> None:
        now = time.monotonic()
        for name, followed in list(self.followed.items()):
            if followed.next_look > now:
                continue
            try:
                over = self._step(followed)
            except Exception:  # one attempt's surprise must not stop the shipping of the others
                logger.exception("shipping %s failed; trying again later", name)
                over = self._failed(followed)
            if over:
                self._done(name, followed)

    def _step(self, followed: _Followed) -> bool:
        """One look at one attempt; True once it is over (stored whole, or given up)."""
        shipper, final = followed.shipper, followed.ended_at is not None
        if followed.request.first_seq is None and not self._remember_start(followed):
            return self._failed(followed)
        ok = shipper.ship(final=final)
        if ok and final:
            ok = shipper.finish()
            if ok:
                return True
        if ok:
            followed.backoff, followed.next_look = 0.0, time.monotonic() + self.interval
            return False
        return self._failed(followed)

    def _failed(self, followed: _Followed) -> bool:
        """A look failed: look again after a growing pause; True once a dead driver's output
        has waited longer than the give-up time (then it stays in its file)."""
        now = time.monotonic()
        followed.backoff = min(MAX_BACKOFF, max(self.interval, followed.backoff * 2))
        followed.next_look = now + followed.backoff
        if followed.ended_at is not None and now - followed.ended_at > self.give_up:
            logger.error(
                "gave up storing the rest of %s attempt %d; it stays in %s",
                followed.request.job_id,
                followed.request.attempt,
                followed.request.log,
            )
            return True
        return False

    def _remember_start(self, followed: _Followed) -> bool:
        """Write where this follow begins into its request, once, before its first chunk is
        stored: a shipper that replaces this one resumes from there (storage says how far it
        got). A replacement that found no record would take this follow's first chunks for an
        earlier follow's and store their bytes again. False if storage or the file failed (no
        chunk may be stored until it is written: try again later)."""
        shipper = followed.shipper
        if not shipper.start():
            return False
        if shipper.first_seq is None:  # the log is complete already: nothing will be stored
            return True
        request = replace(
            followed.request, offset=shipper.first_offset, first_seq=shipper.first_seq
        )
        path = self.directory / request.name
        try:
            write_atomically(path, request.to_bytes())
        except OSError as exc:
            logger.warning("cannot update %s: %s", path, exc)
            return False
        followed.request = request
        return True

    def _done(self, name: str, followed: _Followed) -> None:
        del self.followed[name]
        (self.directory / name).unlink(missing_ok=True)
        if followed.process is not None:
            followed.process.close()

    # -- its lifetime --

    def _take_service_lock(self) -> int | None:
        """The service lock, or None if another shipper holds it and serves (one that is exiting
        lets go within moments: wait for it)."""
        fd = os.open(self.directory / SERVICE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if _has_reader(self.directory / WAKE) or time.monotonic() > deadline:
                    os.close(fd)
                    return None
            select.select([], [], [], 0.05)  # the holder is between its last look and its exit

    def _open_wake(self) -> None:
        path = self.directory / WAKE
        with contextlib.suppress(FileExistsError):
            os.mkfifo(path, 0o600)
        if not stat.S_ISFIFO(os.lstat(path).st_mode):
            path.unlink()
            os.mkfifo(path, 0o600)
        # Read and write: the FIFO never reads as closed while we hold it, whoever writes.
        self._wake = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)

    def _may_exit(self) -> bool:
        """Nothing is followed: exit if no daemon lives and no request came meanwhile. The FIFO
        is closed first, so a daemon that writes a request after the last look finds no reader
        and starts a new shipper (which waits for our lock)."""
        if _daemon_alive(self.directory):
            return False
        os.close(self._wake)
        self._wake = -1
        if not _daemon_alive(self.directory):
            self._scan()
            if not self.followed:
                return True
        self._open_wake()
        return False


def _has_reader(fifo: Path) -> bool:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    os.close(fd)
    return True


def _daemon_alive(directory: Path) -> bool:
    """Whether a daemon of the directory's id holds its lock."""
    return is_held(directory / DAEMON_LOCK)


def main(argv: list[str] | None = None) -> int:
    # Before the configuration comes in (storage credentials): forked by the fork server, it is
    # undumpable already; started as a new process, it is not yet (zkstore.payloads.secrecy).
    secrecy.set_dumpable(False)
    parser = argparse.ArgumentParser(
        prog="python -m recovery.member.log_shipper", description=__doc__
    )
    parser.add_argument("--config-fd", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--daemon-id", required=True)
    parser.add_argument("--interval", type=float, default=INTERVAL)
    parser.add_argument("--give-up", type=float, default=GIVE_UP)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from recovery.proctitle import set_title, shipper_title

    set_title(shipper_title(args.daemon_id))
    try:
        with os.fdopen(args.config_fd, "rb") as pipe:
            config = StoreConfig.from_json(pipe.read(1 << 20).decode())
    except (OSError, UnicodeDecodeError, ConfigError) as exc:
        parser.error(f"cannot read the storage configuration: {exc}")
    from zkstore.payloads.storage import StateStorage

    try:
        storage = StateStorage(config.storage_url, config.storage_options, timeout=config.timeout)
        private_dir(args.dir)
    except (ConfigError, OSError) as exc:
        parser.error(f"cannot ship: {exc}")
    service = ShipperService(
        args.dir, storage, config.cluster_id, interval=args.interval, give_up=args.give_up
    )
    return service.run()


if __name__ == "__main__":
    sys.exit(main())
