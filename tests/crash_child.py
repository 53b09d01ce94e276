"""Run one store operation in a child process and die (os._exit) at a named step.

Usage: python -m tests.crash_child '<json>'  with keys hosts, path, storage, op, name, step,
[version]. Exit code 77 means the process died at the step; 0 means the step was never reached.
"""

from __future__ import annotations

import json
import os
import sys

from zkstore.payloads.serializers import JsonSerializer
from zkstore.payloads.storage import StateStorage
from zkstore.payloads.store import ZooKeeperStateHandleStore
from zkstore.zookeeper.zk import ZooKeeper

CRASHED = 77


def main(spec: dict[str, object]) -> int:
    def crash_at(step: str) -> None:
        if step == spec["step"]:
            os._exit(CRASHED)

    zk = ZooKeeper(str(spec["hosts"]), session_timeout=2.0, timeout=3.0).start()
    store: ZooKeeperStateHandleStore[object] = ZooKeeperStateHandleStore(
        zk,
        str(spec["path"]),
        StateStorage(str(spec["storage"])),
        JsonSerializer(),
        payload_prefix=lambda name: f"c/jobs/{name}/definition",
        on_step=crash_at,
    )
    name = str(spec["name"])
    if spec["op"] == "add":
        store.add(name, {"value": "new"})
    elif spec["op"] == "replace":
        version = store.get(name).version
        store.replace(name, version, {"value": "replaced"})
    elif spec["op"] == "remove":
        store.get(name)
        store.remove(name)
    zk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
