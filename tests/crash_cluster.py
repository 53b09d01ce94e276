"""Run one real write path of a cluster in a child process and die (os._exit) at a named step.

Usage: python -m tests.crash_cluster '<json>' with keys config (StoreConfig JSON), op, job, step.
Exit code 77 means the process died at the step.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from recovery.leader.retention import expire
from zkstore.cluster import Cluster, triage
from zkstore.cluster.cleanup import clean_up
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition
from zkstore.records.job_states import SUCCEEDED

CRASHED = 77


def noop(ctx: Any) -> None:
    return None


def crashing_cluster(spec: dict[str, Any]) -> tuple[Cluster, Callable[[str], None]]:
    """The cluster of ``spec["config"]`` whose write paths end this process (exit code
    ``CRASHED``) at step ``spec["step"]``, and that step check for the caller's own steps."""

    def crash_at(step: str) -> None:
        if step == spec["step"]:
            os._exit(CRASHED)

    return Cluster.open(StoreConfig.from_json(spec["config"]), on_step=crash_at), crash_at


def main(spec: dict[str, Any]) -> int:
    cluster, crash_at = crashing_cluster(spec)
    job = spec["job"]
    if spec["op"] == "put":
        cluster.jobs.submit(JobDefinition.for_function(job, noop))
    elif spec["op"] == "remove":
        cluster.jobs.remove(job)
    elif spec["op"] == "checkpoints":
        store = cluster.checkpoints(job, retain=1)
        for step in range(3):
            store.add({"step": step})
    elif spec["op"] == "control":
        cluster.control(job).set({"rate": 2})
    elif spec["op"] == "finish":
        # The leader's finish: the result is recorded first, then cleanup runs; die in between.
        cluster.results.create_dirty(job, SUCCEEDED, attempts=1)
        crash_at("finish:result-recorded")
    elif spec["op"] == "cleanup":
        clean_up(cluster, job, keep_logs=spec.get("keep_logs", 3600.0))
    elif spec["op"] == "sweep":
        expire(cluster, cluster.results.all()[0], keep_results=None, fence=None)
    elif spec["op"] == "release":
        triage.release(cluster, job)
    elif spec["op"] == "purge":
        triage.purge(cluster, job)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
