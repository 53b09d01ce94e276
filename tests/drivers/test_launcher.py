"""The driver launcher's directories on the host."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from recovery.member.launcher import DriverLauncher
from recovery.settings import DaemonSettings
from zkstore.config import StoreConfig
from zkstore.errors import ConfigError

pytestmark = pytest.mark.unit


def settings(tmp_path: Path, **changes: object) -> DaemonSettings:
    store = StoreConfig(zk_hosts="127.0.0.1:1", storage_url=f"file://{tmp_path}/storage")
    return DaemonSettings(
        store=store,
        daemon_id="d1",
        work_dir=str(tmp_path / "work"),
        fork_server=False,
        **changes,  # type: ignore[arg-type]
    )


def test_the_default_log_directory_is_in_the_work_directory_the_same_for_every_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --log-dir the logs go to ``.logs`` in the work directory: no temporary
    directory per start (issue 49: each start left a ``zkstore-drivers-*`` in /tmp), and a
    restarted daemon finds the logs of the drivers it adopts."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    launcher = DriverLauncher(settings(tmp_path))
    path = launcher.log_path("j", 2)
    assert path == tmp_path / "work" / ".logs" / "j" / "attempt-2.log"
    assert DriverLauncher(settings(tmp_path)).log_path("j", 2) == path
    assert list(temp.iterdir()) == []


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
