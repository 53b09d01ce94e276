"""The runtime's commands, attached to the store's click group (:mod:`zkstore.cli`) by name.

::

    entry.py       the ``zkstore`` console script's entry: undumpable, secrets out of the
                   environment, before the commands are imported
    main.py        the command line: names the runtime's commands on the root group
    daemon_command.py
                   zkstore daemon
    submit.py      zkstore submit, zkstore jobs wait
    daemons.py     zkstore daemons list | drain | undrain
    stop_resume_commands.py
                   zkstore jobs stop | resume
    schedule_create_command.py
                   zkstore schedules create (the other schedule commands are the store's)
    joboptions.py  the job options of submit, shared with schedules create
    bounds.py      the daemon's bounds on what submitters send: --schedule-*, --notify-*,
                   --http-*
"""
