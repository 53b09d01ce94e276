"""The leader role inside a daemon: one leadership at a time, fenced by its contender node.

::

    election.py    leader election with a fence ZooKeeper enforces
    loop.py        the daemon's single acting thread: events, timers, fenced actions
    decide.py      what to do next for one job: a pure function of what is visible
    leader.py      one leadership: batches of jobs, guarded decisions
    actions.py     the fenced actions the decisions call for
    finished.py    the cleanups of finished jobs, after the placements their slots allow
    placement.py   the fleet as the leader sees it: members, slots, labels, where an attempt goes
    retention.py   deleting finished jobs' results and driver logs past their retention
"""
