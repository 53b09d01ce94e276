"""The upgrade test finds the previous release's commit in a git history (zkstore_dev/upgrade
previous.py): the tag if the clone has it, else the first commit that set its version."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from zkstore_dev.upgrade.previous import (
    ReleaseError,
    find_previous,
    release_at,
    release_commit,
)

pytestmark = pytest.mark.integration

CHANGELOG = """\
# Changelog

## Unreleased

## 0.2.0 (2026-11-28): the second

## 0.1.0 (2026-10-01): the first
"""


def git(repo: Path, *args: str) -> str:
    ran = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return ran.stdout.strip()


def commit(repo: Path, version: str, message: str) -> str:
    (repo / "zkstore").mkdir(exist_ok=True)
    (repo / "zkstore" / "__init__.py").write_text(f'"""zkstore."""\n\n__version__ = "{version}"\n')
    (repo / "CHANGELOG.md").write_text(CHANGELOG)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """0.1.0, work on it, 0.2.0 (the release), 0.3.0.dev0, work on it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = {
        "0.1.0": commit(repo, "0.1.0", "release: 0.1.0"),
        "0.2.0": commit(repo, "0.2.0", "release: 0.2.0"),
        "0.3.0.dev0": commit(repo, "0.3.0.dev0", "version: 0.3.0.dev0"),
    }
    (repo / "other.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "work")
    return repo, commits


def test_without_tags_the_first_commit_that_set_the_version_is_the_release(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, commits = history
    found = find_previous(repo, "0.3.0.dev0")
    assert (found.version, found.commit) == ("0.2.0", commits["0.2.0"])
    assert found.found_by == 'first commit setting __version__ = "0.2.0"'


def test_the_tag_wins_when_the_clone_has_it(history: tuple[Path, dict[str, str]]) -> None:
    repo, commits = history
    # A fix re-set the version after the release commit: the tag says which commit it was.
    commit(repo, "0.2.0", "fix-up")
    later = commit(repo, "0.2.0", "the tagged one")
    git(repo, "tag", "-a", "v0.2.0", "-m", "zkstore 0.2.0", later)
    found = release_commit(repo, "0.2.0")
    assert (found.commit, found.found_by) == (later, "tag v0.2.0")
    assert release_commit(repo, "0.1.0").commit == commits["0.1.0"]


def test_a_tag_on_a_commit_of_another_version_is_refused(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, commits = history
    git(repo, "tag", "v0.2.0", commits["0.3.0.dev0"])
    with pytest.raises(ReleaseError, match=r"tag v0.2.0 \(\w+\) does not say 0.2.0"):
        release_commit(repo, "0.2.0")


def test_a_version_no_commit_set_is_an_error(history: tuple[Path, dict[str, str]]) -> None:
    repo, _ = history
    with pytest.raises(ReleaseError, match=r"no tag v0\.1\.5 and no commit that set __version__"):
        release_commit(repo, "0.1.5")


def test_any_commit_may_stand_in_for_the_older_release(
    history: tuple[Path, dict[str, str]],
) -> None:
    repo, commits = history
    found = release_at(repo, commits["0.1.0"][:8])
    assert (found.version, found.commit) == ("0.1.0", commits["0.1.0"])
