"""Every daemon runs drivers: placement by slots and labels, host loss, leader loss, drain.

Daemons and drivers are real processes; a "host" is a daemon with the drivers it launched, and
its loss is a SIGKILL of all of them. Jobs record every step with its attempt, pid and time, so
that the tests check what ran where and that no job ever had two live attempts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from recovery.cli.main import cli
from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import json_of
from tests.helpers import BIN, SESSION_TIMEOUT, step_runs, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e

# -- real daemons --------------------------------------------------------------------------------


def attempts_overlap(out: Path) -> bool:
    """True if two attempts of the job recorded steps at overlapping times."""
    spans: dict[int, tuple[float, float]] = {}
    for name, mark in jobs.read_marks(str(out)).items():
        if name.startswith("step-"):
            attempt = int(name.rsplit("-", 1)[1])
            first, last = spans.get(attempt, (mark["time"], mark["time"]))
            spans[attempt] = (min(first, mark["time"]), max(last, mark["time"]))
    ordered = [spans[a] for a in sorted(spans)]
    return any(ordered[i][1] > ordered[i + 1][0] for i in range(len(ordered) - 1))


def waiting(client: Client, job_id: str) -> str:
    """Why the job waits, as its status says ("" if it does not say)."""
    status = client.status(job_id).status
    return (status.reason or "") if status is not None else ""


def where(client: Client, job_id: str) -> str | None:
    status = client.status(job_id).status
    return status.daemon_id if status is not None else None


def test_a_lost_hosts_jobs_resume_elsewhere_and_the_others_are_untouched(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    local = LocalCluster(runtime_config, tmp_path / "rt", extra_args=("--max-drivers", "2"))
    try:
        for name in ("d1", "d2", "d3"):
            local.start_daemon(name)
        leader = local.wait_for_leader().daemon_id
        wait_for(lambda: len(client.cluster.zk.children(client.cluster.layout.members)) == 3)
        outs = {f"j{i}": tmp_path / f"j{i}" for i in range(6)}
        gate = tmp_path / "gate"  # opened after the kill: no job can have finished before it
        for job_id, out in outs.items():
            client.submit_function(jobs.steps, str(out), 14, 0.3, str(gate), job_id=job_id)
        wait_for(lambda: all(len(step_runs(o)) >= 2 for o in outs.values()), timeout=90)
        placed = {job_id: where(client, job_id) for job_id in outs}
        assert sorted(placed.values()) == ["d1", "d1", "d2", "d2", "d3", "d3"], "two per host"
        victim = next(name for name in ("d1", "d2", "d3") if name != leader)
        lost = sorted(j for j, m in placed.items() if m == victim)
        assert len(local.kill_host(victim)) == 2
        gate.touch()
        for job_id in outs:
            assert client.wait(job_id, timeout=120).outcome == SUCCEEDED
    finally:
        local.stop()
    for job_id, out in outs.items():
        runs = step_runs(out)
        assert sorted(runs) == list(range(1, max(runs) + 1)) and max(runs) >= 14, job_id
        assert not attempts_overlap(out), f"{job_id} had two live attempts"
        marks = jobs.read_marks(str(out))
        if job_id in lost:
            assert marks["start-attempt-2"]["step"] > 1, f"{job_id} resumed from a checkpoint"
        else:
            assert all(attempts == [1] for attempts in runs.values()), f"{job_id} untouched"


def test_the_leaders_loss_restarts_nothing_on_any_host(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    local = LocalCluster(runtime_config, tmp_path / "rt", extra_args=("--max-drivers", "1"))
    try:
        for name in ("d1", "d2", "d3"):
            local.start_daemon(name)
        leader = local.wait_for_leader()
        wait_for(lambda: len(client.cluster.zk.children(client.cluster.layout.members)) == 3)
        outs = {f"j{i}": tmp_path / f"j{i}" for i in range(3)}
        gate = tmp_path / "gate"  # opened after the kill: no job can have finished before it
        for job_id, out in outs.items():
            client.submit_function(jobs.steps, str(out), 12, 0.3, str(gate), job_id=job_id)
        wait_for(lambda: all(len(step_runs(o)) >= 2 for o in outs.values()), timeout=90)
        placed = {job_id: where(client, job_id) for job_id in outs}
        assert set(placed.values()) == {"d1", "d2", "d3"}, "one per host"
        local.kill_host(leader.daemon_id)  # the leader and the driver on its host
        survivor = local.wait_for_leader(exclude=leader.daemon_id, timeout=SESSION_TIMEOUT * 6)
        gate.touch()
        for job_id in outs:
            assert client.wait(job_id, timeout=120).outcome == SUCCEEDED
        assert survivor.alive
    finally:
        local.stop()
    restarted = {j for j, out in outs.items() if "start-attempt-2" in jobs.read_marks(str(out))}
    assert restarted == {j for j, m in placed.items() if m == leader.daemon_id}, (
        "only the job on the lost host ran again; the others were adopted"
    )
    assert not any(attempts_overlap(out) for out in outs.values())


def test_jobs_wait_with_a_reason_for_a_slot_or_a_label_and_drain_is_honoured(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    local = LocalCluster(runtime_config, tmp_path / "rt", extra_args=("--max-drivers", "1"))
    try:
        local.start_daemon("small")
        local.wait_for_leader()
        client.submit_function(jobs.sleeper, str(tmp_path / "a"), 2.0, job_id="a")
        client.submit_function(jobs.sleeper, str(tmp_path / "b"), 0.1, job_id="b")
        gpu = client.submit_function(
            jobs.sleeper, str(tmp_path / "g"), 0.1, job_id="g", require={"gpu": "yes"}
        )
        wait_for(lambda: "slot" in waiting(client, "b"), timeout=60, what="b waits for a slot")
        wait_for(lambda: "gpu=yes" in waiting(client, gpu), timeout=60, what="g waits for a gpu")
        listed = {j["job_id"]: j for j in json_of(runtime_config, "jobs", "list")}
        assert "slot" in listed["b"]["waiting"] and "gpu=yes" in listed["g"]["waiting"]
        assert client.wait("b", timeout=60).outcome == SUCCEEDED, "started once a slot freed"
        runner = CliRunner()
        connection = ["--zk", runtime_config.zk_hosts, "--root", runtime_config.root]
        drain = ["daemons", "drain", "big", "--before-start", *connection]
        assert runner.invoke(cli, drain).exit_code == 0
        local.start_daemon("big", "--label", "gpu=yes")
        wait_for(
            lambda: any(
                d["id"] == "big" and d["up"] for d in json_of(runtime_config, "daemons", "list")
            ),
            timeout=60,
        )
        assert client.status(gpu).result is None, "drained: nothing placed there"
        assert runner.invoke(cli, ["daemons", "undrain", "big", *connection]).exit_code == 0
        assert client.wait(gpu, timeout=60).outcome == SUCCEEDED
        fleet = {d["id"]: d for d in json_of(runtime_config, "daemons", "list")}
        assert fleet["big"]["labels"] == {"gpu": "yes"} and fleet["small"]["slots"] == 1
        assert [d for d in fleet.values() if d["leader"]] == [fleet["small"]]
    finally:
        local.stop()


def test_a_second_daemon_with_the_same_id_refuses_to_start(
    runtime_config: StoreConfig, tmp_path: Path, local: LocalCluster
) -> None:
    local.start_daemon("same")
    local.wait_for_leader()
    env = local.environment()
    second = subprocess.run(
        [str(BIN / "zkstore"), "daemon", "--id", "same"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2, second
    assert "daemon id 'same' is in use by another live daemon" in second.stderr
    assert "Traceback" not in second.stderr
    assert local.daemons["same"].alive
