"""Drivers' Spark UIs (issue 54 item 6), with real Spark through the daemon: in local mode a
driver's UI listens on loopback only, and its kill links are off unless the job's own --conf
turns them on; with a warm driver JVM as with the attempt's own.

Both failed before: the UI listened on every address (``::``), with kill enabled.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import spark_jvm, ui_jobs
from tests.helpers import hands_client, wait_for
from tests.warm_drivers import JOB, WARM, ready, show
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

#: 127.0.0.1 as /proc/net/tcp shows it, and as tcp6 shows it mapped (::ffff:127.0.0.1), ::1.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def spark_record(config: StoreConfig, job_id: str) -> object:
    return show(config, job_id)["spark"]


@pytest.mark.parametrize("warm", [False, True], ids=["own-jvm", "warm-jvm"])
def test_a_drivers_spark_ui_listens_on_loopback_with_kill_off(
    spark_config: StoreConfig, tmp_path: Path, warm: bool
) -> None:
    local = LocalCluster(
        spark_config,
        tmp_path / "runtime",
        spark_master="local[1]",
        warm_drivers=1 if warm else 0,
        class_data=str(spark_jvm.HOME),  # the suite's archive: verified, not made again
    )
    try:
        daemon = local.start_daemon("d1")
        if warm:
            wait_for(lambda: ready(daemon), WARM, what="a warm driver")
        with hands_client(spark_config) as client:
            reports = {}
            for job_id, conf in (("ui", {}), ("ui-kill", {"spark.ui.killEnabled": "true"})):
                out, gate = tmp_path / f"{job_id}.json", tmp_path / f"{job_id}.gate"
                client.submit_function(
                    ui_jobs.ui_report, str(out), str(gate), job_id=job_id, conf=conf
                )
                wait_for(out.exists, JOB, what=f"{job_id}'s report")
                reports[job_id] = json.loads(out.read_text())
                spark = wait_for(partial(spark_record, spark_config, job_id), JOB, what="record")
                reports[job_id]["jvm"] = str(spark["jvm"])  # type: ignore[index]
                gate.touch()
                assert client.wait(job_id, timeout=JOB).outcome == SUCCEEDED
        report = reports["ui"]
        assert report["total"] == 45
        assert report["jvm"].startswith("warm" if warm else "cold"), report["jvm"]
        assert report["listening"] and set(report["listening"]) <= LOOPBACK, report
        assert report["kill"] == "false", "kill is off by default"
        assert reports["ui-kill"]["kill"] == "true", "the job's own --conf says otherwise"
        assert set(reports["ui-kill"]["listening"]) <= LOOPBACK, reports["ui-kill"]
    finally:
        local.stop()
