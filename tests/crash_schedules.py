"""Create a schedule, or fire its windows as a leader, in a child process, and die (os._exit)
at a step.

Spec keys: config (StoreConfig JSON), op (create: a schedule every hour; fire: its windows due
at ``now``), job (the schedule's name), step, now (ISO time the fire takes as its clock), daemon
(the contender's id). Exit code 77 means the process died at the step (see
:func:`tests.helpers.crash`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from recovery.leader.election import LeaderElection
from tests.crash_cluster import crashing_cluster
from zkstore.jobs.definition import JobDefinition
from zkstore.records.strict import utc_moment
from zkstore.schedules.fire import Firer
from zkstore.schedules.schedule_records import ScheduleSpec
from zkstore.schedules.schedule_store import ScheduleStore


def noop(ctx: object) -> None:
    return None


def main(spec: dict[str, Any]) -> int:
    cluster, crash_at = crashing_cluster(spec)
    schedules = ScheduleStore.for_config(cluster.config, cluster.zk, on_step=crash_at)
    if spec["op"] == "create":
        schedule = ScheduleSpec(
            version=None, name=spec["job"], created=utc_moment(), cron="0 * * * *"
        )
        schedules.create(schedule, JobDefinition.for_function(spec["job"], noop))
    elif spec["op"] == "fire":
        daemon = spec.get("daemon", "crasher")
        election = LeaderElection(cluster.zk, cluster.layout, daemon, lambda: None)
        election.contend()
        firer = Firer.for_cluster(cluster, schedules)
        firer.fire(spec["job"], election.fence(), datetime.fromisoformat(spec["now"]))
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
