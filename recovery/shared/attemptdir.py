"""An attempt's directories on its driver's host, and their removal.

The attempt's directory (``<work dir>/<job>-attempt-<n>``) is its driver's current directory and
holds the job's shipped files, nothing else (:mod:`recovery.driver.workdir`). Beside it,
``<job>-attempt-<n>.spark`` holds what Spark keeps while the driver runs: the driver JVM's
``java.io.tmpdir``, under which Spark makes its temporary directories (``spark-*``), the block
manager's files (``blockmgr-*``: shuffle data, spilled and cached blocks) and the native
libraries it unpacks. Both go when the attempt ends: the driver removes them as it exits, its
member when it sees a driver killed (which can remove nothing), a daemon restarted with its id
when it finds a dead driver's. In ``/tmp``, a killed driver's would stay for ever.

Only a directory of this user's is removed, or of one of the users the daemon runs drivers as
(``--driver-user``: :mod:`recovery.member.driveruser`): never through a symbolic link, never one
somebody else made where ours would be (a driver started by hand makes its directory in
``/tmp``, where anybody may plant a directory beside it; the daemon's default work directory is
private to its user, ``launcher.default_work_root``, or passable but not writable by its drivers'
users). Inside, :func:`shutil.rmtree` opens every directory relative to its parent's descriptor
and checks it is the directory it listed, so a link a driver planted in its own directory (or
swapped in meanwhile) is removed, never followed, even by a daemon that is root.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Collection
from pathlib import Path

#: The suffix of the directory beside an attempt's where Spark keeps its scratch.
SCRATCH_SUFFIX = ".spark"


def scratch(directory: Path) -> Path:
    """Where the Spark JVM of the attempt whose directory is ``directory`` keeps its files."""
    return directory.with_name(directory.name + SCRATCH_SUFFIX)


def make(directory: Path, owner: tuple[int, int] | None = None) -> None:
    """Make an attempt's directory (raises FileExistsError if it is there); with ``owner``
    (uid, gid: its driver's user), that user's, mode 0700, and Spark's scratch beside it too
    (the driver could not make it: the work directory is not its)."""
    directory.mkdir(parents=True)
    if owner is None:
        return
    scratch(directory).mkdir()
    for place in (scratch(directory), directory):
        give(place, owner)


def give(place: Path, owner: tuple[int, int]) -> None:
    """Make the directory ``place`` (not a link to one) ``owner``'s, mode 0700."""
    fd = os.open(place, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, *owner)
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def remove(directory: Path, owners: Collection[int] = ()) -> None:
    """Remove an attempt's directory and its scratch beside it; missing ones are fine, and so
    is anything there that is not a directory of this user's or of ``owners`` (its drivers'
    users: left alone). The scratch goes first: the attempt's directory is what says an attempt
    left something here, so while anything is left, it is too (a removal cut short is done
    again by the next, and whoever sees the directory gone sees everything gone)."""
    for place in (scratch(directory), directory):
        if ours(place, owners):
            shutil.rmtree(place, ignore_errors=True)


def ours(place: Path, owners: Collection[int] = ()) -> bool:
    """Whether ``place`` is a directory (not a link to one) that this user, or one of
    ``owners``, owns."""
    try:
        found = os.lstat(place)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and (found.st_uid == os.getuid() or found.st_uid in owners)
