"""The recovery runtime end to end: real daemons and drivers as processes, real signals."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import with_credentials
from tests.helpers import (
    SESSION_TIMEOUT,
    assert_nothing_left,
    step_runs,
    wait_for,
    wait_quarantined,
)
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, FAILED, SUCCEEDED

# Tests that start their daemons and only submit and follow jobs share one (tests/fleets.py).
pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]


def driver_pids(out: Path) -> set[int]:
    """The pids of the driver processes that ran steps of the job."""
    return {m["pid"] for name, m in jobs.read_marks(str(out)).items() if name.startswith("step-")}


def two_daemons_running(
    local: LocalCluster,
    client: Client,
    out: Path,
    job_id: str,
    total: int,
    delay: float,
    past: int,
    gate: Path | None = None,
) -> str:
    """d1 leads, d2 stands by, and a ``steps`` job runs: returns once it is ``past`` steps in
    (with ``gate``, the job goes on until that file exists: see :func:`tests.jobs.steps`)."""
    local.start_daemon("d1")
    local.wait_for_leader()
    local.start_daemon("d2")
    args = (str(out), total, delay) if gate is None else (str(out), total, delay, str(gate))
    submitted = client.submit_function(jobs.steps, *args, job_id=job_id)
    wait_for(lambda: len(step_runs(out)) >= past, timeout=60, what="job progress")
    return submitted


def test_job_runs_to_success_and_leaves_nothing_behind(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "out"
    job_id = client.submit_function(jobs.steps, str(out), 4, 0.05, job_id="ok")
    result = client.wait(job_id, timeout=60)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert step_runs(out) == {1: [1], 2: [1], 3: [1], 4: [1]}
    wait_for(lambda: client.status(job_id).state == SUCCEEDED, timeout=20, what="cleanup")
    assert_nothing_left(runtime_config, job_id)


@pytest.mark.disturbs
def test_leader_sigkill_mid_job_is_adopted_and_finishes_once(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = two_daemons_running(local, client, out, "adopt", 12, 0.4, 2)
    leader = local.wait_for_leader()
    driver_pid = local.driver_pid(job_id)
    leader.signal(signal.SIGKILL)
    successor = local.wait_for_leader(exclude=leader.daemon_id, timeout=SESSION_TIMEOUT * 4)
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1), "adopted, never resubmitted"
    assert all(attempts == [1] for attempts in step_runs(out).values()), "every step ran once"
    assert sorted(step_runs(out)) == list(range(1, 13))
    assert driver_pids(out) == {driver_pid}, "the driver running before the kill ran every step"
    info = local.leader()
    assert info is not None and info.daemon_id == successor.daemon_id


@pytest.mark.disturbs
def test_driver_sigkill_resumes_from_latest_checkpoint(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "out"
    gate = tmp_path / "gate"  # opened after the kill: the job cannot have finished before it
    job_id = client.submit_function(jobs.steps, str(out), 10, 0.3, str(gate), job_id="resume")
    wait_for(lambda: len(step_runs(out)) >= 4, timeout=60, what="job progress")
    pid = local.driver_pid(job_id)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    gate.touch()
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    marks = jobs.read_marks(str(out))
    resumed_at = marks["start-attempt-2"]["step"]
    assert resumed_at > 1, "attempt 2 resumed from a checkpoint, not from scratch"
    runs = step_runs(out)
    assert sorted(runs) == list(range(1, max(runs) + 1)) and max(runs) >= 10
    for step in range(1, resumed_at):
        assert runs[step] == [1], f"step {step} was checkpointed: never redone"
    assert all(len(a) <= 2 for a in runs.values())


@pytest.mark.disturbs
def test_leader_and_driver_killed_at_once_job_is_resubmitted(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    gate = tmp_path / "gate"  # opened after the kills: the job cannot have finished before
    job_id = two_daemons_running(local, client, out, "both", 8, 0.3, 3, gate)
    leader = local.wait_for_leader()
    driver = local.driver_pid(job_id)
    assert driver is not None
    leader.signal(signal.SIGKILL)
    os.kill(driver, signal.SIGKILL)
    gate.touch()
    local.wait_for_leader(exclude=leader.daemon_id, timeout=SESSION_TIMEOUT * 4)
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    assert jobs.read_marks(str(out))["start-attempt-2"]["step"] > 1


@pytest.mark.disturbs
def test_two_daemons_started_together_elect_exactly_one(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    first, second = local.start_daemon("d1"), local.start_daemon("d2")
    leader = local.wait_for_leader()
    out = tmp_path / "out"
    job_id = client.submit_function(jobs.steps, str(out), 3, 0.05, job_id="one")
    assert client.wait(job_id, timeout=60).outcome == SUCCEEDED
    assert client.status(job_id).result is not None
    assert client.status(job_id).result.attempts == 1  # type: ignore[union-attr]
    assert [m for m in jobs.read_marks(str(out)) if m.startswith("start-")] == ["start-attempt-1"]
    # Under load the second daemon may register after the job is done: wait for it to contend.
    election = client.cluster.layout.election
    wait_for(
        lambda: len(client.cluster.zk.children(election)) == 2,
        timeout=SESSION_TIMEOUT * 10,
        what="both daemons contending",
    )
    info = local.leader()
    assert info is not None and info.daemon_id == leader.daemon_id, "the leader never changed"
    assert first.alive and second.alive


@pytest.mark.disturbs
def test_leader_whose_session_expired_is_fenced_and_no_second_attempt_starts(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    """SIGSTOP the leader past its session timeout: the other daemon takes over and adopts; the
    old leader wakes up believing it leads, and its writes are rejected."""
    out = tmp_path / "out"
    job_id = two_daemons_running(local, client, out, "fenced", 14, 0.4, 2)
    old = local.wait_for_leader()
    old.signal(signal.SIGSTOP)
    try:
        new = local.wait_for_leader(exclude=old.daemon_id, timeout=SESSION_TIMEOUT * 5)
    finally:
        old.signal(signal.SIGCONT)
    election = client.cluster.layout.election
    wait_for(
        lambda: any(
            n.startswith(f"{old.daemon_id}-") for n in client.cluster.zk.children(election)
        ),
        timeout=60,
        what="the old leader contending again, with a new session",
    )
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 1)
    assert all(attempts == [1] for attempts in step_runs(out).values())
    assert len(driver_pids(out)) == 1, "the new leader adopted the driver: no second attempt"
    info = local.leader()
    assert info is not None and info.daemon_id == new.daemon_id
    assert old.alive, "the old leader keeps running, as a follower"


def test_restart_policy_with_exponential_backoff(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "flaky"
    job_id = client.submit_function(jobs.flaky, str(out), 3, job_id="flaky", max_attempts=3)
    result = client.wait(job_id, timeout=60)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 3)
    marks = jobs.read_marks(str(out))
    gap1 = marks["attempt-2"]["time"] - marks["attempt-1"]["time"]
    gap2 = marks["attempt-3"]["time"] - marks["attempt-2"]["time"]
    assert gap1 >= 0.2 and gap2 >= 0.4, "backoff 0.2 s, doubled after the second failure"
    failing = client.submit_function(
        jobs.flaky, str(tmp_path / "never"), 99, job_id="never", max_attempts=2
    )
    final = client.wait(failing, timeout=60)
    assert (final.outcome, final.attempts) == (FAILED, 2)
    assert final.error is not None and "attempt 2 fails on purpose" in final.error


@pytest.mark.disturbs
def test_cancel_running_and_waiting_jobs(
    local: LocalCluster, client: Client, tmp_path: Path, runtime_config: StoreConfig
) -> None:
    local.start_daemon("d1")
    out = tmp_path / "out"
    job_id = client.submit_function(jobs.sleeper, str(out), 120, job_id="long")
    wait_for(lambda: local.driver_pid(job_id) is not None, timeout=30, what="driver up")
    client.cancel(job_id, reason="test")
    result = client.wait(job_id, timeout=60)  # the job would sleep for 120 s
    assert result.outcome == CANCELLED
    assert "finished" not in jobs.read_marks(str(out))
    wait_for(lambda: client.status(job_id).state == CANCELLED, timeout=20, what="cleanup")
    assert_nothing_left(runtime_config, job_id)
    # A job waiting in restart backoff is cancelled without running again.
    slow = LocalCluster(runtime_config, tmp_path / "slow", restart_backoff=30.0)
    try:
        local.stop()
        slow.start_daemon("d2")
        flaky = client.submit_function(jobs.flaky, str(tmp_path / "f"), 9, job_id="backoff")
        wait_for(lambda: client.status(flaky).state == "RESTARTING", timeout=60, what="backoff")
        client.cancel(flaky)
        assert client.wait(flaky, timeout=20).outcome == CANCELLED
        assert list(jobs.read_marks(str(tmp_path / "f"))) == ["attempt-1"]
    finally:
        slow.stop()


@pytest.mark.disturbs
def test_broken_definition_is_quarantined_while_others_run(
    local: LocalCluster, client: Client, tmp_path: Path, runtime_config: StoreConfig
) -> None:
    ids = [
        client.submit_function(jobs.steps, str(tmp_path / f"o{i}"), 2, 0.01, job_id=f"job-{i}")
        for i in range(3)
    ]
    with Cluster.open(runtime_config) as cluster:
        broken = cluster.jobs.handles.get_handle("job-1")
        path = cluster.storage.path_of(broken.uri)
        cluster.storage.fs.pipe_file(path, cluster.storage.fs.cat_file(path)[:-5])
    local.start_daemon("d1")
    for job_id in ("job-0", "job-2"):
        assert client.wait(job_id, timeout=60).outcome == SUCCEEDED
    assert "CorruptPayload" in wait_quarantined(client, "job-1").reason
    assert ids == ["job-0", "job-1", "job-2"]


@pytest.mark.disturbs
def test_submission_is_durable_without_any_daemon(
    local: LocalCluster, client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job_id = client.submit_function(jobs.steps, str(out), 2, 0.01, job_id="early")
    assert client.status(job_id).state == "SUBMITTED"
    local.start_daemon("d1")
    assert client.wait(job_id, timeout=60).outcome == SUCCEEDED


def test_dynamic_configuration_reaches_the_running_job(
    local: LocalCluster, client: Client, tmp_path: Path, runtime_config: StoreConfig
) -> None:
    from click.testing import CliRunner

    from recovery.cli.main import cli

    local.start_daemon("d1")
    out = tmp_path / "out"
    job_id = client.submit_function(jobs.wait_for_go, str(out), job_id="gated")
    wait_for(lambda: "waiting" in jobs.read_marks(str(out)), timeout=30, what="job waiting")
    connection = ["--zk", runtime_config.zk_hosts, "--root", runtime_config.root]
    connection += ["--storage", runtime_config.storage_url]
    runner = CliRunner(env=with_credentials(runtime_config, {}))
    assert runner.invoke(cli, ["control", "set", job_id, "rate=10", *connection]).exit_code == 0
    done = runner.invoke(
        cli, ["control", "set", job_id, "go=true", "--format", "json", *connection]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["values"] == {"go": True, "rate": 10}
    assert client.wait(job_id, timeout=30).outcome == SUCCEEDED
    assert jobs.read_marks(str(out))["went"]["rate"] == 10


@pytest.mark.disturbs
def test_max_drivers_holds_when_many_jobs_are_recovered_at_once(
    runtime_config: StoreConfig, client: Client, tmp_path: Path
) -> None:
    """Five jobs waiting when a daemon with two driver slots takes over: never more than two
    drivers at the same time, and all five finish."""
    outs = [tmp_path / f"o{i}" for i in range(5)]
    ids = [
        client.submit_function(jobs.sleeper, str(out), 1.0, job_id=f"slot-{i}")
        for i, out in enumerate(outs)
    ]
    local = LocalCluster(runtime_config, tmp_path / "runtime", extra_args=("--max-drivers", "2"))
    try:
        local.start_daemon("d1")
        for job_id in ids:
            assert client.wait(job_id, timeout=90).outcome == SUCCEEDED
    finally:
        local.stop()
    spans = []
    for out in outs:
        marks = jobs.read_marks(str(out))
        spans.append((marks["attempt-1"]["time"], marks["finished"]["time"]))
    busiest = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert busiest <= 2, f"{busiest} drivers ran at once with 2 slots"
