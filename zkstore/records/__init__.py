"""The small JSON records zkstore keeps in ZooKeeper: the base :class:`~.record.Record`,
the strict parser every value read back goes through, the state handle a record may carry,
the vocabulary of job states, and one module per family of records. Above
:mod:`zkstore.zookeeper` (a record is read through it), below :mod:`zkstore.payloads`
(whose stores keep handles): an import contract in setup.cfg says so. The modules::

    record.py          the base Record: strict parsing, compact encoding, the version
                       carried along, and the one way to read a record
    job_records.py     a job's own records: status, running, outcome, cancel, its Spark
                       application, its control object
    result_records.py  the end of a job: its durable result and its quarantine entry
    fleet_records.py   the fleet's records: members, assignments, the leader, drain marks
    strict.py          strict parsing of everything read back from ZooKeeper
    handle.py          the state handle: a small JSON record that points at a payload
    job_states.py      the vocabulary: job, result, artifact and control key states, driver exits
"""
