"""What a pool's driver user left behind, removed before the user is handed on (issue 54).

A job of a pool user can leave things outside its attempt's directory that outlive its
processes: a set-user-ID copy of a program in ``/tmp`` (whoever runs it becomes that user,
which the pool then gives to the next job), a ``usercustomize.py`` under its home's
``.local`` (run by every Python of the next job of that user), a System V shared memory
segment. As systemd's ``DynamicUser=`` does with ``PrivateTmp=`` and ``RemoveIPC=``, the daemon
removes them once the user runs no process, before a driver runs as it again
(:class:`recovery.member.driveruser.DriverUserPool`): every entry the user owns in the
world-writable places of the host (:data:`PLACES`) and in its home, at any depth the user could
have reached, and the IPC objects it owns or made. Drivers also run with no new privileges
(``PR_SET_NO_NEW_PRIVS``, :func:`zkstore.payloads.secrecy.no_new_privileges`): a set-user-ID file
grants nothing to a driver, its JVM or its job's code, even before it is swept.

The walk never follows a symbolic link (a link the user planted is removed, never its target),
never leaves the file system of the place it started in, and enters only directories the user
may search (what it cannot search it cannot have written into: the other users' attempt
directories, pytest's or the daemon's private ones). It goes by open directories (``openat``
with ``O_NOFOLLOW``, each checked to be the directory it looked at), and removes only entries
the user owns, proved by their status at that moment: inside a directory of the user's, an
entry of another owner (root's, another user's written into a directory the job opened to
all) is kept, with the directories that hold it. A user whose leftovers cannot all be
removed (an immutable file, a mount point, another's entry in its directory) stays out of the
pool: :func:`sweep` says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import stat
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from recovery.settings import DriverUser

__all__ = ["IPC_TABLES", "PLACES", "Swept", "sweep", "sweep_all"]

logger = logging.getLogger(__name__)

#: The world-writable places of a host, where any user may leave a file (``/var/lock`` is
#: usually a link to ``/run/lock``: a place is walked once, whatever names it).
PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
#: ``/proc/sysvipc`` tables and the ``*ctl`` call that removes an entry of each.
IPC_TABLES = {"shm": "shmctl", "sem": "semctl", "msg": "msgctl"}
_IPC_RMID = 0
#: At most this many failures are kept in a :class:`Swept` (the first says why).
_MAX_FAILURES = 5


@dataclass
class Swept:
    """What a sweep removed (entries and IPC objects) and what it could not (``failed``:
    one line each, the first few)."""

    removed: int = 0
    failed: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        if len(self.failed) < _MAX_FAILURES:
            self.failed.append(why)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


_LIBC = _libc()


def sweep(user: DriverUser, places: Collection[str] = PLACES) -> Swept:
    """Remove what ``user`` owns in ``places`` and its home (never the home itself, nor a home
    it does not own), and the IPC objects it owns or made. Call it only while no process runs
    as ``user`` (nothing then races it). Never raises."""
    return sweep_all([user], places)[user.uid]


def sweep_all(users: Sequence[DriverUser], places: Collection[str] = PLACES) -> dict[int, Swept]:
    """:func:`sweep` of each of ``users`` (by user id), in one walk of ``places``: what each
    sweep alone would remove, and its failures, for a walk's cost (seconds of CPU where a
    place holds hundreds of thousands of entries). Each user's entries are removed only where
    it could have reached them (every directory above them searchable by it); in a directory
    of one user's, the others' entries are swept first, as their own sweeps before its would
    have. Call it only while no process runs as any of them. Never raises."""
    swept = {user.uid: Swept() for user in users}
    seen: set[tuple[int, int]] = set()
    roots = [(place, tuple(users)) for place in places]
    roots += [(user.home, (user,)) for user in users if _owns_home(user)]
    for place, who in roots:
        try:
            found = os.stat(place)  # /var/lock -> /run/lock: followed, once
        except OSError:
            continue
        if not stat.S_ISDIR(found.st_mode) or (found.st_dev, found.st_ino) in seen:
            continue
        seen.add((found.st_dev, found.st_ino))
        _walk(os.path.realpath(place), found.st_dev, who, swept)
    for user in users:
        _remove_ipc(user.uid, swept[user.uid])
    return swept


def _owns_home(user: DriverUser) -> bool:
    try:
        found = os.lstat(user.home)
    except OSError:
        return False
    return user.home != "/" and stat.S_ISDIR(found.st_mode) and found.st_uid == user.uid


def _searchable(found: os.stat_result, user: DriverUser) -> bool:
    """Whether ``user`` may pass through the directory ``found`` (its owner, group, others'
    execute bit; access lists are not read)."""
    if found.st_uid == user.uid:
        return bool(found.st_mode & stat.S_IXUSR)
    if found.st_gid in user.groups or found.st_gid == user.gid:
        return bool(found.st_mode & stat.S_IXGRP)
    return bool(found.st_mode & stat.S_IXOTH)


def _walk(
    directory: str, device: int, who: tuple[DriverUser, ...], swept: dict[int, Swept]
) -> None:
    fd = _open_directory(directory, None, None)
    if fd is None:
        if os.path.isdir(directory):
            for user in who:
                swept[user.uid].fail(f"cannot list {directory}")
        return
    try:
        _walk_at(fd, directory, device, who, swept)
    finally:
        os.close(fd)


def _walk_at(
    fd: int, path: str, device: int, who: tuple[DriverUser, ...], swept: dict[int, Swept]
) -> None:
    """Sweep the directory open at ``fd`` (``path`` for messages) for ``who``, the users that
    may have reached it: each one's entries removed, the directories some of them may search
    walked for those (one of theirs first, for the others that may search it)."""
    for name, found in _entries(fd, path, [swept[user.uid] for user in who]):
        full = f"{path}/{name}"
        owner = next((user for user in who if user.uid == found.st_uid), None)
        if stat.S_ISDIR(found.st_mode) and found.st_dev == device:
            may = tuple(u for u in who if u is not owner and _searchable(found, u))
            if may:
                sub = _open_directory(name, fd, found)
                if sub is None:
                    continue  # gone or replaced meanwhile: not what was looked at
                try:
                    _walk_at(sub, full, device, may, swept)
                finally:
                    os.close(sub)
        if owner is not None and _remove(fd, name, full, found, device, owner, swept[owner.uid]):
            swept[owner.uid].removed += 1


def _entries(fd: int, path: str, failed: Sequence[Swept]) -> list[tuple[str, os.stat_result]]:
    """The entries of the directory open at ``fd``, each with its own status (a link's, never
    its target's); what cannot be looked at is a failure of each sweep in ``failed``."""
    try:
        names = os.listdir(fd)
    except OSError as exc:
        for swept in failed:
            swept.fail(f"cannot list {path}: {exc.strerror or exc}")
        return []
    found: list[tuple[str, os.stat_result]] = []
    for name in names:
        try:
            found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except FileNotFoundError:
            continue
        except OSError as exc:
            for swept in failed:
                swept.fail(f"cannot look at {path}/{name}: {exc.strerror or exc}")
    return found


def _open_directory(name: str, fd: int | None, expected: os.stat_result | None) -> int | None:
    """``name`` (under the directory open at ``fd``) opened as a directory without following
    a link, if it is still the one ``expected`` describes; None if not (or gone)."""
    try:
        opened = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        return None
    now = os.fstat(opened)
    if expected is not None and (now.st_dev, now.st_ino) != (expected.st_dev, expected.st_ino):
        os.close(opened)
        return None
    return opened


def _remove(
    fd: int,
    name: str,
    path: str,
    found: os.stat_result,
    device: int,
    user: DriverUser,
    swept: Swept,
) -> bool:
    """Remove the user's entry ``name`` under the directory open at ``fd`` (``found``: its
    status): a file or a link unlinked (a link never followed), a directory emptied of what the
    user owns, at any depth, then removed. An entry of another owner inside is kept, and so
    are the directories that hold it (what the user was given is not the user's to lose):
    ``swept`` says which, and the user stays out of the pool until somebody decides. True if
    the entry is gone."""
    try:
        if not stat.S_ISDIR(found.st_mode):
            os.unlink(name, dir_fd=fd)
            return True
        if found.st_dev != device:
            swept.fail(f"cannot remove {path}: another file system is mounted there")
            return False
        sub = _open_directory(name, fd, found)
        if sub is None:
            return False  # gone or replaced meanwhile: not what was looked at
        try:
            emptied = True
            for child, status in _entries(sub, path, [swept]):
                if status.st_uid != user.uid:
                    swept.fail(
                        f"kept {path}/{child}: uid {status.st_uid}'s, in a directory of "
                        f"{user.name}'s (kept too)"
                    )
                    emptied = False
                elif not _remove(sub, child, f"{path}/{child}", status, device, user, swept):
                    emptied = False
        finally:
            os.close(sub)
        if emptied:
            os.rmdir(name, dir_fd=fd)
        return emptied
    except FileNotFoundError:
        return False
    except OSError as exc:
        swept.fail(f"cannot remove {path}: {exc.strerror or exc}")
        return False


def _remove_ipc(uid: int, swept: Swept) -> None:
    """Remove the System V shared memory segments, semaphore sets and message queues whose
    owner or creator is ``uid`` (``RemoveIPC=``); POSIX ones are files in /dev/shm and
    /dev/mqueue, swept with the places."""
    if _LIBC is None:
        return
    for table, call in IPC_TABLES.items():
        for ipc_id in _ipc_of(table, uid):
            remove = getattr(_LIBC, call)
            args = (ipc_id, 0, _IPC_RMID) if table == "sem" else (ipc_id, _IPC_RMID, None)
            done = remove(*args)
            if done == 0:
                swept.removed += 1
            elif ctypes.get_errno() not in (22, 43):  # EINVAL, EIDRM: gone meanwhile
                swept.fail(f"cannot remove {table} {ipc_id}: {os.strerror(ctypes.get_errno())}")


def _ipc_of(table: str, uid: int) -> list[int]:
    """The ids of ``/proc/sysvipc/<table>`` whose ``uid`` or ``cuid`` is ``uid``."""
    found: list[int] = []
    with contextlib.suppress(OSError), open(f"/proc/sysvipc/{table}") as file:
        header = file.readline().split()
        at = {name: header.index(name) for name in ("uid", "cuid") if name in header}
        ident = 1  # the second column: shmid, semid, msqid
        for line in file:
            values = line.split()
            with contextlib.suppress(ValueError, IndexError):
                if any(int(values[i]) == uid for i in at.values()):
                    found.append(int(values[ident]))
    return found
