"""The runtime's commands, attached to the store's click group (:mod:`zkstore.cli`) by name.

::

    main.py        the ``zkstore`` console script: names the runtime's commands on the root group
    daemon.py      zkstore daemon
    submit.py      zkstore submit, zkstore jobs wait
    daemons.py     zkstore daemons list | drain | undrain
    lifecycle.py   zkstore jobs stop | resume
    schedules.py   zkstore schedules create (the other schedule commands are the store's)
    joboptions.py  the job options of submit, shared with schedules create
    bounds.py      the daemon's bounds on what submitters send: --schedule-*, --notify-*,
                   --http-*
"""
