"""The store's half of the ``zkstore`` command line; :mod:`recovery.cli.main` adds the runtime's.

The root group (:mod:`zkstore.cli.base`) names every command with the module that defines it and
imports that module only when the command is used: ``zkstore --version`` and a usage error pay
for click and nothing of ours beyond the group.

::

    base.py                 the root group, its shared connection options, exit codes from the error
                            classes; every command named with its module
    output.py               one output function: an aligned table for people, JSON for scripts
    types.py                option types (durations, retentions): click only
    job_commands.py         zkstore jobs list | show | cancel, zkstore checkpoints list
    progress.py             what ``jobs wait`` and ``submit --wait`` say as a job changes (pure)
    log_commands.py         zkstore jobs logs: a job's driver logs, read from storage on any host
    lifecycle_options.py    the lifecycle's options of submit, jobs stop | resume and daemon
    artifact_options.py     ``--artifact-root``, and the artifact lines of ``jobs show``
    control_commands.py     zkstore control: change a running job without stopping it
    handles.py              zkstore handles list | verify | lingering | cleanup
    quarantine_commands.py  zkstore quarantine list | show | release | purge
    output_commands.py      zkstore outputs list | show | paths: what jobs committed
    acl_commands.py         zkstore acl check | apply | digest
    fleet_commands.py       zkstore fleet status | finalize
    cluster.py              zkstore cluster settings: the bounds and policies the leader enforces
    pool_commands.py        zkstore pools set | list | show | delete: limits and priorities of slots
    schedule_commands.py    zkstore schedules list | show | pause | resume | delete
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
