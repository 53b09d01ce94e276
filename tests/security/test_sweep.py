"""What a pool's driver user left is swept (:mod:`recovery.member.sweep`), on the real file
system and System V IPC, as root (files are given to a user id nobody uses), and how the pool
keeps a user it could not sweep out (:class:`recovery.member.driveruser.DriverUserPool`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from recovery.member.driveruser import DriverUserPool
from recovery.member.sweep import Swept, sweep, sweep_all
from recovery.settings import DriverUser
from recovery.shared.processes import identify
from tests.helpers import alive, wait_for
from tests.users import User, require_root, shared_directory

pytestmark = pytest.mark.integration


def nobody_uses(tmp_path: Path) -> DriverUser:
    """A user id no process and no file of this host's has, its home in ``tmp_path``."""
    taken = {os.stat(p).st_uid for p in Path("/proc").glob("[0-9]*") if p.exists()}
    uid = next(u for u in range(61000 + os.getpid() % 3000, 65000) if u not in taken)
    return DriverUser(f"uid{uid}", uid, uid, (uid,), str(tmp_path / "home"))


def owned(path: Path, user: DriverUser, text: str = "left") -> Path:
    """A file ``path`` of ``user``'s."""
    path.write_text(text)
    os.chown(path, user.uid, user.gid)
    return path


def give(path: Path, user: DriverUser) -> None:
    os.chown(path, user.uid, user.gid, follow_symlinks=False)


def test_a_sweep_removes_what_the_user_owns_where_it_could_write_and_nothing_else(
    tmp_path: Path,
) -> None:
    require_root()
    user = nobody_uses(tmp_path)
    place = tmp_path / "tmp"
    place.mkdir()
    place.chmod(0o1777)
    owned(place / "suid-python", user).chmod(0o4755)
    own_tree = place / "tree"
    (own_tree / "deep").mkdir(parents=True)
    owned(own_tree / "deep" / "file", user)
    os.symlink(target_of_links := tmp_path / "linked", own_tree / "deep" / "link")
    give(own_tree / "deep" / "link", user)
    give(own_tree / "deep", user)
    give(own_tree, user)
    shared = place / "shared"  # someone's directory the user may write into
    shared.mkdir()
    shared.chmod(0o777)
    owned(shared / "left", user)
    private = place / "private"  # one it cannot pass through: never entered
    private.mkdir(mode=0o700)
    owned(private / "kept", user)
    target = tmp_path / "outside"
    target.mkdir()
    (tmp_path / "linked").mkdir()
    owned(target / "not-swept", user)
    os.symlink(target, place / "link")
    give(place / "link", user)  # the user's link: removed, its target left alone
    (place / "others").write_text("another user's file")
    home = Path(user.home)
    (home / ".local").mkdir(parents=True)
    owned(home / ".local" / "usercustomize.py", user)
    give(home / ".local", user)
    give(home, user)

    swept = sweep(user, [str(place)])

    assert swept.failed == [], swept.failed
    assert sorted(p.name for p in place.iterdir()) == ["others", "private", "shared"]
    assert list(shared.iterdir()) == []
    assert (private / "kept").exists(), "a directory it cannot search is not entered"
    assert (target / "not-swept").exists(), "a link is removed, never followed"
    assert target_of_links.is_dir(), "a link inside the user's tree is removed, not followed"
    assert home.is_dir() and list(home.iterdir()) == [], "its home is emptied, not removed"
    assert swept.removed == 5  # the file, its tree, the shared one, the link, .local


def test_entries_of_others_inside_the_users_directory_are_kept_and_said(
    other_users: list[User],
) -> None:
    """A job of pool user A opened a directory to all; user B (a real user, not root) wrote a
    file and a directory into it. The sweep removes A's entries only: B's stay, with A's
    directories that hold them, and the sweep says so (A stays out of the pool until someone
    decides); a directory of A's with nothing of another's inside goes whole."""
    a, b = other_users
    user = DriverUser(a.name, a.uid, a.gid, (a.gid,), "/nonexistent")
    outer = shared_directory("loose-sweep-")  # pytest's own is root's alone: B could not write
    try:
        kept_and_said(outer, a, b, user)
    finally:
        shutil.rmtree(outer, ignore_errors=True)


def kept_and_said(outer: Path, a: User, b: User, user: DriverUser) -> None:
    place = outer / "tmp"
    place.mkdir()
    place.chmod(0o1777)
    opened = place / "opened"
    (opened / "inner").mkdir(parents=True)
    for path in (opened / "inner", opened):
        path.chmod(0o777)
        os.chown(path, a.uid, a.gid)
    owned(opened / "mine", user)
    owned(opened / "inner" / "mine-too", user)
    alone = place / "alone"
    alone.mkdir()
    owned(alone / "only-mine", user)
    os.chown(alone, a.uid, a.gid)
    as_user(b, lambda: (opened / "inner" / "theirs").write_text("B's"))
    as_user(b, (opened / "their-dir").mkdir)

    swept = sweep(user, [str(place)])

    assert sorted(p.name for p in place.iterdir()) == ["opened"]
    assert sorted(p.name for p in opened.iterdir()) == ["inner", "their-dir"]
    assert [p.name for p in (opened / "inner").iterdir()] == ["theirs"]
    assert (opened / "inner" / "theirs").read_text() == "B's"
    assert swept.removed == 1  # alone, whole
    assert sorted(swept.failed) == sorted(
        [
            f"kept {opened}/inner/theirs: uid {b.uid}'s, in a directory of {a.name}'s (kept too)",
            f"kept {opened}/their-dir: uid {b.uid}'s, in a directory of {a.name}'s (kept too)",
        ]
    )


def test_one_walk_sweeps_each_user_as_its_own_sweep_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's users swept together (the daemon's start, a periodic look): one walk of each
    place, not one per user (seen: 3-5 s of CPU per walk of this host's /tmp), removing what
    each user's own sweep would, where that user could reach it. In a directory of one user's
    that the other may search, the other's entries go first, as its own sweep before the
    first's would have done: the first's directory then goes whole, nothing kept, no failure."""
    require_root()
    first = nobody_uses(tmp_path)
    second = DriverUser(f"uid{first.uid + 1}", first.uid + 1, first.uid + 1, (), "/nonexistent")
    assert not any(p.stat().st_uid == second.uid for p in Path("/proc").glob("[0-9]*"))
    place = tmp_path / "tmp"
    place.mkdir()
    place.chmod(0o1777)
    owned(place / "first-file", first)
    owned(place / "second-file", second)
    opened = place / "opened"  # the first's, opened to all: the second wrote into it
    opened.mkdir(mode=0o777)
    opened.chmod(0o777)
    owned(opened / "second-inside", second)
    give(opened, first)
    private = place / "private"  # root's alone: neither could reach what is inside
    private.mkdir(mode=0o700)
    owned(private / "first-kept", first)
    theirs = place / "second-only"  # searchable by the second's group alone
    theirs.mkdir()
    theirs.chmod(0o750)
    os.chown(theirs, 0, second.gid)
    owned(theirs / "first-unreached", first)
    owned(theirs / "second-there", second)
    listed: list[tuple[int, int]] = []
    listdir = os.listdir

    def listing(fd: int) -> list[str]:
        found = os.fstat(fd)
        listed.append((found.st_dev, found.st_ino))
        return listdir(fd)

    monkeypatch.setattr(os, "listdir", listing)

    swept = sweep_all([first, second], [str(place)])

    monkeypatch.undo()
    assert swept[first.uid].failed == [] and swept[second.uid].failed == []
    assert sorted(p.name for p in place.iterdir()) == ["private", "second-only"]
    assert (private / "first-kept").exists(), "a directory neither can search is not entered"
    assert [p.name for p in theirs.iterdir()] == ["first-unreached"], "reached by the second"
    assert swept[first.uid].removed == 2  # its file, its opened directory (whole)
    assert swept[second.uid].removed == 3  # its file, the one inside, the one it could reach
    root = place.stat()
    assert listed.count((root.st_dev, root.st_ino)) == 1, "the place is walked once"


def as_user(user: User, action: Callable[[], object]) -> None:
    """Run ``action`` in a child process of ``user``'s (its ids only, no groups)."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_sweep_removes_the_users_system_v_ipc(tmp_path: Path) -> None:
    require_root()
    user = nobody_uses(tmp_path)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # as the user: its segment (uid and cuid its)
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            os.write(write_end, str(ctypes.CDLL(None).shmget(0, 4096, 0o1600)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    made = os.read(read_end, 100)
    os.close(read_end)
    os.waitpid(child, 0)
    segment = int(made)
    assert segment >= 0

    def listed() -> bool:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        return any(int(line.split()[1]) == segment for line in lines)

    try:
        assert listed()
        swept = sweep(user, [])
        assert swept.failed == [] and swept.removed == 1
        assert not listed()
    finally:
        ctypes.CDLL(None).shmctl(segment, 0, None)


def test_a_user_that_cannot_be_swept_stays_out_of_the_pool_until_it_can() -> None:
    users = [DriverUser(f"u{i}", 62000 + i, 62000 + i, (), "/nonexistent") for i in range(2)]
    why = "cannot remove /tmp/x: Operation not permitted"
    failing = {users[0].uid}
    swept: list[str] = []

    def sweeper(users: Sequence[DriverUser]) -> dict[int, Swept]:
        swept.extend(user.name for user in users)
        return {user.uid: Swept(failed=[why] if user.uid in failing else []) for user in users}

    pool = DriverUserPool(users, sweeper)
    assert pool.take() == users[1], "the first could not be swept"
    assert pool.reclaim() == {"u0": f"cannot be cleaned: {why}"}
    with pytest.raises(OSError, match=f"u0: cannot be cleaned: {why}; u1: runs a driver"):
        pool.take()
    failing.clear()
    assert pool.reclaim() == {}, "swept at the next look: back in the pool"
    assert pool.take() == users[0]
    assert swept.count("u1") == 1
    pool.release(users[1])
    assert pool.take() == users[1]
    assert swept.count("u1") == 2, "swept again before it is handed on again"


def test_what_a_driver_left_is_ended_even_when_a_periodic_look_finds_it_gone_first(
    tmp_path: Path,
) -> None:
    """The daemon's periodic look at the pool (``reclaim``) and the driver's exit race: the
    look found the driver gone first and forgot it, so the exit's ``ended`` knew no driver and
    killed nothing. Its child ran on, and its user stayed out of the pool while it did (seen
    in a fresh-clone ``make test``: test_two_jobs_of_a_pool_are_apart_and_their_adopted_...)."""
    require_root()
    users = [nobody_uses(tmp_path), DriverUser("spare", 64999, 64999, (), "/nonexistent")]
    pool = DriverUserPool(users, lambda users: {user.uid: Swept() for user in users})
    user = pool.take()
    driver = subprocess.Popen(  # a driver in its own session that leaves a child and exits
        ["/bin/sh", "-c", "sleep 600 & echo $!; read line"],
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        start_new_session=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert driver.stdout is not None and driver.stdin is not None
    child = int(driver.stdout.readline())
    try:
        pool.started(user, identify(driver.pid))
        identity = identify(driver.pid)
        driver.stdin.close()
        driver.wait(timeout=30)
        pool.reclaim()  # the periodic look, before the exit is handled
        assert pool.ended(identity) == (user.name, 1), "the exit still says what it killed"
        wait_for(lambda: not alive(child), 10, what="the child the driver left killed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
