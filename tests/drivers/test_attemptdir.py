"""An attempt's directory and Spark's scratch beside it: removed together, and only when they
are this user's directories (a driver started by hand makes its directory in /tmp, where
anybody may plant something where its scratch would go)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recovery.shared import attemptdir

pytestmark = pytest.mark.unit


def test_an_attempts_directory_goes_with_its_scratch(tmp_path: Path) -> None:
    directory = tmp_path / "j-attempt-1"
    (directory / "data").mkdir(parents=True)
    (attemptdir.scratch(directory) / "blockmgr-1").mkdir(parents=True)
    attemptdir.remove(directory)
    assert list(tmp_path.iterdir()) == []
    attemptdir.remove(directory)  # gone already: fine


class Died(Exception):
    """The removing process, dead between two of its steps."""


def test_the_attempts_directory_is_the_last_to_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal cut short after its first step leaves the attempt's directory, which the next
    removal (the driver's, its member's, a restarted daemon's) finds: never a scratch without
    it, and never a directory gone before its scratch (a test saw that, between the two)."""
    directory = tmp_path / "j-attempt-1"
    (directory / "data").mkdir(parents=True)
    (attemptdir.scratch(directory) / "blockmgr-1").mkdir(parents=True)
    rmtree = attemptdir.shutil.rmtree

    def dies_after_one(path: Path, **kwargs: bool) -> None:
        rmtree(path, **kwargs)
        raise Died(path)

    monkeypatch.setattr(attemptdir.shutil, "rmtree", dies_after_one)
    with pytest.raises(Died):
        attemptdir.remove(directory)
    assert [p.name for p in tmp_path.iterdir()] == ["j-attempt-1"]
    monkeypatch.setattr(attemptdir.shutil, "rmtree", rmtree)
    attemptdir.remove(directory)
    assert list(tmp_path.iterdir()) == []


def test_a_link_where_the_scratch_would_be_is_left_with_its_target(tmp_path: Path) -> None:
    directory, theirs = tmp_path / "zkstore-attempt-x", tmp_path / "theirs"
    directory.mkdir()
    (theirs / "keep").mkdir(parents=True)
    attemptdir.scratch(directory).symlink_to(theirs)
    attemptdir.remove(directory)
    assert not directory.exists()
    assert attemptdir.scratch(directory).is_symlink() and (theirs / "keep").is_dir()


@pytest.mark.skipif(os.getuid() != 0, reason="making another user's directory needs root")
def test_another_users_directory_where_the_scratch_would_be_is_left_alone(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "zkstore-attempt-x"
    directory.mkdir()
    planted = attemptdir.scratch(directory)
    (planted / "keep").mkdir(parents=True)
    os.chown(planted, 4242, 4242)
    attemptdir.remove(directory)
    assert not directory.exists() and (planted / "keep").is_dir()
