"""The previous release: which one it is, its commit, and a virtual environment that runs it.

The previous release is the newest version in ``CHANGELOG.md`` (its ``## X.Y.Z (date): ...``
headings) older than the code that runs this (``zkstore.__version__``, PEP 440 ordering:
``0.3.0.dev0`` > ``0.2.0``). Its commit is the tag ``vX.Y.Z`` if the clone has it, else the
first commit that set ``__version__ = "X.Y.Z"`` in ``zkstore/__init__.py``: history is enough, a
CI clone without tags finds the same commit (docs/releasing.md).

:func:`build` makes it once per cache directory: ``git archive`` of that commit into
``<cache>/<version>-<short commit>/src``, a virtual environment of its own beside it, and the
release installed there (not editable) with its own ``constraints.txt``; a ``complete`` file,
written last, says the build may be reused.
"""

from __future__ import annotations

import fcntl
import io
import json
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

__all__ = [
    "COMPLETE",
    "HEADING",
    "VERSION_FILE",
    "Build",
    "Release",
    "ReleaseError",
    "build",
    "find_previous",
    "previous_version",
    "release_at",
    "release_commit",
    "released_versions",
]

#: A release's heading in CHANGELOG.md: ``## 0.2.0 (2026-11-28): a few words``.
HEADING = re.compile(r"^## (?P<version>[^\s(]+) \((?P<date>[^)]*)\)", re.MULTILINE)
VERSION_FILE = "zkstore/__init__.py"
COMPLETE = "complete"


class ReleaseError(Exception):
    """No previous release, or it cannot be found or built: the upgrade test cannot run."""


@dataclass(frozen=True)
class Release:
    """A release and its commit; ``found_by`` says how (the tag, or the version's first commit)."""

    version: str
    commit: str
    found_by: str

    @property
    def short(self) -> str:
        return self.commit[:7]


@dataclass(frozen=True)
class Build:
    """A release installed in a virtual environment of its own."""

    release: Release
    root: Path
    #: the release's own fleet protocol (1 for a release older than the fleet protocol)
    protocol: int
    #: what ``zkstore --version`` of the release says
    says: str
    reused: bool
    seconds: float

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    @property
    def zkstore(self) -> Path:
        return self.root / "venv" / "bin" / "zkstore"


# -- which release ---------------------------------------------------------------------------------


def released_versions(changelog: str) -> list[Version]:
    """Every release the changelog's headings name, newest first as written (``Unreleased`` and
    headings that are not a version are not releases)."""
    found = []
    for match in HEADING.finditer(changelog):
        try:
            found.append(Version(match.group("version")))
        except InvalidVersion:
            continue
    return found


def previous_version(changelog: str, current: str) -> Version:
    """The newest release of ``changelog`` older than ``current``; :class:`ReleaseError` if
    there is none."""
    now = Version(current)
    older = [v for v in released_versions(changelog) if v < now]
    if not older:
        raise ReleaseError(f"CHANGELOG.md names no release older than {current}")
    return max(older)


def release_commit(repo: Path, version: str) -> Release:
    """The commit of ``version``: the tag ``v<version>`` if present, else the first commit that
    set ``__version__ = "<version>"``. Checked to say that version."""
    tag = f"v{version}"
    tagged = _git(repo, "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}", check=False)
    if tagged:
        release = Release(version, tagged, f"tag {tag}")
    else:
        setting = f'__version__ = "{version}"'
        log = _git(repo, "log", f"-S{setting}", "--reverse", "--format=%H", "--", VERSION_FILE)
        if not log:
            raise ReleaseError(
                f"no tag {tag} and no commit that set {setting} in {VERSION_FILE}: "
                "a shallow clone? (the upgrade test needs the history)"
            )
        release = Release(version, log.splitlines()[0], f"first commit setting {setting}")
    said = _git(repo, "show", f"{release.commit}:{VERSION_FILE}")
    if f'__version__ = "{version}"' not in said:
        raise ReleaseError(f"{release.found_by} ({release.short}) does not say {version}")
    return release


def release_at(repo: Path, commit: str) -> Release:
    """The code of any commit, taken for a release of the version it says (to run the upgrade
    test from a commit that is not the previous release: ``--against``)."""
    full = _git(repo, "rev-parse", "--verify", f"{commit}^{{commit}}")
    said = re.search(
        r'^__version__ = "([^"]+)"', _git(repo, "show", f"{full}:{VERSION_FILE}"), re.M
    )
    if said is None:
        raise ReleaseError(f"{commit}: {VERSION_FILE} says no __version__")
    return Release(said.group(1), full, f"commit {commit}, given with --against")


def find_previous(repo: Path, current: str) -> Release:
    """The release before ``current`` (this code's version) and its commit."""
    changelog = (repo / "CHANGELOG.md").read_text()
    return release_commit(repo, str(previous_version(changelog, current)))


def _git(repo: Path, *args: str, check: bool = True) -> str:
    ran = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120
    )
    if ran.returncode != 0:
        if not check:
            return ""
        raise ReleaseError(f"git {' '.join(args)}: {ran.stderr.strip()}")
    return ran.stdout.strip()


# -- building it -----------------------------------------------------------------------------------


def build(
    repo: Path,
    release: Release,
    cache: Path,
    *,
    python: str = "python3.11",
    say: Callable[[str], None] = print,
) -> Build:
    """The release installed under ``cache`` (made now, or reused if a complete build is
    there). Raises :class:`ReleaseError` if a step fails, with its output's tail."""
    began = time.monotonic()
    root = cache / f"{release.version}-{release.short}"
    with _locked(cache, root.name):
        reused = (root / COMPLETE).is_file()
        if reused:
            say(f"reusing the build of {release.version} in {root}")
        else:
            _make(repo, release, root, python, say)
        protocol, says = _identify(root)
        if not reused:
            (root / COMPLETE).write_text(
                json.dumps({"version": release.version, "commit": release.commit, "says": says})
            )
    seconds = time.monotonic() - began
    return Build(release, root, protocol, says, reused, seconds)


def _make(
    repo: Path, release: Release, root: Path, python: str, say: Callable[[str], None]
) -> None:
    if root.exists():
        say(f"removing an incomplete build in {root}")
        shutil.rmtree(root)
    src, venv = root / "src", root / "venv"
    src.mkdir(parents=True)
    began = time.monotonic()
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", release.commit],
        capture_output=True,
        timeout=300,
    )
    if archive.returncode != 0:
        raise ReleaseError(f"git archive {release.short}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data")
    say(f"git archive {release.short} -> {src} ({time.monotonic() - began:.1f} s)")
    began = time.monotonic()
    _run([python, "-m", "venv", str(venv)], root)
    say(f"{python} -m venv {venv} ({time.monotonic() - began:.1f} s)")
    constraints = src / "constraints.txt"
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    if constraints.is_file():
        install += ["-c", str(constraints)]
    began = time.monotonic()
    _run([*install, f"{src}[s3]"], root)
    say(f"pip install {src.name}[s3] (not editable) ({time.monotonic() - began:.1f} s)")


def _identify(root: Path) -> tuple[int, str]:
    """The built release's fleet protocol and its ``--version`` line (run outside the checkout,
    so that nothing of the working tree shadows the installed release)."""
    probe = (
        "try:\n"
        "    from zkstore.protocol import PROTOCOL\n"
        "except ImportError:\n"  # a release older than the fleet protocol speaks protocol 1
        "    PROTOCOL = 1\n"
        "print(PROTOCOL)\n"
    )
    protocol = int(_run([str(root / "venv" / "bin" / "python"), "-c", probe], root).strip())
    says = _run([str(root / "venv" / "bin" / "zkstore"), "--version"], root).strip()
    return protocol, says


def _run(command: list[str], cwd: Path) -> str:
    ran = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800)
    if ran.returncode != 0:
        tail = "\n".join((ran.stdout + ran.stderr).strip().splitlines()[-15:])
        raise ReleaseError(f"{' '.join(command[:4])} ... failed ({ran.returncode}):\n{tail}")
    return ran.stdout


@contextmanager
def _locked(cache: Path, name: str) -> Iterator[None]:
    """One build of a release at a time in this cache (two runs side by side wait)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
