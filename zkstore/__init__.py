"""zkstore: a high-availability job store for PySpark pipelines.

Payloads (cloudpickled job definitions, checkpoint metadata) live in object storage through fsspec;
ZooKeeper holds small JSON handles pointing at them, with version checks on every update.

The store's pieces, from the top (a module imports only from its own layer and those below:
``make lint``): the packages, the core in three parts, what they share, then the errors;
``dev/`` stands apart::

    policy.py      what a client checks a job or a schedule against: the leader's settings
    service/       the job view model and the control service that the command line, the
                   HTTP API and the status page share
    admin/         an operator's view of a whole cluster: inventory, ACLs, lingering state
    schedules/     a job definition stored once, run at every window exactly once
    lifecycle/     the run's lifecycle: retry pacing, limits, stop and resume, notifications
    cluster/       one cluster as a whole: the connection that hands out every store, a
                   job's cleanup, triage, the fleet's protocol, the leader's settings
    conditions.py  what the leader does not do for a job or a schedule, said on it
    jobs/          one store (or reader) per kind of a job's records
    payloads/      payloads in object storage, and the stores of their handles in ZooKeeper
    records/       the small JSON records in ZooKeeper, their strict parser, the state handle
    zookeeper/     a kazoo session with deadlines, its transactions, retries, watches, clock
    signing.py     payload signatures, with a key per job derived from the cluster's
    layout.py      every ZooKeeper path and storage key of one cluster
    config.py      the one validated configuration: flags > ``ZKSTORE_*`` > defaults
    protocol.py    the fleet protocol this code speaks and serves, and its features
    closing.py     a mixin: ``with obj:`` closes an object's session or connection
    lifeline.py    child processes that die with their parent (a parent-death signal)
    errors.py      the exceptions: one root, each class with its exit code and HTTP status
    dev/           the embedded ZooKeeper and its command: for development (only dev code
                   imports it; the ensemble and the blackout proxy are in ``zkstore_dev``)
"""

__version__ = "0.3.0.dev0"
