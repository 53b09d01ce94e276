"""zkstore: a high-availability job store for PySpark pipelines.

Payloads (cloudpickled job definitions, checkpoint metadata) live in object storage through fsspec;
ZooKeeper holds small JSON handles pointing at them, with version checks on every update.

The store's pieces, from the top (a module imports only from its own layer and those below:
``make lint``): the packages, then the primitives, flat, then the errors; ``dev/`` stands apart::

    policy.py       what a client checks a job or a schedule against: the leader's settings
    service/        the job view model and the control service that the command line, the
                    HTTP API and the status page share
    admin/          an operator's view of a whole cluster: inventory, ACLs, lingering state
    schedules/      a job definition stored once, run at every window exactly once
    lifecycle/      the run's lifecycle: retry pacing, limits, stop and resume, notifications
    cluster/        one cluster as a whole: the connection that hands out every store, a
                    job's cleanup, triage, the fleet's protocol, the leader's settings
    conditions.py   what the leader does not do for a job or a schedule, said on it
    jobs/           one store (or reader) per kind of a job's records, and the one vocabulary
                    of job states
    store.py        the state handle store: payloads in storage, verified handles in ZooKeeper
    entries.py      what the handle store hands out: live entries, broken ones, instance ids
    handle.py       the state handle: a small JSON record that points at a payload
    serializers.py  states to payload bytes and back: cloudpickle for code, JSON for data
    storage.py      payloads in object storage (fsspec): create-only writes, verified reads
    s3.py           what an S3 storage's client is made with, and what a process shares
    signing.py      payload signatures, with a key per job derived from the cluster's
    artifacts.py    the artifact roots: where job artifacts may live, and which place is whose
    zk.py           a kazoo session whose every call has a deadline and raises zkstore errors
    watch.py        a watch that stays armed, on that session
    polling.py      kazoo's threading handler with a select that is one poll(2)
    ops.py          transaction ops, the guards that fence them, and deadlines
    retry.py        the one retry policy of every compare-and-set loop
    layout.py       every ZooKeeper path and storage key of one cluster
    config.py       the one validated configuration: flags > ``ZKSTORE_*`` > defaults
    identity.py     who a process is in ZooKeeper, and the ACL of each node by its path
    secrecy.py      secret files; a process made undumpable, its secrets out of its environment
    protocol.py     the fleet protocol this code speaks and serves, and its features
    clock.py        ZooKeeper's time, from the stamp of a write, whatever the host's clock says
    throttle.py     log lines of a lasting failure, said once per interval with a count
    strict.py       strict parsing of everything read back from ZooKeeper
    closing.py      a mixin: ``with obj:`` closes an object's session or connection
    errors.py       the exceptions: one root, each class with its exit code and HTTP status
    dev/            the embedded ZooKeeper and its lifeline: for development (only dev code
                    imports it; the ensemble and the blackout proxy are in ``zkstore_dev``)
"""

__version__ = "0.3.0.dev0"
