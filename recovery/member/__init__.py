"""This daemon as a member of the fleet: it registers, launches the attempts placed on it, adopts
its drivers across its own restarts and records how each ended.

::

    registration.py  taking the daemon's id: its member record, from a dead predecessor at once
    member.py        the member: assignments followed, attempts launched, exits recorded
    adoption.py      the verdict on an attempt this life did not start (adopt, bury, leave, launch)
    processes.py     which process is which on a host: pid, start time, boot; pidfds
    launcher.py      starting a driver per attempt (forked, or a new process); the driver's
                     environment and exit codes
    forkserver.py    drivers (and the log shipper) forked from an interpreter that imported them
    shipping.py      the daemon's hand-over of each attempt's log to its log shipper
    shipper.py       the daemon's log shipper: one process storing every driver's log
"""
