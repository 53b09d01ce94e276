"""The ``zkstore`` command line: every command-line module, above both libraries.

:mod:`recovery` sits above :mod:`zkstore`, so the command line lives here and imports both;
neither library imports it (setup.cfg's contracts). One module per noun holding all its verbs;
a noun too long for one module is a package of a few (``jobs/``, ``schedules/``). A click
function parses, calls a service function (``zkstore.service``, ``zkstore.cluster``,
``recovery.shared``: where the HTTP API can call it too) and prints: it writes nothing to
ZooKeeper itself.

::

    entry.py                the console script's entry: undumpable, secrets out of the
                            environment, before the commands are imported
    main.py                 the table of every command and the module that defines it
    base.py                 the root group (lazy), connection options, exit codes from the
                            error classes
    output.py               one output function: an aligned table for people, JSON for scripts
    types.py                option types (durations, retentions): click only
    progress.py             what ``jobs wait`` and ``submit --wait`` say as a job changes (pure)
    lifecycle_options.py    the lifecycle's options of submit, jobs stop | resume and daemon
    artifact_options.py     ``--artifact-root``, and the artifact lines of ``jobs show``
    joboptions.py           the job options of submit, shared with schedules create
    bounds.py               the daemon's bounds on what submitters send: --schedule-*,
                            --notify-*, --http-*

    acl_commands.py         zkstore acl check | apply | digest
    checkpoint_commands.py  zkstore checkpoints list
    cluster_commands.py     zkstore cluster settings: the bounds and policies the leader enforces
    control_commands.py     zkstore control: change a running job without stopping it
    daemon_command.py       zkstore daemon
    daemons.py              zkstore daemons list | drain | undrain
    fleet_commands.py       zkstore fleet status | finalize
    handle_commands.py      zkstore handles list | verify | lingering | cleanup
    jobs/                   zkstore jobs list | show | cancel | forget | logs | wait | stop |
                            resume
    output_commands.py      zkstore outputs list | show | paths: what jobs committed
    pool_commands.py        zkstore pools set | list | show | delete
    quarantine_commands.py  zkstore quarantine list | show | release | purge
    schedules/              zkstore schedules create | list | show | update | pause | resume |
                            delete
    submit.py               zkstore submit
"""
