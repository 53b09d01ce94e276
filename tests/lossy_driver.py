"""Run one attempt's driver in a child process whose outcome writes meet injected faults.

Usage: python -m tests.lossy_driver '<json>' with keys config (StoreConfig JSON), job, attempt,
status_version, work_dir, and:

- ``faults``: ``{step: n}``: the first ``n`` times the driver reaches ``step`` (a crash point of
  its outcome write: ``outcome:writing`` before the transaction is sent, ``outcome:written``
  after it was applied, ``outcome:reading-back``), :class:`OutcomeUnknown` is raised there, as
  when the connection fails before the answer arrives;
- ``supersede_at``: at that step, a leader's session places the next attempt (the status gets
  a new version), so that the driver's fence fails from then on;
- ``cut_at``: the driver talks to ZooKeeper through a :class:`Blackout` proxy, which is cut
  for good at that step: no answer ever again, its session lease runs out.

The exit code is the driver's.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from recovery.driver.driver import Driver
from zkstore.config import StoreConfig
from zkstore.errors import OutcomeUnknown
from zkstore.layout import Layout
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import STARTING
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper
from zkstore_dev.blackout import Blackout

LOG = logging.getLogger("tests.lossy_driver")


def main(spec: dict[str, Any]) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    config = StoreConfig.from_json(spec["config"])
    faults: dict[str, int] = dict(spec.get("faults", {}))
    blackout = Blackout(config.zk_hosts) if spec.get("cut_at") else None
    if blackout is not None:
        config = config.with_changes(zk_hosts=blackout.connect_string)

    def inject(step: str) -> None:
        if step == spec.get("supersede_at"):
            supersede(StoreConfig.from_json(spec["config"]), spec["job"], spec["attempt"])
        if blackout is not None and step == spec["cut_at"]:
            LOG.info("cutting every connection to ZooKeeper")
            blackout.cut()
        if faults.get(step, 0) > 0:
            faults[step] -= 1
            LOG.info("injected: the answer at %s is lost", step)
            raise OutcomeUnknown(f"injected at {step}")

    driver = Driver(
        config,
        job_id=spec["job"],
        attempt=spec["attempt"],
        status_version=spec["status_version"],
        spark_master="local[1]",
        work_dir=Path(spec["work_dir"]),
        on_step=inject,
    )
    return driver.run()


def supersede(config: StoreConfig, job_id: str, attempt: int) -> None:
    """What a leader does when it places the next attempt: a new status version."""
    path = Layout(config.base_path).status(job_id)
    with ZooKeeper(config.zk_hosts, timeout=config.timeout).start() as zk:
        status = JobStatus(
            version=None,
            state=STARTING,
            attempt=attempt + 1,
            updated=parse_time(utc_now()),
            daemon_id="other",
        )
        zk.set(path, status.to_bytes())


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
