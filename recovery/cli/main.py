"""The ``zkstore`` console script: one click group, every command named with its module.

Every command-line module lives in this package (:mod:`recovery.cli`), above both libraries:
one module per noun (``jobs`` and ``schedules`` are packages of a few, still one place each).
The table below names each command with its module; the root group
(:class:`recovery.cli.base.LazyGroup`) imports a command's module when that command is used, so
``zkstore --version``, ``--help`` and a usage error answer after importing click and the group
only.

Before anything else, every command (the daemon included) makes its process undumpable and
takes the secret variables out of its environment (:mod:`zkstore.payloads.secrecy`): the console
script does it before importing this module (:mod:`recovery.cli.entry`), ``python -m
recovery.cli.main`` here, after the imports.
"""

from __future__ import annotations

from collections.abc import Mapping

from recovery.cli.base import DevCommand, LazyGroup, TakenSecrets, cli
from zkstore.config import SECRET_ENV_VARS
from zkstore.payloads import secrecy

__all__ = ["cli", "main", "run"]

#: Every command: its name, the module that defines it (a noun's module or package), its
#: one-line help (what ``--help`` lists before loading it: a unit test holds them equal).
COMMANDS = (
    ("acl", "recovery.cli.acl_commands", "Who may read and change the cluster's ZooKeeper nodes."),
    (
        "checkpoints",
        "recovery.cli.checkpoint_commands",
        "Inspect checkpoints.",
    ),
    (
        "cluster",
        "recovery.cli.cluster_commands",
        "The cluster as a whole: the settings its leader enforces.",
    ),
    (
        "control",
        "recovery.cli.control_commands",
        "Change a running job (ctx.config in the job) and see what it applied.",
    ),
    (
        "daemon",
        "recovery.cli.daemon_command",
        "Run the recovery daemon on this host (start one on two or more hosts).",
    ),
    (
        "daemons",
        "recovery.cli.daemons",
        "The daemons of the fleet: who runs what, and draining a daemon before maintenance.",
    ),
    (
        "fleet",
        "recovery.cli.fleet_commands",
        "The fleet's protocol: which daemons run which release, and finalizing an upgrade.",
    ),
    (
        "handles",
        "recovery.cli.handle_commands",
        "Inspect and verify handles; find and clean up lingering state.",
    ),
    (
        "jobs",
        "recovery.cli.jobs",
        "List, inspect, follow and cancel jobs (reads handles and records, never payloads).",
    ),
    (
        "outputs",
        "recovery.cli.output_commands",
        "What jobs committed with their checkpoints (ctx.outputs): only committed parts.",
    ),
    (
        "pools",
        "recovery.cli.pool_commands",
        "Pools: how many of a pool's jobs may run at once and which pool's jobs start first.",
    ),
    (
        "quarantine",
        "recovery.cli.quarantine_commands",
        "Jobs that cannot run as they are: look at them, release or purge them.",
    ),
    (
        "schedules",
        "recovery.cli.schedules",
        "Jobs run at every window of a cron expression or an interval, each window once.",
    ),
    (
        "submit",
        "recovery.cli.submit",
        "Submit a PySpark job; accepted as soon as it is durable, leader or not.",
    ),
)

assert isinstance(cli, LazyGroup)
for _name, _module, _help in COMMANDS:
    cli.add_lazy(_name, _module, _help)

cli.add_command(
    DevCommand(
        "demo",
        "recovery.dev.demo:demo",
        "Tell the failover story end to end (embedded ZooKeeper, two daemons, local Spark).",
    )
)
cli.add_command(
    DevCommand(
        "zookeeper",
        "zkstore.dev.commands:zookeeper",
        "Run the embedded ZooKeeper in the foreground, for development.",
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
