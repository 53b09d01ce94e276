"""Run one lifecycle write path in a child process and die (os._exit) at a named step.

Spec keys: config (StoreConfig JSON), op, job, step, and per op:

- ``send``: a notification sender (its own leadership node as fence) delivers one round and
  dies at ``notify:posted``, after a receiver answered 2xx and before that entry is deleted;
- ``stop``: ``StopStore.request(job, checkpoint=True)``;
- ``resume``: ``StopStore.resume(job)`` with a new definition (a script printing ``marker``).

Exit code 77 (:data:`tests.crash_cluster.CRASHED`) means the process died at the step.
"""

from __future__ import annotations

from typing import Any

from recovery.leader.notifier import NotificationSender, SenderSettings
from tests.crash_cluster import crashing_cluster
from zkstore.errors import NotLeader
from zkstore.jobs.definition import JobDefinition
from zkstore.lifecycle.destinations import Destinations
from zkstore.lifecycle.outbox import Outbox
from zkstore.lifecycle.stopstore import StopStore
from zkstore.zookeeper.ops import Fence


def main(spec: dict[str, Any]) -> int:
    cluster, _ = crashing_cluster(spec)
    job = spec["job"]
    if spec["op"] == "send":
        node = cluster.zk.create(f"{cluster.layout.election}/n_", ephemeral=True, sequence=True)
        fence = Fence.check(node, error=NotLeader, description="no longer the leader")
        sender = NotificationSender(
            Outbox(cluster.zk, cluster.layout),
            fence=fence,
            settings=SenderSettings(deadline=5.0),
            destinations=Destinations.parse("127.0.0.1"),  # the test's receiver
            on_step=cluster.step,
        )
        sender.run_once()
    elif spec["op"] == "stop":
        StopStore(cluster).request(job, checkpoint=True, timeout=60)
    elif spec["op"] == "resume":
        source = f"print({spec['marker']!r})"
        definition = JobDefinition.for_script(job, source, filename="v2.py")
        StopStore(cluster).resume(job, definition=definition)
    cluster.close()
    return 0
