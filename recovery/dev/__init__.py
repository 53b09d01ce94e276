"""The runtime's development tools: only dev code imports them (an import-linter contract says
so); ``zkstore demo`` is a dev command, loaded by name. The harnesses (chaos, the upgrade test,
hosts, the transcripts) are in :mod:`zkstore_dev`.

::

    demo.py          ``zkstore demo``: the failover story, end to end, on this machine
    localcluster.py  several daemons on this machine as real processes (demo, tests, benchmarks)
"""
