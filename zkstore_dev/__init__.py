"""The development harnesses of zkstore: never imported by the runtime (an import-linter
contract says so), installed beside it for ``make chaos``, ``make upgrade-test``, the
transcripts and the tests. The embedded ZooKeeper (``zkstore zookeeper``), the demo and
the local cluster of daemons stay where users reach them (:mod:`zkstore.dev`,
:mod:`recovery.dev`). The modules::

    chaos/         the chaos run: randomized faults on a real ensemble, the invariants checked
    upgrade/       the upgrade test: the previous release and this code in one fleet
    hosts.py       hosts that really fail: network namespaces behind a router, and the
                   network's faults between them (root only)
    transcript.py  the docs' real sessions (docs/sessions/*.sh) run again into their pages
    ensemble.py    a three-server ZooKeeper ensemble on loopback ports (chaos, outage tests)
    blackout.py    TCP proxies in front of ZooKeeper servers that can take every one away at once
"""
