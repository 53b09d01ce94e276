"""The daemon's side of log shipping: it hands each attempt over to its log shipper.

One process per daemon stores the output of all its drivers (:mod:`recovery.member.log_shipper`
says how and why). The daemon writes a follow request per attempt it launches or adopts into
``<work dir>/.shipping/<daemon>/`` and wakes the shipper through its FIFO, starting one if none
reads it; it holds the daemon lock for as long as it lives, which keeps its shipper waiting for
more work. The request's format and the shipper's arguments live here, shared by both sides.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from recovery.shared.processes import (
    Liveness,
    ProcessIdentity,
    identify,
    probe,
    spawn_with_config,
)
from zkstore.config import StoreConfig
from zkstore.jobs.log_follower import GIVE_UP, INTERVAL

__all__ = [
    "DAEMON_LOCK",
    "REQUEST_NAME",
    "SERVICE_LOCK",
    "SHIPPER_LOG",
    "SHIPPER_NICENESS",
    "SHIPPING",
    "WAKE",
    "FollowRequest",
    "Shipping",
    "is_held",
    "nudge",
    "private_dir",
    "shipper_argv",
    "shipper_config",
    "shipper_niceness",
    "shipping_dir",
    "start_process",
    "write_atomically",
]

logger = logging.getLogger(__name__)

#: The shipper runs at a lower priority than the drivers: its work can wait, theirs cannot
#: (this much nicer than its daemon, as a fork server's ``os.nice`` makes it).
SHIPPER_NICENESS = 10


def shipper_niceness() -> int:
    """The niceness of a shipper started by this process: :data:`SHIPPER_NICENESS` more
    than its own, at most 19 (an absolute 10 raised the priority of the shipper of a daemon
    run at a higher niceness, above its drivers')."""
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + SHIPPER_NICENESS)


#: Its directory under the daemon's work directory, and the files in it (see
#: :mod:`recovery.member.log_shipper`).
SHIPPING = ".shipping"
WAKE = "wake"
SERVICE_LOCK = "service.lock"
DAEMON_LOCK = "daemon.lock"
SHIPPER_LOG = "shipper.log"
REQUEST_NAME = re.compile(r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]*)-attempt-(?P<attempt>[0-9]+)\.json")


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
        if REQUEST_NAME.fullmatch(request.name) is None or not os.path.isabs(request.log):
            raise ValueError("not a follow request: a bad job id or log path")
        return request


def private_dir(directory: Path) -> Path:
    """Make ``directory`` (mode 0700); raise OSError unless it is a directory of this user that
    nobody else may write (the requests in it name files the shipper reads)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{directory} is not a private directory of this user")
    return directory


def write_atomically(path: Path, data: bytes) -> None:
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
            private_dir(self.directory)
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
            nudge(self.directory)

    def finished(self, timeout: float) -> bool:
        """After :meth:`close`: True once no shipper runs (its service lock is free) and no
        attempt is left to follow, within ``timeout`` seconds; False if a shipper still works
        then (it goes on: a driver's output is never cut short for this)."""
        deadline = time.monotonic() + timeout
        while True:
            if self._idle():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)  # the shipper stores its last chunks and exits

    def _idle(self) -> bool:
        try:
            if any(REQUEST_NAME.fullmatch(p.name) for p in self.directory.iterdir()):
                return False
        except FileNotFoundError:
            return True  # no shipper ever ran here
        return not is_held(self.directory / SERVICE_LOCK)

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
            write_atomically(path, request.to_bytes())
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
            if any(REQUEST_NAME.fullmatch(p.name) for p in self.directory.iterdir()):
                self._wake()
        except OSError as exc:
            logger.warning("cannot start the log shipper: %s", exc)

    def _wake(self) -> None:
        """A byte into the shipper's FIFO; no reader (no shipper): start one."""
        if nudge(self.directory):
            return
        if self._started is not None and probe(self._started) is Liveness.ALIVE:
            return  # ours is starting: it looks for requests once it listens, ours included
        argv = shipper_argv(self.directory, self.daemon_id, self._interval)
        self.pid = self._start(argv, shipper_config(self._config), self.directory / SHIPPER_LOG)
        self._started = identify(self.pid)


def is_held(path: Path) -> bool:
    """Whether a process holds a lock (flock) on ``path``: False if it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def nudge(directory: Path) -> bool:
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


def start_process(python: str, env: dict[str, str]) -> Callable[[list[str], str, Path], int]:
    """A ``start`` for :class:`Shipping` that runs the shipper as a new Python process (when
    the daemon has no fork server)."""

    def start(argv: list[str], config: str, log: Path) -> int:
        shipper = spawn_with_config(
            lambda fd: [
                python,
                "-m",
                "recovery.member.log_shipper",
                *(str(fd) if a == "{config_fd}" else a for a in argv),
            ],
            config,
            log=log,
            env=env,
            cwd="/",
        )
        with contextlib.suppress(OSError):  # it exited already, or we may not: it runs anyway
            os.setpriority(os.PRIO_PROCESS, shipper.pid, shipper_niceness())
        # Reap it when it ends, so that no zombie is left behind; nobody waits for it otherwise.
        threading.Thread(target=shipper.wait, name="log-shipper", daemon=True).start()
        return shipper.pid

    return start
