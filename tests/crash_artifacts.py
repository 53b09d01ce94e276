"""Run an artifact's whole life in a child process and die (os._exit) at a named step.

Usage: python -m tests.crash_artifacts '<json>' with keys config (StoreConfig JSON), job, scope,
status_version, step, and op: ``lifecycle`` (as the driver of attempt 1, fenced on the job's
status at ``status_version`` and its ``running`` node, which the test holds in its own session:
register, write the data in two halves, finish, release) or ``cleanup`` (the job's cleanup, as
the leader runs it). Exit code 77 means the process died at the step; 0 that it never got there.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.crash_cluster import crashing_cluster
from zkstore.cluster import Cluster
from zkstore.cluster.cleanup import clean_up
from zkstore.zookeeper.ops import Fence

NAME = "staging"
#: Every step of an artifact's life, in order (register's two halves of data are the job's).
LIFECYCLE = (
    "register:recorded",
    "register:data-half",
    "register:data-written",
    "finish:marked",
    "release:marked",
    "release:data-deleted",
    "release:deleted",
)


def write_data(cluster: Cluster, uri: str, name: str, data: bytes) -> None:
    """Write one file of the artifact directory ``uri`` (under the storage root)."""
    fs, path = cluster.storage.fs, cluster.storage.path_of(f"{uri}/{name}")
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, data)


def main(spec: dict[str, Any]) -> int:
    cluster, crash_at = crashing_cluster(spec)
    job = spec["job"]
    if spec["op"] == "cleanup":
        clean_up(cluster, job)
        return 0
    layout = cluster.layout
    fence = Fence.check(layout.status(job), spec["status_version"]) + Fence.check(
        layout.running(job), 0
    )
    store = cluster.artifacts(job)
    uri = store.register(NAME, None, scope=spec["scope"], keep=False, attempt=1, fence=fence).uri
    write_data(cluster, uri, "part-0", b"first half")
    crash_at("register:data-half")
    write_data(cluster, uri, "part-1", b"second half")
    crash_at("register:data-written")
    store.finish(NAME, attempt=1, fence=fence)
    store.release(NAME, fence=fence)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
