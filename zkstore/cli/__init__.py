"""The store's half of the ``zkstore`` command line; :mod:`recovery.cli.main` adds the runtime's."""

from zkstore.cli import acl as _acl  # noqa: F401  (registers its commands)
from zkstore.cli import control as _control  # noqa: F401
from zkstore.cli import handles as _handles  # noqa: F401
from zkstore.cli import jobs as _jobs  # noqa: F401
from zkstore.cli import logs as _logs  # noqa: F401
from zkstore.cli import quarantine as _quarantine  # noqa: F401
from zkstore.cli import schedules as _schedules  # noqa: F401
from zkstore.cli.base import DevCommand, cli

cli.add_command(
    DevCommand(
        "zookeeper",
        "zkstore.dev.commands:zookeeper",
        "Run the embedded ZooKeeper in the foreground, for development.",
    )
)

__all__ = ["cli"]
