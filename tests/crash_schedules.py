"""Fire a schedule's windows as a leader in a child process, and die (os._exit) at a step.

Spec keys: config (StoreConfig JSON), job (the schedule's name), step, now (ISO time the fire
takes as its clock), daemon (the contender's id). Exit code 77 means the process died at the
step (see :func:`tests.helpers.crash`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from recovery.election import LeaderElection
from tests.crash_cluster import crashing_cluster
from zkstore.schedules.fire import Firer
from zkstore.schedules.store import ScheduleStore


def main(spec: dict[str, Any]) -> int:
    cluster, crash_at = crashing_cluster(spec)
    election = LeaderElection(
        cluster.zk, cluster.layout, spec.get("daemon", "crasher"), lambda: None
    )
    election.contend()
    schedules = ScheduleStore.for_config(cluster.config, cluster.zk, on_step=crash_at)
    firer = Firer.for_cluster(cluster, schedules)
    firer.fire(spec["job"], election.fence(), datetime.fromisoformat(spec["now"]))
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
