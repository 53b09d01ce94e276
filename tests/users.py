"""Unix users of a test's own, and a Python they can run: for the tests where the kernel's rules
differ for root (root reads every process's ``/proc`` entries and every directory whatever its
mode, so what job code cannot reach is only shown as another user).

:func:`unix_users` makes users with ``useradd`` (no home, no login shell, a group each) and removes
them with ``userdel``, after killing what is left of their processes. :func:`public_python` is
a Python these users can run with the test's packages: the test's own if every user may run it,
else a virtual environment of the system's Python of the same minor version (outside any
private directory) that adds the test's site-packages to its path (a Python under ``/root``,
pyenv's, cannot be run by anyone else). Both need root: a test that uses them skips with one line
when it is not root.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import BIN

ROOT_ONLY = "needs root: the test creates Unix users and runs processes as them"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip(ROOT_ONLY)


@contextlib.contextmanager
def unix_users(count: int) -> Iterator[list[User]]:
    """``count`` new users (``zkt<random>``, each with its own group), removed afterwards."""
    require_root()
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("needs useradd and userdel (the passwd package)")
    made: list[User] = []
    try:
        for _ in range(count):
            name = f"zkt{uuid.uuid4().hex[:10]}"
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    name,
                ],
                check=True,
                capture_output=True,
            )
            entry = pwd.getpwnam(name)
            made.append(User(name, entry.pw_uid, entry.pw_gid))
        yield made
    finally:
        for user in made:
            kill_processes_of(user.uid)
            subprocess.run(["userdel", "--force", user.name], check=False, capture_output=True)


def kill_processes_of(uid: int) -> None:
    """SIGKILL every process whose real user is ``uid`` (what a test left running as it)."""
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Uid:") and int(line.split()[1]) == uid:
                    os.kill(int(entry.name), signal.SIGKILL)


def runs_for(user: User, python: str) -> bool:
    """Whether ``user`` can run ``python`` and import zkstore with it."""
    try:
        done = subprocess.run(
            [python, "-c", "import recovery.driver.driver"],
            user=user.uid,
            group=user.gid,
            extra_groups=[],
            capture_output=True,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except OSError:  # it may not even run the executable
        return False
    return done.returncode == 0


@contextlib.contextmanager
def public_python(user: User) -> Iterator[str]:
    """A Python that ``user`` (and so any user) can run, with this test's packages."""
    if runs_for(user, sys.executable):
        yield sys.executable
        return
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(minor, path="/usr/local/bin:/usr/bin:/bin")
    if system is None:
        pytest.skip(f"this Python is private to root and there is no system {minor}")
    place = Path(tempfile.mkdtemp(prefix="zkstore-python-"))
    try:
        subprocess.run([system, "-m", "venv", "--without-pip", str(place)], check=True)
        site = Path(sysconfig.get_paths(vars={"base": str(place)})["purelib"])
        ours = sysconfig.get_paths()["purelib"]
        # addsitedir reads the .pth files there too (zkstore's editable install is one)
        (site / "zkstore-test-packages.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        place.chmod(0o755)  # mkdtemp's is private; what venv made in it is readable
        python = str(place / "bin" / "python")
        install_script(Path(python))
        if not runs_for(user, python):
            pytest.skip(f"no Python that user {user.name} can run with this test's packages")
        yield python
    finally:
        shutil.rmtree(place, ignore_errors=True)


def install_script(python: Path) -> None:
    """The ``zkstore`` console script beside ``python``: this installation's own, run by that
    interpreter (the daemons of :class:`~recovery.dev.localcluster.LocalCluster` start through
    the script beside their Python, as a user's do)."""
    ours = (BIN / "zkstore").read_text().split("\n", 1)[1]
    script = python.with_name("zkstore")
    script.write_text(f"#!{python}\n{ours}")
    script.chmod(0o755)


def shared_directory(prefix: str, parent: str | None = None) -> Path:
    """A new directory in the system's temporary directory (or ``parent``) that every user may
    pass through (mode 0711: not list), outside pytest's own (which is private to root)."""
    place = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    place.chmod(0o711)
    return place


def chown_tree(path: Path, user: User) -> None:
    for item in [path, *path.rglob("*")]:
        os.chown(item, user.uid, user.gid, follow_symlinks=False)
