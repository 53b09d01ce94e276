"""The upgrade test: the previous release and this code in one fleet, upgraded one daemon at a
time, back, and again (issue 45; ``make upgrade-test``, a phase of ``.ci/run``).

``python -m zkstore_dev.upgrade [--keep] [--work-dir DIR] [--cache DIR]`` prints what it does
as it goes, then a table of its phases with their times and a verdict; exit 1 on any violation.
The modules::

    previous.py   which release, its commit, its build
    mixed.py      the fleet of two releases and the rolling restarts
    workload.py   the jobs both command lines submit
    features.py   each gated feature and the command that needs it
    scenario.py   what is done to the fleet and looked at after each restart
    checks.py     what the evidence must show
    run.py        the phases and the table
"""
