"""Changing running jobs end to end: real daemons and drivers as processes, the installed
``zkstore`` script as a user types it, and what reached the job read back from its files."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests import jobs
from tests.cli import zkstore
from tests.helpers import alive, assert_nothing_left, wait_for
from zkstore.config import StoreConfig
from zkstore.jobs.control import ControlAck
from zkstore.records.job_states import CANCELLED, PAUSED, SUCCEEDED
from zkstore.zookeeper.watch import NodeWatch

# Tests that only submit, tune and read jobs share a daemon (tests/fleets.py).
pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

#: Generous: the machine is shared; the benchmark measures the real latency.
ACK_BOUND = 30.0


def control(config: StoreConfig, job_id: str) -> dict[str, Any]:
    done = zkstore(config, "control get", job_id, "--format", "json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def state(config: StoreConfig, job_id: str) -> tuple[str, int]:
    done = zkstore(config, "jobs list", "--format", "json")
    assert done.returncode == 0, done.stderr
    job = next(j for j in json.loads(done.stdout) if j["job_id"] == job_id)
    return job["state"], job["attempt"]


def last_values(out: Path) -> dict[str, Any] | None:
    """The values of the last configuration the tunable job recorded (None before the first)."""
    found = configs(out)
    return found[-1]["values"] if found else None


def configs(out: Path) -> list[dict[str, Any]]:
    """The configurations the tunable job ran with, by control version."""
    return [
        m for name, m in sorted(jobs.read_marks(str(out)).items()) if name.startswith("config-")
    ]


def steps_of(out: Path, attempt: int) -> dict[str, dict[str, Any]]:
    return {
        name: mark
        for name, mark in jobs.read_marks(str(out)).items()
        if name.startswith("step-") and name.endswith(f"-attempt-{attempt}")
    }


def start_tunable(local: LocalCluster, client: Client, out: Path, job_id: str) -> DaemonProcess:
    """A daemon running ``jobs.tunable`` as ``job_id``, once the job has declared its keys."""
    daemon = local.start_daemon("d1")
    client.submit_function(jobs.tunable, str(out), job_id=job_id)
    wait_for((out / "declared").exists, timeout=120, what="the job to declare its keys")
    return daemon


def stop_and_succeed(config: StoreConfig, client: Client, job_id: str) -> None:
    """Stop a job that watches the ``stop`` key, as a user would; it must succeed."""
    assert zkstore(config, "control set", job_id, "stop=true").returncode == 0
    assert client.wait(job_id, timeout=120).outcome == SUCCEEDED


def test_changes_are_acknowledged_checked_and_recorded(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = "tune"
    start_tunable(local, client, out, job_id)

    started = time.monotonic()
    applied = zkstore(runtime_config, "control set", job_id, "rate=2.5", "--wait")
    assert applied.returncode == 0, applied.stderr
    assert time.monotonic() - started < ACK_BOUND
    assert "tune: control version 0: rate: - -> 2.5" in applied.stdout
    assert "acknowledged by attempt 1 (version 0): rate applied" in applied.stdout
    wait_for(lambda: last_values(out) == {"rate": 2.5}, timeout=30, what="rate 2.5")

    rejected = zkstore(runtime_config, "control set", job_id, "mode=turbo", "--wait")
    assert rejected.returncode == 1
    assert "mode rejected (unknown mode 'turbo')" in rejected.stdout
    assert "zkstore: error: job tune rejected mode: unknown mode 'turbo'" in rejected.stderr
    shown = control(runtime_config, job_id)
    assert shown["rejected"] == {"mode": "unknown mode 'turbo'"} and shown["pending"] == []
    assert shown["applied"]["version"] == shown["version"] == 1
    assert shown["declared"]["parts"] == {"type": "int", "restart": True}
    table = zkstore(runtime_config, "control get", job_id).stdout
    assert re.search(r'mode\s+"turbo"\s+-\s+rejected: unknown mode \'turbo\'', table), table
    assert "applied version: 1 by attempt 1 (live)" in table

    for words, why in [
        (["colour=red"], "not a key the job declared (it declares: mode, parts, rate, stop)"),
        (["rate=fast"], 'rate="fast": expected float, got a string'),
        (["zkstore.pause=yes"], "expected bool, got a string"),
    ]:
        refused = zkstore(runtime_config, "control set", job_id, *words)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert control(runtime_config, job_id)["version"] == 1, "nothing refused was stored"

    restart = zkstore(runtime_config, "control set", job_id, "parts=8", "--wait")
    assert restart.returncode == 0 and "parts needs-restart" in restart.stdout
    assert control(runtime_config, job_id)["needs_restart"] == ["parts"]

    version = control(runtime_config, job_id)["version"]
    first = zkstore(
        runtime_config, "control set", job_id, "rate=3", "--expect-version", str(version)
    )
    late = zkstore(
        runtime_config, "control set", job_id, "rate=4", "--expect-version", str(version)
    )
    assert first.returncode == 0, first.stderr
    assert late.returncode == 5
    assert f"zkstore: error: job tune: control is at version {version + 1}, not {version}" in (
        late.stderr
    )
    assert control(runtime_config, job_id)["values"]["rate"] == 3

    asked = zkstore(runtime_config, "control checkpoint", job_id, "--wait")
    assert asked.returncode == 0, asked.stderr
    wait_for((out / "answered").exists, timeout=30, what="the requested checkpoint")
    answered = jobs.read_marks(str(out))["answered"]["checkpoint"]
    shown = control(runtime_config, job_id)
    assert shown["checkpoint_request"]["answered"] is True
    assert shown["checkpoint"] == {"id": answered, "control_version": shown["version"]}

    history = json.loads(
        zkstore(runtime_config, "control history", job_id, "--format", "json").stdout
    )
    assert [e["version"] for e in history["entries"]] == list(range(shown["version"] + 1))
    assert history["entries"][0]["changes"] == {"rate": {"new": 2.5}}
    assert history["entries"][1]["changes"] == {"mode": {"new": "turbo"}}
    assert all("@" in e["by"] for e in history["entries"]) and history["missing_versions"] == []
    listed = zkstore(runtime_config, "control history", job_id, "--last", "2").stdout
    assert "rate: 2.5 -> 3" in listed and "zkstore.checkpoint: - ->" in listed
    assert "parts" not in listed and "turbo" not in listed

    stop_and_succeed(runtime_config, client, job_id)
    assert_nothing_left(runtime_config, job_id)  # the history went with the job


def test_ten_rapid_changes_end_on_the_last_with_monotonic_acknowledgements(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = "rapid"
    start_tunable(local, client, out, job_id)
    store = client.cluster.control(job_id)
    seen: list[int] = []
    lock = threading.Lock()

    def acknowledged(data: Any) -> None:
        if isinstance(data, bytes):
            with lock:
                seen.append(ControlAck.from_znode(data, None, store.ack_path).applied_version)

    watch = NodeWatch(client.cluster.zk, store.ack_path, acknowledged)
    try:
        changes = [store.set({"rate": float(rate)}) for rate in range(1, 11)]
        last = changes[-1].version
        assert [c.version for c in changes] == list(range(10))
        wait_for(lambda: seen and seen[-1] == last, timeout=ACK_BOUND, what="the last ack")
    finally:
        watch.stop()
    assert seen == sorted(seen), f"acknowledgements go back: {seen}"
    wait_for(lambda: last_values(out) == {"rate": 10.0}, timeout=30, what="the last")
    ran = [m["values"]["rate"] for m in configs(out)]
    assert ran == sorted(ran), f"the job ran an older value after a newer one: {ran}"
    assert store.set({"stop": True}).version == 10
    assert client.wait(job_id, timeout=120).outcome == SUCCEEDED


@pytest.mark.disturbs
def test_a_change_made_while_the_driver_is_dead_is_applied_by_the_next_attempt(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    job_id = client.submit_function(jobs.stepper, str(out), 2000, 0.05, job_id="failover")
    first = zkstore(runtime_config, "control set", job_id, "rate=1", "--wait", "--format", "json")
    assert first.returncode == 0, first.stderr
    before = json.loads(first.stdout)["version"]
    wait_for(lambda: len(steps_of(out, 1)) >= 3, timeout=60, what="attempt 1 to make progress")
    (pid,) = local.kill_host("d1")  # the driver SIGKILLed, and no daemon to start another
    wait_for(lambda: not alive(pid), timeout=30, what="the driver to die")

    changed = zkstore(runtime_config, "control set", job_id, "rate=2", "--format", "json")
    assert changed.returncode == 0, changed.stderr
    after = json.loads(changed.stdout)["version"]
    assert after == before + 1
    assert control(runtime_config, job_id)["pending"] == ["rate"]  # no attempt alive to apply it
    local.start_daemon("d2")

    wait_for((out / "start-attempt-2").exists, timeout=120, what="attempt 2")
    start = jobs.read_marks(str(out))["start-attempt-2"]
    assert (start["config_version"], start["rate"]) == (after, 2)
    assert start["checkpoint_config_version"] == before, "it resumed from a checkpoint of v0"
    wait_for(
        lambda: (
            (c := control(runtime_config, job_id))["checkpoint"]["control_version"] == after
            and c["applied"]["attempt"] == 2
        ),
        timeout=60,
        what="a checkpoint of attempt 2 under the new version",
    )
    shown = control(runtime_config, job_id)
    assert shown["applied"] == {**shown["applied"], "version": after, "live": True}
    assert shown["pending"] == [] and shown["rejected"] == {}
    assert all(m["rate"] == 1 for m in steps_of(out, 1).values()), "the dead attempt never saw 2"
    assert all(m["rate"] == 2 for m in steps_of(out, 2).values())
    assert zkstore(runtime_config, "jobs cancel", job_id).returncode == 0
    assert client.wait(job_id, timeout=120).outcome == CANCELLED


def _adopted(daemon: DaemonProcess, job_id: str) -> bool:
    """The daemon took over the leadership and found the job's attempt running."""
    log = daemon.log()
    return "leadership taken" in log and f"job {job_id}: attempt 1 runs" in log


@pytest.mark.disturbs
def test_a_paused_job_stays_paused_across_failovers_and_can_be_cancelled(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    leader = local.wait_for_leader()
    local.start_daemon("d2")
    job_id = client.submit_function(jobs.stepper, str(out), 2000, 0.05, job_id="pausing")
    wait_for(lambda: len(steps_of(out, 1)) >= 3, timeout=60, what="the job to make progress")

    paused = zkstore(runtime_config, "control pause", job_id, "--wait")
    assert paused.returncode == 0, paused.stderr
    assert "acknowledged by attempt 1" in paused.stdout and "paused" in paused.stdout
    assert state(runtime_config, job_id) == (PAUSED, 1)
    done = len(steps_of(out, 1))

    leader.signal(signal.SIGKILL)
    successor = local.wait_for_leader(exclude=leader.daemon_id)
    wait_for(lambda: _adopted(successor, job_id), timeout=60, what="the new leader to adopt it")
    assert state(runtime_config, job_id) == (PAUSED, 1)
    assert control(runtime_config, job_id)["paused"] is True
    assert len(steps_of(out, 1)) == done, "a paused job made progress"

    resumed = zkstore(runtime_config, "control resume", job_id, "--wait")
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: len(steps_of(out, 1)) > done + 2, timeout=60, what="progress after resume")
    assert state(runtime_config, job_id)[0] == "RUNNING"

    assert zkstore(runtime_config, "control pause", job_id, "--wait").returncode == 0
    pid = local.driver_pid(job_id)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: state(runtime_config, job_id) == (PAUSED, 2), timeout=120, what="attempt 2")
    assert steps_of(out, 2) == {} and not (out / "start-attempt-2").exists(), (
        "a paused job's new attempt waits before the job starts"
    )

    assert zkstore(runtime_config, "jobs cancel", job_id).returncode == 0
    assert client.wait(job_id, timeout=120).outcome == CANCELLED
    assert steps_of(out, 2) == {}


@pytest.mark.spark
def test_log_level_changed_while_running_reaches_python_and_spark(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    job_id = client.submit_function(jobs.log_levels, str(out), job_id="levels")
    wait_for(lambda: list(out.glob("levels-*")), timeout=180, what="Spark to start")
    for level, python, spark in [("debug", "DEBUG", "DEBUG"), ("ERROR", "ERROR", "ERROR")]:
        done = zkstore(runtime_config, "control log-level", job_id, level, "--wait")
        assert done.returncode == 0, done.stderr
        assert "zkstore.log-level applied" in done.stdout
        wait_for(
            lambda p=python, s=spark: (out / f"levels-{p}-{s}").exists(),
            timeout=30,
            what=f"{python} in the driver and {spark} in Spark",
        )
    bad = zkstore(runtime_config, "control log-level", job_id, "LOUD")
    assert bad.returncode == 2 and "not a log level" in bad.stderr
    stop_and_succeed(runtime_config, client, job_id)


def test_garbage_in_the_acknowledgement_or_declaration_is_reported_and_healed(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = "hostile"
    daemon = start_tunable(local, client, out, job_id)
    assert zkstore(runtime_config, "control set", job_id, "rate=1", "--wait").returncode == 0
    store = client.cluster.control(job_id)
    client.cluster.zk.set(store.ack_path, b"[" * 5000)
    client.cluster.zk.set(store.keys_path, b"\xff")

    listed = zkstore(runtime_config, "jobs list", "--format", "json")
    job = next(j for j in json.loads(listed.stdout) if j["job_id"] == job_id)
    assert job["state"] == "RUNNING" and "control-ack" in job["record_errors"]
    shown = zkstore(runtime_config, "control get", job_id)
    assert shown.returncode == 0
    assert (
        "unreadable control-ack: " in shown.stdout and "unreadable control-keys: " in shown.stdout
    )
    assert re.search(r"rate\s+1\s+-\s+pending", shown.stdout)  # nothing readable acknowledged

    # The change is not checked against an unreadable declaration, but the job checks it.
    unchecked = zkstore(runtime_config, "control set", job_id, "colour=red", "--wait")
    assert unchecked.returncode == 1, unchecked.stderr
    assert "declared keys are unreadable, not checked" in unchecked.stderr
    assert "colour: not a key the job declared" in unchecked.stderr
    healed = control(runtime_config, job_id)  # the driver wrote its acknowledgement again
    assert healed["applied"]["version"] == healed["version"] and healed["rejected"].keys() == {
        "colour"
    }
    assert healed["record_errors"] == {"control-keys": healed["record_errors"]["control-keys"]}
    assert daemon.alive
    stop_and_succeed(runtime_config, client, job_id)
