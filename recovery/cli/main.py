"""The ``zkstore`` console script: the store's commands plus the runtime's (daemon, submit,
jobs wait, daemons, demo), attached to the same click group by name.

Nothing here imports a command: the root group imports a command's module when that command is
used (:class:`zkstore.cli.base.LazyGroup`), so ``zkstore --version``, ``--help`` and a usage
error answer after importing click and the group only.

Before anything else, every command (the daemon included) makes its process undumpable and
takes the secret variables out of its environment (:mod:`zkstore.secrecy`): the console script
does it before importing this module (:mod:`recovery.cli.entry`), ``python -m
recovery.cli.main`` here, after the imports.
"""

from __future__ import annotations

from collections.abc import Mapping

from zkstore import secrecy
from zkstore.cli import cli
from zkstore.cli.base import DevCommand, LazyGroup, TakenSecrets
from zkstore.config import SECRET_ENV_VARS

__all__ = ["cli", "main", "run"]

assert isinstance(cli, LazyGroup)
cli.add_lazy(
    "daemon",
    "recovery.cli.daemon_command",
    "Run the recovery daemon on this host (start one on two or more hosts).",
)
cli.add_lazy(
    "daemons",
    "recovery.cli.daemons",
    "The daemons of the fleet: who runs what, and draining a daemon before maintenance.",
)
cli.add_lazy(
    "submit",
    "recovery.cli.submit",
    "Submit a PySpark job; accepted as soon as it is durable, leader or not.",
)
cli.extend_lazy("jobs", "recovery.cli.submit")  # jobs wait
cli.extend_lazy("jobs", "recovery.cli.stop_resume_commands")  # jobs stop, jobs resume
cli.extend_lazy("schedules", "recovery.cli.schedule_create_command")  # schedules create

cli.add_command(
    DevCommand(
        "demo",
        "recovery.dev.demo:demo",
        "Tell the failover story end to end (embedded ZooKeeper, two daemons, local Spark).",
    )
)


def main() -> None:
    secrecy.set_dumpable(False)
    run(secrecy.take_from_environment(sorted(SECRET_ENV_VARS)))


def run(taken: Mapping[str, str]) -> None:
    """Run the command line, with the secret variables ``taken`` out of the environment."""
    cli(prog_name="zkstore", obj=TakenSecrets(taken))


if __name__ == "__main__":
    main()
