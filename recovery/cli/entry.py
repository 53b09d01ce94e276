"""The ``zkstore`` console script's entry: the process made undumpable before anything else.

A process is dumpable from its ``execve`` until it says otherwise, and so open to every process
of its user in ``/proc`` (``environ``, ``mem``: a ``mem`` descriptor opened then keeps reading
after; see :mod:`zkstore.payloads.secrecy`). So the first thing the script does, after importing
only :mod:`zkstore.payloads.secrecy` (``ctypes`` and the error classes: a few milliseconds, where
the commands' imports, click's and the runtime's, take tens to hundreds), is
``prctl(PR_SET_DUMPABLE, 0)``, then it takes the secret variables out of its environment, then
it imports the commands (:mod:`recovery.cli.main`). That shortens the window, it cannot close
it: only a user of their own keeps job code out for good (``zkstore daemon --driver-user``;
a daemon that would run its drivers as its own user while it holds secrets is refused unless
told ``--jobs-may-read-secrets``: :func:`recovery.member.driveruser.check_apart`).
"""

from __future__ import annotations

from zkstore.payloads import secrecy

__all__ = ["main"]


def main() -> None:
    secrecy.set_dumpable(False)
    from zkstore.config import SECRET_ENV_VARS

    taken = secrecy.take_from_environment(sorted(SECRET_ENV_VARS))
    from recovery.cli.main import run

    run(taken)


if __name__ == "__main__":
    main()
