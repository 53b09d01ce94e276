"""Process titles that name the role and the job, so that ``ps`` tells which process is which.

Every driver used to show as ``python -m recovery.member.forkserver`` (forked from the fork server);
with a title it shows as ``zkstore driver JOB attempt N``, a daemon as ``zkstore daemon ID``,
a daemon's log shipper as ``zkstore log-shipper ID`` and a warm driver JVM as
``zkstore warm-driver ID``.

How: :pypi:`setproctitle` (the library gunicorn, celery and postgres-style daemons use) rewrites
the process's command line (what ``ps aux``, ``top -c`` and ``pgrep -f`` show) and its kernel name
(``/proc/PID/comm``, 15 bytes: what ``ps -o comm`` and ``top`` show). Its default also
overwrites ``/proc/PID/environ`` to make room for a long title: tools that find a cluster's
drivers by their environment (:meth:`recovery.dev.localcluster.LocalCluster.driver_processes`)
and tests that read a driver's ``/proc/self/environ`` for leaked secrets would then read zeros.
So it runs with ``SPT_NOENV`` set: the environment is left alone, and a title is cut to the
length of the original command line (a fork server's child has
``<python> -m recovery.member.forkserver``, 50 to 80 bytes): :func:`fit` shortens the job id in the
middle, never the role or the attempt. Without setproctitle installed, only the kernel name is
set (``prctl(PR_SET_NAME)`` through ``/proc/self/comm``), which needs no room at all.

Pure but for :func:`set_title`. A title is built from validated job ids and daemon ids, and is
cleaned anyway (no control characters, bounded): a title is anybody's to read.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "COMM_BYTES",
    "ELLIPSIS",
    "MAX_TITLE",
    "comm_name",
    "daemon_title",
    "driver_title",
    "fit",
    "fork_server_title",
    "set_title",
    "shipper_title",
    "warm_driver_title",
    "warm_up_title",
]

#: Longest title ever set (before fitting it to the room there is).
MAX_TITLE = 200
#: The kernel's name of a process holds 15 bytes and a NUL.
COMM_BYTES = 15
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")
ELLIPSIS = "~"


def driver_title(job_id: str, attempt: int) -> tuple[str, str, str]:
    """``zkstore driver JOB attempt N`` as (before, job id, after): :func:`fit` cuts the middle."""
    return ("zkstore driver ", job_id, f" attempt {attempt}")


def daemon_title(daemon_id: str) -> tuple[str, str, str]:
    return ("zkstore daemon ", daemon_id, "")


def shipper_title(daemon_id: str) -> tuple[str, str, str]:
    """The daemon's log shipper (one per daemon: it ships every driver's output)."""
    return ("zkstore log-shipper ", daemon_id, "")


def fork_server_title(daemon_id: str) -> tuple[str, str, str]:
    return ("zkstore fork-server ", daemon_id, "")


def warm_driver_title(warm_id: str) -> tuple[str, str, str]:
    """A warm Spark driver JVM (``zkstore daemon --warm-drivers``): a JVM cannot set its own
    title, so its daemon starts it with this as its ``argv[0]`` (``ps`` shows the title, then
    the JVM's arguments; its kernel name stays ``java``)."""
    return ("zkstore warm-driver ", warm_id, "")


def warm_up_title(warm_id: str) -> tuple[str, str, str]:
    """The process that warms a warm driver JVM (a throw-away context and query)."""
    return ("zkstore warm-up ", warm_id, "")


def _clean(text: str) -> str:
    return _UNPRINTABLE.sub("?", text)


def fit(title: tuple[str, str, str], room: int = MAX_TITLE) -> str:
    """The title in at most ``room`` characters (and :data:`MAX_TITLE`): the name in the middle
    is shortened (its start and end kept, ``~`` between) before the role or the attempt is; if
    even the role does not fit, the whole is cut at ``room``."""
    before, name, after = (_clean(part) for part in title)
    room = max(min(room, MAX_TITLE), 0)
    whole = before + name + after
    if len(whole) <= room:
        return whole
    left = room - len(before) - len(after) - len(ELLIPSIS)
    if left < 2:
        return whole[:room]
    head = (left + 1) // 2
    tail = left - head
    return before + name[:head] + ELLIPSIS + (name[-tail:] if tail else "") + after


def comm_name(title: tuple[str, str, str]) -> str:
    """The kernel's 15-byte name: ``zk-driver``, ``zk-daemon``, ``zk-log-shipper``..., from the
    role (a job id would be cut beyond use in 15 bytes)."""
    role = title[0].strip().split(" ", 1)[-1] if title[0].strip() else "zkstore"
    return f"zk-{role}".encode()[:COMM_BYTES].decode(errors="ignore")


def set_title(title: tuple[str, str, str]) -> str:
    """Set this process's title; returns what was set (or ``""`` if nothing could be). Never
    raises: a process without a title still works."""
    try:
        import setproctitle
    except ImportError:
        return _set_comm(comm_name(title))
    os.environ.setdefault("SPT_NOENV", "1")  # read at the first call: keep /proc/PID/environ
    try:
        setproctitle.setproctitle(fit(title, _room()))  # sets the kernel's name too
    except (OSError, ValueError):
        return _set_comm(comm_name(title))
    return setproctitle.getproctitle()


def _room() -> int:
    """The room a title has with ``SPT_NOENV``: this process's original command line, less the
    two bytes setproctitle keeps (measured: a 28-byte command line holds a 26-character title)."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return max(len(f.read()) - 2, 0)
    except OSError:
        return MAX_TITLE


def _set_comm(name: str) -> str:
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(name)
    except OSError:
        return ""
    return name
