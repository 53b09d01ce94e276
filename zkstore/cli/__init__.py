"""The store's half of the ``zkstore`` command line; :mod:`recovery.cli.main` adds the runtime's.

The root group (:mod:`zkstore.cli.base`) names every command with the module that defines it and
imports that module only when the command is used: ``zkstore --version`` and a usage error pay
for click and nothing of ours beyond the group.
"""

from zkstore.cli.base import DevCommand, cli

cli.add_command(
    DevCommand(
        "zookeeper",
        "zkstore.dev.commands:zookeeper",
        "Run the embedded ZooKeeper in the foreground, for development.",
    )
)

__all__ = ["cli"]
