"""The upgrade test: the previous release and this code in one fleet, upgraded one daemon at a
time, back, and again (issue 45; ``make upgrade-test``, a phase of ``.ci/run``).

``python -m recovery.dev.upgrade [--keep] [--work-dir DIR] [--cache DIR]`` prints what it does
as it goes, then a table of its phases with their times and a verdict; exit 1 on any violation.
The modules: :mod:`.previous` (which release, its commit, its build), :mod:`.mixed` (the fleet
of two releases and the rolling restarts), :mod:`.workload` (the jobs both command lines
submit), :mod:`.features` (each gated feature and the command that needs it), :mod:`.scenario` (what
is done to the fleet and looked at after each restart), :mod:`.checks` (what the evidence must
show), :mod:`.run` (the phases and the table).
"""
