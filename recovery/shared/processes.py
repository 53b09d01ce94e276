"""Which process is which on this host: a pid is only a name while its process lives.

A daemon that comes back after a restart finds records of processes it did not fork in this
life (its drivers, its own previous incarnation): the ``running`` node of a driver, the member
record of the daemon, the launch records in its work directory. Each names a host, a pid, the
process's start time (field 22 of ``/proc/<pid>/stat``, in clock ticks since boot) and the boot
(``/proc/sys/kernel/random/boot_id``). A pid is reused once its process is gone, but never with
the same start time in the same boot, so the three together name one process for ever.

What can be known, and by whom (:func:`probe`):

- on the same host and boot: whether that process is alive (ALIVE) or not (DEAD: no such pid,
  another process under that pid, or a zombie, which has exited);
- anywhere else (another host, a record of an earlier boot, a record without a start time):
  nothing (UNKNOWN). A host name may be shared by several machines (containers), and an earlier
  boot may be another machine of that name, so neither is taken as proof of death.

Linux only (``/proc``); elsewhere everything is UNKNOWN and nothing is ever taken for dead.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import select
import signal
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zkstore.payloads import secrecy

if TYPE_CHECKING:
    from recovery.settings import DriverUser

__all__ = [
    "BOOT_ID",
    "EXIT_NOT_SEEN",
    "Adopted",
    "Liveness",
    "ProcessIdentity",
    "boot_id",
    "cwd_name",
    "exists",
    "identify",
    "in_directory",
    "probe",
    "spawn_with_config",
    "start_ticks",
    "this_process",
]

logger = logging.getLogger(__name__)

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class Liveness(enum.Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, for ever: host, boot, pid and start time (None where not known)."""

    host: str
    pid: int
    start_ticks: int | None
    boot_id: str | None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def boot_id() -> str | None:
    """This boot's id, or None where the system does not say (not Linux)."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 (state) on, or None if there is no such
    process. The command name (field 2) may hold spaces and parentheses: it ends at the last
    ``)``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """When the process ``pid`` started (clock ticks since boot), or None if there is none."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])  # field 22


def this_process() -> ProcessIdentity:
    pid = os.getpid()
    return ProcessIdentity(socket.gethostname(), pid, start_ticks(pid), boot_id())


def exists(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host now (any user's, a zombie included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def identify(pid: int) -> ProcessIdentity:
    """The identity of process ``pid`` of this host now (start time None if it is gone)."""
    return ProcessIdentity(socket.gethostname(), pid, start_ticks(pid), boot_id())


def probe(identity: ProcessIdentity) -> Liveness:
    """Whether the process is alive, verifiably dead, or not knowable from here."""
    if identity.start_ticks is None or identity.boot_id is None:
        return Liveness.UNKNOWN
    if identity.host != socket.gethostname() or identity.boot_id != boot_id():
        return Liveness.UNKNOWN
    fields = _stat_fields(identity.pid)
    if fields is None or fields[0] == "Z" or int(fields[19]) != identity.start_ticks:
        return Liveness.DEAD
    return Liveness.ALIVE


def in_directory(directory: Path) -> list[ProcessIdentity]:
    """The processes of this user whose current directory is ``directory``, oldest first."""
    target = str(directory.resolve())
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if os.readlink(entry / "cwd") == target:
                identity = identify(int(entry.name))
                if identity.start_ticks is not None:
                    found.append(identity)
    return sorted(found, key=lambda p: p.start_ticks or 0)


def cwd_name(pid: int) -> str | None:
    """The name of the current directory of process ``pid`` (None if it cannot be read)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).name
    except OSError:
        return None


#: What :class:`Adopted` reports as its "exit code": the process ended, but it was not our
#: child, so how is not known (never a real exit code, which is 0-255, or minus a signal).
EXIT_NOT_SEEN = 256


class Adopted:
    """A live process of this host that is not our child, followed through a pidfd.

    :meth:`open` takes the pidfd first and checks the start time after, so the pidfd is known to
    be of that very process (the pid cannot have been reused in between with the same start
    time). Its exit is seen when the pidfd becomes readable; its exit status cannot be known.
    Offers what a launch needs of a process (``pid``, ``poll``, ``wait``, ``kill``).
    """

    def __init__(self, identity: ProcessIdentity, pidfd: int) -> None:
        self.identity = identity
        self.pid = identity.pid
        self._pidfd = pidfd
        self._ended = False

    @classmethod
    def open(cls, identity: ProcessIdentity) -> Adopted | None:
        """The process, or None if it is not alive (or cannot be followed)."""
        if probe(identity) is not Liveness.ALIVE:
            return None
        try:
            pidfd = os.pidfd_open(identity.pid)
        except (OSError, AttributeError):
            return None
        if probe(identity) is not Liveness.ALIVE:
            os.close(pidfd)
            return None
        return cls(identity, pidfd)

    def fileno(self) -> int:
        """The pidfd: readable once the process has exited (for ``poll``/``select``)."""
        return self._pidfd

    def poll(self) -> int | None:
        if not self._ended:
            readable, _, _ = select.select([self._pidfd], [], [], 0)
            self._ended = bool(readable)
        return EXIT_NOT_SEEN if self._ended else None

    def wait(self) -> int:
        """Block until the process has exited (one thread at a time)."""
        while self.poll() is None:
            select.select([self._pidfd], [], [], 1.0)
        return EXIT_NOT_SEEN

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def close(self) -> None:
        """Release the pidfd, once its exit has been handled (by the thread that waited)."""
        if self._pidfd >= 0:
            self._ended = True
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = -1


def spawn_with_config(
    command: Callable[[int], list[str]],
    config: str,
    *,
    log: Path,
    env: dict[str, str],
    cwd: Path | str,
    user: DriverUser | None = None,
    extra_fds: tuple[int, ...] = (),
    no_new_privileges: bool = False,
) -> subprocess.Popen[bytes]:
    """A new process in its own session, ``command(fd)`` reading ``config`` from the pipe
    ``fd`` (never its environment or command line), its output appended to ``log``, as
    ``user`` (its groups, group and user: this process's if None), inheriting ``extra_fds``
    too, with ``no_new_privileges`` (:func:`zkstore.payloads.secrecy.no_new_privileges`, before its
    exec) if asked. Raises OSError if it cannot be started."""
    read_end, write_end = os.pipe()
    try:
        # A configuration is a few hundred bytes: it fits the pipe's buffer before the child runs.
        os.write(write_end, config.encode())
        os.close(write_end)
        write_end = -1
        with open(log, "ab") as output:
            return subprocess.Popen(
                command(read_end),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=(read_end, *extra_fds),
                user=user.uid if user is not None else None,
                group=user.gid if user is not None else None,
                extra_groups=list(user.groups) if user is not None else None,
                # safe with threads: the hook calls one C function, looked up in the parent
                preexec_fn=secrecy.no_new_privileges_hook() if no_new_privileges else None,  # noqa: PLW1509
            )
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
