"""The leader role inside a daemon: one leadership at a time, fenced by its contender node.

::

    election.py      leader election with a fence ZooKeeper enforces
    loop.py          the daemon's single acting thread: events, timers, fenced actions
    grant.py         one leadership: batches of jobs, guarded decisions
    role.py          what the leader's helpers (actions, retention) may use of a leadership
    decide.py        what to do next for one job: a pure function of what is visible
    lifecycle_inputs.py
                     what the decision needs of a job's lifecycle, from its snapshot (pure):
                     retry policy, limits, stop view
    dependency_gate.py
                     ``--after``: the gate before a job's first attempt
    placement.py     where an attempt goes: the least loaded member with a free slot and the
                     labels the job requires, never a drained one
    pool_placement.py
                     the order of waiting jobs by their pool's priority, and each pool's limit
                     (pure)
    actions.py       the fenced actions the decisions call for
    finished.py      the cleanups of finished jobs, after the placements their slots allow
    watches.py       the watches of the jobs' nodes: each one fired is a look at its job
    quiet.py         a driver's start and end that leave nothing to decide, confirmed with a read
    requests_seen.py
                     when this leadership first saw each attempt's cancel and stop: a request
                     made again is as old as the first
    retention.py     deleting finished jobs' results and driver logs past their retention
    schedule_firing.py
                     firing schedules: a timer at the next window, a pass on takeover, a budget
    published.py     the leader's settings, published in ``R/settings`` for clients
    job_conditions.py
                     the conditions kept on jobs: a notification dropped, until one is delivered
    notifier.py      the notification sender: drains the outbox, started with the leadership
    courier.py       one notification's POST, bounded, and a queue per receiver
    signednotify.py  a job's own notification URL, checked against its signed definition
"""
