"""One store (or reader) per kind of a job's records (the records and the vocabulary of
job states are in :mod:`zkstore.records`).
:mod:`zkstore.cluster` sits above them and hands the stores out; none of them imports it.

::

    definition.py       job definitions: what to run, how, what it needs, and who wrote it
    sealed.py           a definition read without running any of it (every process but its driver)
    runspec.py          a job's run options as one typed value: what the handle keeps, read once
    runoptions.py       the lifecycle options a job gave, typed: a part of its RunSpec
    shown.py            what a handle says of a definition for people (secrets redacted)
    stored.py           the summary a job was submitted with, wherever the store keeps it now
    resubmit.py         idempotent submission: the fingerprint, the differences
    dependencies.py     ``--after``: the pure verdict on a job's dependencies
    graph.py            the job graph store: a handle per job under ``R/currentJobs``
    job_state_store.py  the per-job records: status, running, outcome, cancel, control
    stops.py            a job's stop, end and heartbeat records, as the snapshot reads them
    request_pins.py     cancel, stop and end pinned by a child, so that their job cannot delete them
    snapshot.py         many jobs at once, in pipelined reads; :func:`read_snapshot` one job
    checkpoints.py      a job's checkpoints: metadata in storage, handles in ZooKeeper
    results.py          the job result store (DIRTY, CLEAN) and the index of dirty results
    quarantine.py       a job whose definition cannot be read or verified, moved out of the way
    history.py          a job's attempts and the cluster's leaders, for people
    resign.py           a job's handles signed with the cluster key, re-signed with the job's key
    job_artifacts.py    a job's artifact records: register, finish, release
    claims.py           which job owns each place under the extra artifact roots
    outputs/            a job's outputs: parts committed with its checkpoints, their manifest
    resources.py        how a job's executor-side resources are doing, per attempt
    logs.py             driver logs in storage: written in chunks, read from any host, and when
                        they are due for removal
    log_follower.py     one attempt's log follower: a growing file stored chunk by chunk
    control/            a job's control plane: desired, acknowledged, declared, and its history
"""
