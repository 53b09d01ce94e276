"""Chaos: a real three-server ZooKeeper ensemble, a moto S3 server, three daemons and a mix of
checkpointing jobs, with randomized faults (seeded, so that a run can be replayed) and the
design's invariants checked after every run.

``python -m recovery.dev.chaos --runs 20 [--seed N]`` (``make chaos``) prints one table:
scenario, runs, violations, time to recover. The modules: :mod:`.job` (the job and the markers
it leaves), :mod:`.world` (the servers and the cluster of one run), :mod:`.faults` (the
scenarios), :mod:`.invariants` (the checks), :mod:`.runner` (runs and the table).
"""
