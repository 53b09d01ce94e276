"""Where secrets come from, and what keeps other processes of the same user from reading them.

A zkstore process gets its secrets (the cluster's signing key, the API tokens, the ZooKeeper
credentials) from a file (``--signing-key-file``, ``--api-token-file``,
``--api-read-token-file``, ``--zk-auth-file``: :func:`read_secret_file`) or from its environment
(``ZKSTORE_SIGNING_KEY``...). A job's code runs in a driver, which may be a process of the same
Unix user as the daemon that started it or as an operator's command: without more, it could
read them in ``/proc/<pid>/environ`` or ``/proc/<pid>/mem`` of those processes (reproduced as an
unprivileged user, issue 43). So, first thing in every command (the console script's ``main``),
the daemon's fork server and its log shipper:

- :func:`set_dumpable` ``(False)``: ``prctl(PR_SET_DUMPABLE, 0)``. The kernel then gives the
  process's ``/proc`` entries that need the right to trace it (``environ``, ``mem``, ``maps``,
  ``fd``, ``cwd``...) to root, so another process of the same user can open none of them nor
  attach a debugger; no core dump is written either. Root still reads everything, so does the
  process itself (most entries: not ``environ`` or ``mem`` once its user changed). ``cmdline``
  and ``stat`` stay readable by all (no secret is ever on a command line).
- :func:`take_from_environment`: the secret variables are read once and taken out of the
  environment: out of ``os.environ`` (and the interpreter's own copy, ``posix.environ``), so no
  child process inherits them, and their bytes overwritten in the block the kernel shows as
  ``/proc/<pid>/environ``: that is the environment the process was started with, which changes
  to ``os.environ`` never rewrite (a reader allowed to read it, root, or the process itself,
  finds zeros where the secrets were).

A driver is not made undumpable: it holds only its own job's key and the credentials its job
needs, and job code runs in it anyway; its Spark JVM is a new program, which the kernel makes
dumpable whatever its parent was; the daemon, as the same user, reads a driver's working
directory in ``/proc`` to adopt it after a restart; and a driver reads its own ``environ`` and
``mem``. What keeps two jobs' drivers apart is a user of their own
(``zkstore daemon --driver-user``).

Linux only: elsewhere :func:`set_dumpable` does nothing and returns False, and the environment
block is left as it is (the variables still leave ``os.environ``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
from collections.abc import Callable, Iterable

from zkstore.errors import ConfigError

__all__ = [
    "MAX_SECRET_FILE_BYTES",
    "is_dumpable",
    "no_new_privileges",
    "no_new_privileges_hook",
    "read_secret_file",
    "read_secret_lines",
    "set_dumpable",
    "take_from_environment",
]

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
#: A secret file is a line or a few: a bigger one is not what it should be.
MAX_SECRET_FILE_BYTES = 64 * 1024


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


def set_dumpable(dumpable: bool) -> bool:
    """Make this process dumpable (its ``/proc`` entries readable by its user) or not; True if
    the kernel did it. Never raises."""
    libc = _libc()
    return libc is not None and libc.prctl(_PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) == 0


def no_new_privileges() -> bool:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: from now on no ``execve`` of this process or of
    anything it starts grants privileges (set-user-ID and set-group-ID files run as the caller,
    file capabilities are ignored); it cannot be undone. True if the kernel did it. Never
    raises."""
    return no_new_privileges_hook()()


def no_new_privileges_hook() -> Callable[[], bool]:
    """:func:`no_new_privileges` as a ``preexec_fn``: libc's ``prctl`` is looked up now, in
    the parent, so that the child between ``fork`` and ``exec`` only calls it."""
    libc = _libc()
    prctl = libc.prctl if libc is not None else None

    def hook() -> bool:
        return prctl is not None and prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0

    return hook


def is_dumpable() -> bool | None:
    """Whether this process is dumpable (None where the system does not say)."""
    libc = _libc()
    if libc is None:
        return None
    found = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    return None if found < 0 else found == 1


def take_from_environment(names: Iterable[str]) -> dict[str, str]:
    """The variables of ``names`` that are set, taken out of this process's environment:
    ``os.environ``, ``posix.environ`` and the bytes of the block ``/proc/self/environ`` shows
    (overwritten with zeros, name and value). Never raises."""
    taken: dict[str, str] = {}
    for name in names:
        value = os.environ.pop(name, None)  # unsetenv: gone from the C environment too
        if value is None:
            continue
        taken[name] = value
        with contextlib.suppress(ImportError, AttributeError):  # its copy made at the start
            import posix

            posix.environ.pop(name.encode(), None)
        with contextlib.suppress(OSError, ValueError, IndexError):
            _wipe_initial_environment(name)
    return taken


def _wipe_initial_environment(name: str) -> None:
    """Overwrite every ``name=...`` entry of the environment block this process started with
    (between ``env_start`` and ``env_end`` of ``/proc/self/stat``: fields 50 and 51)."""
    with open("/proc/self/stat", "rb") as file:
        text = file.read()
    fields = text[text.rfind(b")") + 2 :].split()
    start, end = int(fields[47]), int(fields[48])
    if not 0 < start < end:
        return
    block = ctypes.string_at(start, end - start)
    prefix = name.encode() + b"="
    at = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefix):
            ctypes.memset(start + at, 0, len(entry))
        at += len(entry) + 1


def read_secret_file(path: str, option: str) -> str:
    """The first line of the secret file ``path`` (given as ``option``), stripped: a mounted
    Kubernetes or Docker secret, say (a symbolic link to it is followed). Raises ConfigError,
    naming the file and never its content, if it cannot be read, is not a regular file, is
    empty, or if anyone but its owner and its group may read it, anyone but its owner may
    change it, or its owner is neither this user nor root (who may change it for us)."""
    line = _read_secret_text(path, option).split("\n", 1)[0].strip()
    if not line:
        raise ConfigError(f"{option} {path}: its first line is empty")
    return line


def read_secret_lines(path: str, option: str) -> list[tuple[int, str]]:
    """Every line of the secret file ``path`` that is neither blank nor a ``#`` comment, with
    its number, stripped; checked as :func:`read_secret_file` checks (ConfigError if none)."""
    lines = [
        (number, line.strip())
        for number, line in enumerate(_read_secret_text(path, option).split("\n"), start=1)
        if line.strip() and not line.strip().startswith("#")
    ]
    if not lines:
        raise ConfigError(f"{option} {path}: it holds no line")
    return lines


def _read_secret_text(path: str, option: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"{option} {path}: {exc.strerror or exc}") from exc
    try:
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if not stat.S_ISREG(found.st_mode):
            raise ConfigError(f"{option} {path}: not a regular file")
        if mode & 0o027:
            raise ConfigError(
                f"{option} {path}: other users may read or change it (mode {mode:04o}): "
                f"chmod 600 {path} (or 640 for a group of its readers)"
            )
        if found.st_uid not in {0, os.geteuid()}:
            raise ConfigError(
                f"{option} {path}: owned by uid {found.st_uid}, neither this user nor root "
                "(its owner may change it)"
            )
        data = os.read(fd, MAX_SECRET_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{option} {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise ConfigError(f"{option} {path}: over {MAX_SECRET_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{option} {path}: not UTF-8 text") from exc
