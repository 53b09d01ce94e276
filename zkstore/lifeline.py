"""Child processes that die with their parent: ``python -m zkstore.lifeline PID SIG -- CMD``.

A helper process must not outlive the process that started it: a SIGKILLed process runs no
cleanup, and its children would linger for ever. So it is for a daemon's class-data archive
maker (a Spark JVM computing for half a minute that nobody would use:
:mod:`recovery.member.warm_jvms.archive`) and for the development servers (the embedded
ZooKeeper, the daemons of a local cluster, of ``zkstore zookeeper``, ``zkstore demo`` or a
test run). On Linux this tiny wrapper asks the kernel for a
*parent-death signal* (``prctl(PR_SET_PDEATHSIG)``) and then ``exec``\\ s the real command, so
the signal applies to the command itself (it survives ``execve``) and the process keeps the pid
that :class:`subprocess.Popen` reports.

Why a wrapper rather than ``preexec_fn``: ``preexec_fn`` runs Python between ``fork`` and
``exec`` in a process that may hold other threads' locks (kazoo's, logging's); the wrapper is a
fresh single-threaded interpreter.

The kernel sends the signal when the *thread* that forked the child ends, not only the process:
start such children from a thread that lives as long as they should (the main thread, or one
that waits for the child). On other
systems the command runs unwrapped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1


def supported() -> bool:
    return sys.platform.startswith("linux")


def wrap(
    command: Sequence[str], *, death_signal: int = signal.SIGKILL, python: str | None = None
) -> list[str]:
    """``command`` wrapped so that it receives ``death_signal`` when this process dies (the
    wrapper run by ``python``, this process's by default)."""
    if not supported():
        return list(command)
    return [
        python or sys.executable,
        "-m",
        "zkstore.lifeline",
        str(os.getpid()),
        str(int(death_signal)),
        "--",
        *command,
    ]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m zkstore.lifeline PARENT_PID SIGNAL -- COMMAND...", file=sys.stderr)
        return 2
    parent, death_signal, command = int(argv[0]), int(argv[1]), list(argv[3:])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        print(f"lifeline: prctl failed: {os.strerror(errno)}", file=sys.stderr)
        return 1
    if os.getppid() != parent:  # the parent died before prctl: nobody is left to signal us
        return 1
    os.execvp(command[0], command)
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
