"""Schedules: a job definition stored once, run at every window of a cron expression or an
interval, each window exactly once whoever leads (invariant 12).

The modules, from the bottom::

    timing.py            cron and intervals, time zones (pure)
    counting.py          a range's windows counted, never stepped through (pure)
    runs.py              a run's job id from its schedule and window
    schedule_records.py  the spec and the state with its history, parsed strictly
    keys.py              a schedule's signing key
    schedule_limits.py   the bounds a cluster sets: the minimum interval, --catchup-max (pure)
    schedule_store.py    create, read, list, pause, resume, delete
    update.py            ``schedules update``: one version-checked write, the change recorded
    schedule_service.py  create, pause, resume, delete as the command line and the HTTP API ask
    due.py               the pure decision: which windows fire, are skipped or missed, and the
                         concurrency policy
    transaction.py       the one fenced transaction of a fire
    fire.py              the leader's side: plan, then commit
    schedule_view.py     what ``schedules list|show``, the API and the page show of a schedule
"""
