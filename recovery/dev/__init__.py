"""The runtime's development tools: only dev code imports them (an import-linter contract says
so); ``zkstore demo`` is a dev command, loaded by name.

::

    demo.py          ``zkstore demo``: the failover story, end to end, on this machine
    localcluster.py  several daemons on this machine as real processes (demo, tests, benchmarks)
    hosts.py         hosts that really fail: network namespaces behind a router, and the
                     network's faults between them (root only)
    chaos/           the chaos run: randomized faults on a real ensemble, the invariants checked
    upgrade/         the upgrade test: the previous release and this code in one fleet
"""
