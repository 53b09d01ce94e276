"""Schedules: a job definition stored once, run at every window of a cron expression or an
interval, each window exactly once whoever leads (invariant 12).

The modules, from the bottom: :mod:`.timing` (cron and intervals, time zones: pure),
:mod:`.runs` (a run's job id from its schedule and window), :mod:`.records` (the spec and the
state with its history, parsed strictly), :mod:`.keys` (a schedule's signing key),
:mod:`.store` (create, read, pause, resume, delete), :mod:`.due` (the pure decision: which
windows fire, are skipped or missed, and the concurrency policy), :mod:`.transaction` (the one
fenced transaction of a fire) and :mod:`.fire` (the leader's side: plan, then commit).
"""
