"""The driver process: one attempt of one job, in its own process and ZooKeeper session.

::

    driver.py        the process: take ``running``, load the definition, run, report the outcome
    context.py       the ``ctx`` a job function receives
    applied_config.py
                     ``ctx.config``: the job's desired configuration as this attempt applied it
    signals.py       what the driver raises into a job to end its attempt (JobCancelled)
    lease.py         the driver's lease on its own session (when to stop in an outage)
    heartbeat.py     the gate on heartbeat writes: ``ctx.heartbeat()`` costs a clock read
    job_control.py   the job's side of its control: apply, acknowledge, pause, log level
    configchange.py  what a job makes of a desired configuration (pure: per-key decisions)
    artifact_registry.py
                     ``ctx.artifacts``: register, finish, release; Spark's checkpoint directory
    output_staging.py
                     ``ctx.outputs``: stage a step's parts, commit them with its checkpoint
    resource_declaring.py
                     executor-side resources, the driver's half (see :mod:`recovery.executor`)
    sparkapp.py      the running attempt's Spark application record
    warm_jvm.py      the attempt's Spark JVM: the warm one its member handed over, or its own
                     (with the class-data archive); in front of pyspark's ``launch_gateway``
    workdir.py       the attempt's working directory and the files shipped with the job
"""
