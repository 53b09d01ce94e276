"""The driver launcher's directories on the host."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from recovery.member.launcher import DriverLauncher
from recovery.settings import DaemonSettings
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError


def settings(tmp_path: Path, **changes: object) -> DaemonSettings:
    store = StoreConfig(zk_hosts="127.0.0.1:1", storage_url=f"file://{tmp_path}/storage")
    return DaemonSettings(
        store=store,
        daemon_id="d1",
        work_dir=str(tmp_path / "work"),
        fork_server=False,
        **changes,  # type: ignore[arg-type]
    )


def test_the_default_log_directory_is_made_only_when_a_log_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --log-dir a daemon that runs no driver here leaves nothing in /tmp (the suite
    once left hundreds of empty zkstore-drivers-* directories there)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    launcher = DriverLauncher(settings(tmp_path))
    launcher.close()
    assert list(temp.iterdir()) == []
    path = launcher.log_path("j", 2)
    made = list(temp.iterdir())
    assert len(made) == 1 and made[0].name.startswith("zkstore-drivers-")
    assert path == made[0] / "j" / "attempt-2.log"
    assert launcher.log_path("j", 3).parent == path.parent, "one directory for every log"


def test_a_given_log_directory_is_used_and_nothing_temporary_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    launcher = DriverLauncher(settings(tmp_path, log_dir=str(tmp_path / "logs")))
    assert launcher.log_path("j", 1) == tmp_path / "logs" / "j" / "attempt-1.log"
    assert list(temp.iterdir()) == []


def test_the_default_work_directory_is_private_or_passable_by_driver_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Private to the daemon's user (0700); with --driver-user, its drivers pass through it to
    their attempts' directories (0711), an existing private one included, and may still not list
    or change it."""
    import os
    import stat

    from recovery.member.launcher import default_work_root
    from recovery.settings import DriverUser

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / f"zkstore-{os.getuid()}"
    plain = settings(tmp_path)
    assert default_work_root(plain).is_relative_to(base)
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    users = (DriverUser("driver", 4242, 4242, (4242,), "/"),)
    default_work_root(settings(tmp_path, driver_users=users))
    assert stat.S_IMODE(base.stat().st_mode) == 0o711
    base.chmod(0o755)
    with pytest.raises(ConfigError, match="not a private directory of this user"):
        default_work_root(settings(tmp_path, driver_users=users))
