"""This daemon as a member of the fleet: it registers, launches the attempts placed on it, adopts
its drivers across its own restarts and records how each ended.

::

    registration.py  taking the daemon's id: its member record, from a dead predecessor at once
    fleetmember.py   the member: assignments followed, attempts launched, exits recorded
    assignments.py   the member's view of its assignments: only those a change may have touched
                     are read again
    adoption.py      the verdict on an attempt this life did not start (adopt, bury, leave, launch)
    launcher.py      starting a driver per attempt (forked, or a new process); the driver's
                     environment and exit codes
    forkserver.py    drivers (and the log shipper) forked from an interpreter that imported them
    driveruser.py    ``--driver-user``: the checks at the start, the pool, the change of user
    sweep.py         what a pool user left (files in the shared places, its home, System V IPC)
                     removed before the user is handed on
    ending.py        how a driver the leader ended is ended: SIGTERM, grace, SIGKILL of its
                     group (pure)
    ender.py         carrying out the leader's end requests for the launches of this member
    log_shipping.py  the daemon's hand-over of each attempt's log to its log shipper
    log_shipper.py   the daemon's log shipper: one process storing every driver's log
    warm_jvms/       the drivers' Spark JVMs made cheap to start: the class-data archive, warm
                     driver JVMs (``--warm-drivers``)
"""
