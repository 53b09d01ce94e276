"""The ZooKeeper side of zkstore: a kazoo session whose every call has a deadline, and what
rides on it (transactions and their guards, the one retry policy, watches, the clock read
from ZooKeeper, who a process is there). It imports neither :mod:`zkstore.records` nor
:mod:`zkstore.payloads` (an import contract in setup.cfg says so). The modules::

    zk.py        a kazoo session whose every call has a deadline and raises zkstore errors
    watch.py     a watch that stays armed, on that session
    ops.py       transaction ops, the guards that fence them, and deadlines
    retry.py     the one retry policy of every compare-and-set loop
    polling.py   kazoo's threading handler with a select that is one poll(2)
    clock.py     ZooKeeper's time, from the stamp of a write, whatever the host's clock says
    identity.py  who a process is in ZooKeeper, and the ACL of each node by its path
    throttle.py  log lines of a lasting failure, said once per interval with a count
"""
