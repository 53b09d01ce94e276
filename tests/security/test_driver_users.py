"""The launcher with ``--driver-user``: a driver started (forked by the fork server, or as a new
process) runs as the user with its groups, dumpable again (its own ``/proc`` entries its
user's), in a directory and scratch of that user's, mode 0700, beside the other drivers' in a
work directory they may pass through (0711) but not list; its log stays the daemon's (0600);
and the daemon removes that directory, never following a link its driver planted. What the
daemon refuses at its start: a Python the user cannot run, a work directory others may change.
Needs root (skips otherwise)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.member.launcher import DriverLauncher
from recovery.settings import DaemonSettings, driver_users
from recovery.shared import attemptdir
from tests.helpers import alive, wait_for
from tests.users import User, shared_directory
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError

pytestmark = pytest.mark.integration


@pytest.fixture
def base() -> Iterator[Path]:
    place = shared_directory("zkstore-launch-")
    yield place
    import shutil

    shutil.rmtree(place, ignore_errors=True)


def settings(base: Path, user: User, python: str, **changes: object) -> DaemonSettings:
    # A ZooKeeper nobody runs: the driver waits for it, alive, until it is killed.
    store = StoreConfig(zk_hosts="127.0.0.1:1", storage_url=f"file://{base}/storage")
    values: dict[str, object] = {
        "store": store,
        "daemon_id": "d1",
        "work_dir": str(base / "work"),
        "log_dir": str(base / "logs"),
        "python": python,
        "driver_users": driver_users([user.name]),
        **changes,
    }
    return DaemonSettings(**values)  # type: ignore[arg-type]


def status_ids(pid: int) -> dict[str, list[int]]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in {"Uid", "Gid", "Groups"}:
            found[key] = [int(v) for v in value.split()]
    return found


@pytest.mark.parametrize("fork_server", [True, False], ids=["forked", "spawned"])
def test_a_driver_runs_as_its_user_in_a_directory_of_its_own(
    base: Path, other_users: list[User], their_python: str, fork_server: bool
) -> None:
    user, python = other_users[0], their_python
    launcher = DriverLauncher(settings(base, user, python, fork_server=fork_server))
    launch = None
    try:
        launch = launcher.launch("job", 1, 0)
        pid = launch.process.pid
        wait_for(
            lambda: status_ids(pid)["Uid"] == [user.uid] * 4,
            timeout=30,
            what="the driver as its user",
        )
        ids = status_ids(pid)
        assert ids["Gid"] == [user.gid] * 4 and ids["Groups"] == [user.gid], ids
        assert os.stat(f"/proc/{pid}/environ").st_uid == user.uid, "dumpable: its /proc is its"
        for place in (launch.work_dir, attemptdir.scratch(launch.work_dir)):
            info = os.lstat(place)
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.uid, 0o700), place
        root = os.lstat(launcher.work_root)
        assert (root.st_uid, stat.S_IMODE(root.st_mode)) == (0, 0o711)
        log = os.lstat(launch.log_path)
        assert (log.st_uid, stat.S_IMODE(log.st_mode)) == (0, 0o600), "the daemon's log file"
        shipping = os.lstat(launcher.work_root / ".shipping" / "d1")  # its follow requests
        assert (shipping.st_uid, stat.S_IMODE(shipping.st_mode)) == (0, 0o700)
    finally:
        if launch is not None:
            launch.process.kill()
            launch.process.wait()
        launcher.close()
        shipper = launcher.shipping.pid  # it stores the killed driver's log, then exits
        if shipper is not None:
            wait_for(lambda: not alive(shipper), timeout=60, what="the log shipper gone")
    assert launch is not None
    planted = base / "victim"
    planted.mkdir()
    (planted / "keep").write_text("not zkstore's")
    os.symlink(planted, launch.work_dir / "link")  # as the driver could have
    attemptdir.remove(launch.work_dir, launcher.driver_uids)
    assert not launch.work_dir.exists() and not attemptdir.scratch(launch.work_dir).exists()
    assert (planted / "keep").read_text() == "not zkstore's", "the link was not followed"


def test_the_daemon_refuses_what_its_drivers_could_not_use(
    base: Path, other_users: list[User], their_python: str
) -> None:
    user, python = other_users[0], their_python
    private = base / "private"
    private.mkdir(mode=0o700)
    os.symlink(python, private / "python")
    with pytest.raises(ConfigError, match=f"--driver-user {user.name} cannot run .*denied"):
        DriverLauncher(settings(base, user, str(private / "python")))
    (base / "open").mkdir()
    (base / "open").chmod(0o777)
    with pytest.raises(ConfigError, match="nobody else may change"):
        DriverLauncher(settings(base, user, python, work_dir=str(base / "open")))
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(base / "open")
