"""Chaos: a real three-server ZooKeeper ensemble, a moto S3 server, three daemons and a mix of
checkpointing jobs, with randomized faults (seeded, so that a run can be replayed) and the
design's invariants checked after every run.

``python -m zkstore_dev.chaos --runs 20 [--seed N]`` (``make chaos``) prints one table:
scenario, runs, violations, time to recover. The modules::

    job.py          the chaos job and the evidence it leaves: attempt markers, an exact output
    world.py        the servers of a chaos session and the cluster of one run
    faults.py       the scenarios: each injects its fault, heals it, and says when
    partitions.py   the partition scenarios: faults of the network between hosts
    ledger.py       a job's own writes in storage, in storage's order: the zombie-write check
    process_accounting.py
                    every host's processes accounted for once the network is healed
    probe.py        the schedule every run fires beside the jobs, checked after the fault
    schedule_checker.py
                    the schedule's job and its checker (Jepsen's Chronos): every window once
    invariants.py   the design's invariants, checked after a run as an operator would see them
    runner.py       runs and the table
"""
