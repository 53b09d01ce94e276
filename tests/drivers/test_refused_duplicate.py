"""A second driver of an attempt whose driver is alive changes nothing (issue 21, finding 1).

Before, a restarted daemon launched its attempts again; the duplicate was refused by ZooKeeper,
but on its way out it removed the attempt's working directory, and its member then deleted the
live driver's ``running`` node (it checked the attempt number, not who held the node) and
recorded the attempt as exited. A member no longer launches such a duplicate, but nothing of it
may depend on that: here the duplicate is a real ``python -m recovery.driver.driver`` and the
member a real :class:`FleetMember` on the test's cluster; the live holder is this test process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recovery.member.fleetmember import FleetMember
from recovery.member.launcher import DriverLauncher, Launch
from recovery.settings import DaemonSettings
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.fleet_records import Assignment
from zkstore.records.job_records import JobStatus
from zkstore.records.job_states import STARTING
from zkstore.records.strict import parse_time, utc_now
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration


def start_ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2 :].split()[19])


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def hold_attempt(config: StoreConfig, zk: ZooKeeper, job_id: str) -> ZooKeeper:
    """Status (version 0, attempt 1 on member m) and a running node of attempt 1 held by this
    test process in ``zk``, a session of its own (the live driver's: a stand-in's)."""
    base = config.base_path
    status = JobStatus(
        version=None, state=STARTING, attempt=1, updated=parse_time(utc_now()), daemon_id="m"
    )
    zk.ensure_path(f"{base}/jobs/{job_id}")
    zk.create(f"{base}/jobs/{job_id}/status", status.to_bytes())
    me = os.getpid()
    running = {
        "attempt": 1,
        "host": socket.gethostname(),
        "pid": me,
        "started": utc_now(),
        "start_ticks": start_ticks(me),
        "boot_id": boot_id(),
    }
    zk.create(f"{base}/jobs/{job_id}/running", json.dumps(running).encode(), ephemeral=True)
    return zk


def test_a_refused_duplicate_driver_leaves_the_attempts_directory(
    config: StoreConfig, tmp_path: Path, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    holder = hold_attempt(config, stand_in_session(), "j")
    work_dir = tmp_path / "j-attempt-1"
    work_dir.mkdir()
    (work_dir / "data.csv").write_text("the live driver's file")
    try:
        read_end, write_end = os.pipe()
        os.write(write_end, config.to_json().encode())
        os.close(write_end)
        duplicate = subprocess.run(
            [
                sys.executable,
                "-m",
                "recovery.driver.driver",
                "--config-fd",
                str(read_end),
                "--job-id",
                "j",
                "--attempt",
                "1",
                "--status-version",
                "0",
                "--work-dir",
                str(work_dir),
            ],
            pass_fds=(read_end,),
            capture_output=True,
            text=True,
            timeout=120,
        )
        os.close(read_end)
    finally:
        holder.stop()
    assert duplicate.returncode == 3, duplicate.stderr
    assert "another driver of j holds its running node" in duplicate.stderr
    assert (work_dir / "data.csv").read_text() == "the live driver's file"


def launch_of(process: subprocess.Popen[bytes], work_dir: Path, log: Path) -> Launch:
    """The member's record of a driver it launched (built as the launcher builds it)."""
    values: dict[str, Any] = {
        "job_id": "j",
        "attempt": 1,
        "status_version": 0,
        "process": process,
        "log_path": log,
        "work_dir": work_dir,
    }
    names = {f.name for f in dataclasses.fields(Launch)}
    if "identity" in names:
        from recovery.shared.processes import ProcessIdentity

        identity = ProcessIdentity(socket.gethostname(), process.pid, None, boot_id())
        values["identity"] = identity
    return Launch(**values)


def test_the_exit_of_a_refused_duplicate_leaves_the_live_drivers_node_and_assignment(
    config: StoreConfig, tmp_path: Path, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    holder = hold_attempt(config, stand_in_session(), "j")
    settings = DaemonSettings(
        store=config, daemon_id="m", work_dir=str(tmp_path / "work"), fork_server=False
    )
    launcher = DriverLauncher(settings)
    work_dir = launcher.work_root / "j-attempt-1"
    work_dir.mkdir(parents=True)
    (work_dir / "data.csv").write_text("the live driver's file")
    try:
        with Cluster.open(config) as cluster:
            layout = cluster.layout
            assignment = Assignment(
                version=None,
                job_id="j",
                daemon_id="m",
                attempt=1,
                status_version=0,
                assigned=parse_time(utc_now()),
            )
            cluster.zk.ensure_path(layout.member_assignments("m"))
            cluster.zk.create(layout.assignment("m", "j"), assignment.to_bytes())
            member = FleetMember(cluster, settings, launcher, lambda: None, lambda _: None)
            refused = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
            refused.wait()
            member.driver_exited(launch_of(refused, work_dir, tmp_path / "j.log"))
            assert cluster.zk.exists(layout.running("j")) is not None, "the live driver's node"
            data, stat = cluster.zk.get(layout.assignment("m", "j"))
            assert Assignment.from_znode(data, stat, "a").exited is None, "not recorded as over"
            assert (work_dir / "data.csv").exists(), "the live driver's directory"
            member.stop()
    finally:
        holder.stop()
        launcher.close()
