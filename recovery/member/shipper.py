"""The daemon's log shipper: one process per daemon stores the output of all its drivers.

The driver writes its stdout and stderr (its Python logging, the job's prints, the Spark JVM's
output) to the attempt's log file on the host, exactly as without shipping: the driver never
waits for the shipper, and its writes never fail because of it. The shipper follows every
attempt of its daemon and stores what is new every few seconds as a chunk
(:class:`zkstore.jobs.logship.LogShipper`, one per attempt), then, once the driver has exited,
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
last one got to (:meth:`~zkstore.jobs.logship.LogShipper.resume`): no byte stored twice or
skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import select
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from recovery.member.processes import (
    Adopted,
    Liveness,
    ProcessIdentity,
    identify,
    probe,
    spawn_with_config,
)
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError
from zkstore.jobs.logship import GIVE_UP, INTERVAL, MAX_BACKOFF, LogShipper

if TYPE_CHECKING:
    from zkstore.storage import StateStorage

logger = logging.getLogger(__name__)

#: The shipper runs at a lower priority than the drivers: its work can wait, theirs cannot.
SHIPPER_NICENESS = 10
SHIPPING = ".shipping"
WAKE = "wake"
SERVICE_LOCK = "service.lock"
DAEMON_LOCK = "daemon.lock"
SHIPPER_LOG = "shipper.log"
#: Seconds between two checks, while nothing is followed, that a daemon still holds its lock.
IDLE_CHECK = 5.0
#: Seconds a new shipper waits for one that is exiting to let go of the service lock.
LOCK_WAIT = 10.0
_REQUEST = re.compile(r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]*)-attempt-(?P<attempt>[0-9]+)\.json")


def shipping_dir(work_root: Path, daemon_id: str) -> Path:
    return work_root / SHIPPING / daemon_id


def shipper_config(config: StoreConfig) -> str:
    """The storage settings only: the shipper has no use for the signing key."""
    return config.with_changes(signing_key=None).to_json()


def shipper_argv(
    directory: Path, daemon_id: str, interval: float = INTERVAL, give_up: float = GIVE_UP
) -> list[str]:
    """The shipper's arguments; ``{config_fd}`` stands for its configuration pipe."""
    return [
        "--config-fd",
        "{config_fd}",
        "--dir",
        str(directory),
        "--daemon-id",
        daemon_id,
        "--interval",
        str(interval),
        "--give-up",
        str(give_up),
    ]


@dataclass(frozen=True)
class FollowRequest:
    """One attempt for the shipper to follow: its log file, where its driver's output begins in
    it (None: unknown, after what storage holds), the sequence number of the first chunk of this
    follow (None until the shipper has looked), and the driver."""

    job_id: str
    attempt: int
    log: str
    offset: int | None
    first_seq: int | None
    host: str
    pid: int
    start_ticks: int | None
    boot_id: str | None

    @property
    def name(self) -> str:
        return f"{self.job_id}-attempt-{self.attempt}.json"

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(self.host, self.pid, self.start_ticks, self.boot_id)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def parse(cls, data: bytes) -> FollowRequest:
        """Raises ValueError for anything but a request this module wrote."""
        try:
            raw = json.loads(data)
            request = cls(**raw)
        except (TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a follow request: {exc}") from None
        fields: list[tuple[object, type | tuple[type, ...]]] = [
            (request.job_id, str),
            (request.log, str),
            (request.host, str),
            (request.attempt, int),
            (request.pid, int),
            (request.offset, (int, type(None))),
            (request.first_seq, (int, type(None))),
            (request.start_ticks, (int, type(None))),
            (request.boot_id, (str, type(None))),
        ]
        for value, kind in fields:
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(f"not a follow request: {value!r}")
        if _REQUEST.fullmatch(request.name) is None or not os.path.isabs(request.log):
            raise ValueError("not a follow request: a bad job id or log path")
        return request


def _private_dir(directory: Path) -> Path:
    """Make ``directory`` (mode 0700); raise OSError unless it is a directory of this user that
    nobody else may write (the requests in it name files the shipper reads)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{directory} is not a private directory of this user")
    return directory


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(data)
    os.replace(temporary, path)


# -- the daemon's side --------------------------------------------------------------------------


class Shipping:
    """The daemon's hand-over of its attempts to its shipper.

    ``start(argv, config, log)`` starts the shipper process (through the fork server, or as a new
    process) with ``argv`` (:func:`shipper_argv`), ``config`` through its configuration pipe and
    its output appended to ``log``, and returns its pid. Holds the daemon lock from :meth:`open`
    to :meth:`close`.
    """

    def __init__(
        self,
        work_root: Path,
        daemon_id: str,
        config: StoreConfig,
        start: Callable[[list[str], str, Path], int],
        *,
        interval: float = INTERVAL,
    ) -> None:
        self.directory = shipping_dir(work_root, daemon_id)
        self.daemon_id = daemon_id
        self._config = config
        self._start = start
        self._interval = interval
        self._lock = threading.Lock()
        self._daemon_lock = -1
        #: the pid of the last shipper this daemon started (None: none yet)
        self.pid: int | None = None
        self._started: ProcessIdentity | None = None

    def open(self) -> None:
        """Say that a daemon of this id lives (the shipper waits for more work while one does).
        Raises OSError if the directory cannot be made private."""
        with self._lock:
            if self._daemon_lock >= 0:
                return
            _private_dir(self.directory)
            fd = os.open(
                self.directory / DAEMON_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
            )
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._daemon_lock = fd

    def close(self) -> None:
        """This daemon is gone: its shipper finishes what it follows, then exits (told at once:
        it looks whether any daemon is left)."""
        with self._lock:
            if self._daemon_lock < 0:
                return
            os.close(self._daemon_lock)
            self._daemon_lock = -1
        with contextlib.suppress(OSError):  # no shipper: nobody to tell
            _nudge(self.directory)

    def follow(
        self,
        job_id: str,
        attempt: int,
        log_path: Path,
        identity: ProcessIdentity,
        *,
        offset: int | None,
    ) -> None:
        """Hand the attempt's log over to the shipper (idempotent: a request for the same driver
        is left as it is). ``offset`` is where the driver's output begins in the file, None if
        not known (an adopted driver: after what storage holds). Never raises: an attempt the
        shipper cannot be told of keeps its output in the file, and a warning says so."""
        request = FollowRequest(
            job_id,
            attempt,
            str(log_path.resolve()),
            offset,
            None,
            identity.host,
            identity.pid,
            identity.start_ticks,
            identity.boot_id,
        )
        try:
            self.open()
            path = self.directory / request.name
            with contextlib.suppress(FileNotFoundError, ValueError):
                if FollowRequest.parse(path.read_bytes()).identity == identity:
                    self._wake()
                    return
            _write_atomically(path, request.to_bytes())
            self._wake()
        except OSError as exc:
            logger.warning(
                "job %s: attempt %d's log will not be shipped: %s (it stays in %s)",
                job_id,
                attempt,
                exc,
                log_path,
            )

    def ensure_running(self) -> None:
        """Start the shipper if requests wait and none runs (at the daemon's start: a shipper
        killed with its host's processes left its requests behind). Never raises."""
        try:
            self.open()
            if any(_REQUEST.fullmatch(p.name) for p in self.directory.iterdir()):
                self._wake()
        except OSError as exc:
            logger.warning("cannot start the log shipper: %s", exc)

    def _wake(self) -> None:
        """A byte into the shipper's FIFO; no reader (no shipper): start one."""
        if _nudge(self.directory):
            return
        if self._started is not None and probe(self._started) is Liveness.ALIVE:
            return  # ours is starting: it looks for requests once it listens, ours included
        argv = shipper_argv(self.directory, self.daemon_id, self._interval)
        self.pid = self._start(argv, shipper_config(self._config), self.directory / SHIPPER_LOG)
        self._started = identify(self.pid)


def _nudge(directory: Path) -> bool:
    """A byte into the FIFO of ``directory``'s shipper; False if no shipper reads it. Raises
    OSError for anything else."""
    try:
        fd = os.open(directory / WAKE, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT):
            return False
        raise
    try:
        with contextlib.suppress(BlockingIOError):  # full: it has been woken already
            os.write(fd, b"\0")
    finally:
        os.close(fd)
    return True


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
            if name in self.followed or _REQUEST.fullmatch(name) is None:
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
        had_seq = followed.request.first_seq is not None
        ok = shipper.ship(final=final)
        if not had_seq and shipper.first_seq is not None:
            self._remember_start(followed)
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

    def _remember_start(self, followed: _Followed) -> None:
        """Write where this follow began into its request, once: a shipper that replaces this
        one resumes from there (storage says how far it got)."""
        request = replace(
            followed.request,
            offset=followed.shipper.first_offset,
            first_seq=followed.shipper.first_seq,
        )
        path = self.directory / request.name
        try:
            _write_atomically(path, request.to_bytes())
        except OSError as exc:
            logger.warning("cannot update %s: %s", path, exc)
            return
        followed.request = request

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
    try:
        fd = os.open(directory / DAEMON_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recovery.member.shipper", description=__doc__)
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
    from zkstore.storage import StateStorage

    try:
        storage = StateStorage(config.storage_url, config.storage_options, timeout=config.timeout)
        _private_dir(args.dir)
    except (ConfigError, OSError) as exc:
        parser.error(f"cannot ship: {exc}")
    service = ShipperService(
        args.dir, storage, config.cluster_id, interval=args.interval, give_up=args.give_up
    )
    return service.run()


def start_process(python: str, env: dict[str, str]) -> Callable[[list[str], str, Path], int]:
    """A ``start`` for :class:`Shipping` that runs the shipper as a new Python process (when
    the daemon has no fork server)."""

    def start(argv: list[str], config: str, log: Path) -> int:
        shipper = spawn_with_config(
            lambda fd: [
                python,
                "-m",
                "recovery.member.shipper",
                *(str(fd) if a == "{config_fd}" else a for a in argv),
            ],
            config,
            log=log,
            env=env,
            cwd="/",
        )
        with contextlib.suppress(OSError):  # it exited already, or we may not: it runs anyway
            os.setpriority(os.PRIO_PROCESS, shipper.pid, SHIPPER_NICENESS)
        # Reap it when it ends, so that no zombie is left behind; nobody waits for it otherwise.
        threading.Thread(target=shipper.wait, name="log-shipper", daemon=True).start()
        return shipper.pid

    return start


if __name__ == "__main__":
    sys.exit(main())
