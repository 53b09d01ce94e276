"""``zkstore daemon --driver-user``: daemons running as root run every driver, its Spark JVM and
its job's code as users the test creates, on S3 storage (a driver of another user needs no
access to the daemon's files).

- A Spark job (local mode) runs as the first daemon's user; that daemon's host is lost
  (SIGKILL of the daemon and its drivers) and the job runs again on the second daemon, as its
  user; the lost attempt's directory (its driver's, which the driver cannot remove by itself)
  is removed once its daemon is back, the finished one's at once; the second attempt's log is
  shipped by its daemon's shipper. Neither the cluster key nor the API token is in the JVM's
  system properties, its command line or environment, nor the driver's environment.
- With a pool of two users, two jobs on one daemon run as different users: neither can list or
  read the other's directory. The daemon is SIGKILLed and started again: it adopts both
  drivers; a stop ends one (SIGTERM to the driver, SIGKILL of its process group after the
  grace: a child it left is killed too) and a cancel the other; their directories go.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import secret_jobs
from tests.cli import script, zkstore
from tests.helpers import alive, hands_client, print_logs, wait_for, written_json
from tests.servers import S3Server
from tests.users import User, shared_directory
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, STOPPED, SUCCEEDED

KEY = b"the-cluster-signing-key-" + b"u" * 16
TOKEN = "change-t0ken-of-the-daemons-" + "t" * 8

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


@pytest.fixture
def base() -> Iterator[Path]:
    """Outside pytest's directory (private to root): the drivers pass through it."""
    place = shared_directory("zkstore-driver-users-")
    for where in ("out", "out/spark", "out/pool"):  # what jobs of every user saw
        (place / where).mkdir()
        (place / where).chmod(0o1777)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def driver_files(pid: int, directory: Path) -> dict[str, bytes]:
    """What a driver holds on its host besides its memory: its ``environ`` and ``cmdline`` as
    the kernel shows them, and every file in its attempt's directory and Spark's scratch."""
    found = {what: Path(f"/proc/{pid}/{what}").read_bytes() for what in ("environ", "cmdline")}
    for place in (directory, Path(f"{directory}.spark")):
        for path in place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                found[str(path)] = path.read_bytes()
    assert len(found) > 3, found.keys()
    return found


def assert_no_secret_in(found: dict[str, bytes]) -> None:
    for name, data in found.items():
        for secret in (KEY, KEY.hex().encode(), TOKEN.encode()):
            assert secret not in data, f"a secret in {name}"


def on_s3(config: StoreConfig, s3: S3Server) -> StoreConfig:
    return config.with_changes(
        storage_url=f"s3://{s3.new_bucket()}/zkstore",
        storage_options=s3.options(),
        signing_key=KEY,
    )


def test_a_spark_job_runs_as_the_driver_user_across_a_failover(
    spark_config: StoreConfig,
    s3_server: S3Server,
    other_users: list[User],
    their_python: str,
    base: Path,
) -> None:
    users, python = other_users, their_python
    config = on_s3(spark_config, s3_server)
    first, second = users
    out = base / "out" / "spark"
    local = LocalCluster(
        config,
        base / "rt",
        spark_master="local[1]",
        restart_backoff=0.2,
        python=python,
        extra_env={"ZKSTORE_API_TOKEN": TOKEN},
    )
    try:
        local.start_daemon("d1", "--driver-user", first.name)
        local.wait_for_leader()
        with hands_client(config) as client:
            job = client.submit_function(secret_jobs.spark_identity, str(out), job_id="who")
            one = written_json(out / "attempt-1", timeout=300, what="attempt 1 ran Spark")
            assert_no_secret_in(driver_files(one["pid"], Path(one["cwd"])))
            local.start_daemon("d2", "--driver-user", second.name)
            members = f"{config.base_path}/members/d2"
            wait_for(lambda: local.zk.exists(members), timeout=60, what="d2 a member")
            local.kill_host("d1")
            result = client.wait(job, timeout=300)
            assert result.outcome == SUCCEEDED and result.attempts == 2, result
            two = json.loads((out / "attempt-2").read_text())
        assert not Path(two["cwd"]).exists(), "the finished attempt's directory is gone"
        assert Path(one["cwd"]).exists(), "the lost one's stays while its daemon is down"
        local.start_daemon("d1", "--driver-user", first.name)
        for place in (Path(one["cwd"]), Path(one["cwd"] + ".spark")):
            wait_for(lambda place=place: not place.exists(), timeout=60, what=f"{place} removed")
        logs = wait_for(
            lambda: (
                (done := zkstore(config, "jobs logs", job, "--attempt", "2")).returncode == 0
                and f"attempt 2 runs as {second.name}" in done.stdout
            ),
            timeout=60,
            what="attempt 2's log shipped",
        )
        assert logs
    except BaseException:
        print_logs(local)
        raise
    finally:
        local.stop()
    for seen, user in ((one, first), (two, second)):
        assert (seen["uid"], seen["user"], seen["home"]) == (user.uid, user.name, "/nonexistent")
        assert seen["properties"]["user.name"] == seen["spark_user"] == user.name, seen[
            "spark_user"
        ]
        assert (seen["cwd_uid"], seen["cwd_mode"]) == (user.uid, 0o700), seen
        assert Path(seen["cwd"]).parent == base / "rt" / "attempts"
        assert seen["properties"]["java.io.tmpdir"] == seen["cwd"] + ".spark", "its scratch"
        assert seen["total"] == sum(i * i for i in range(100))
        assert seen["jvm"], "the JVM was found and read"
        shown = json.dumps(seen)
        for secret in (KEY.decode(), KEY.hex(), TOKEN):
            assert secret not in shown


def test_two_jobs_of_a_pool_are_apart_and_their_adopted_drivers_end(
    runtime_config: StoreConfig,
    s3_server: S3Server,
    other_users: list[User],
    their_python: str,
    base: Path,
) -> None:
    users, python = other_users, their_python
    config = on_s3(runtime_config, s3_server)
    out = base / "out" / "pool"
    local = LocalCluster(config, base / "rt", restart_backoff=0.2, python=python)
    pool = ("--driver-user", f"{users[0].name},{users[1].name}", "--end-grace", "1s")
    try:
        local.start_daemon("d1", *pool)
        with hands_client(config) as client:
            for job, other in (("left", "right"), ("right", "left")):
                client.submit_function(secret_jobs.neighbour, str(out), other, job_id=job)
            seen = {job: written_json(out / job, 120, what=job) for job in ("left", "right")}
            assert {seen["left"]["uid"], seen["right"]["uid"]} == {u.uid for u in users}
            for job, found in seen.items():
                assert found["tries"] == {"list": "PermissionError", "read": "PermissionError"}
                info = os.stat(found["cwd"])
                assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (found["uid"], 0o700), job
            local.daemons["d1"].signal(signal.SIGKILL)
            local.daemons["d1"].process.wait()
            restarted = local.start_daemon("d1", *pool)
            for job in seen:
                wait_for(
                    lambda job=job: f"job {job}: attempt 1 adopted" in restarted.log(),
                    timeout=60,
                    what=f"{job} adopted",
                )
            stopped = script(config, "jobs stop", "left", timeout=120)
            assert stopped.returncode == 0, stopped.stderr
            assert client.status("left").state == STOPPED
            assert not alive(seen["left"]["child"]), "its group was SIGKILLed after the grace"
            cancelled = script(config, "jobs cancel", "right", timeout=60)
            assert cancelled.returncode == 0, cancelled.stderr
            ended = client.wait("right", timeout=120)
            # Its main thread blocks in a wait: the cancel interrupts it at once (not after the
            # grace, when the outcome came before the daemon had seen the driver exit).
            assert (ended.outcome, ended.error) == (CANCELLED, "cancelled"), ended
            # The daemon ends what a driver left as it sees the driver exit (through its pidfd,
            # looked at every second): the outcome is reported just before that exit.
            wait_for(lambda: not alive(seen["right"]["pid"]), 10, what="right's driver exits")
            wait_for(
                lambda: not alive(seen["right"]["child"]),
                10,
                what="what its driver left is killed at its exit",
            )
        for found in seen.values():
            wait_for(lambda f=found: not Path(f["cwd"]).exists(), 60, what=f"{found['cwd']} gone")
    except BaseException:
        print_logs(local)
        raise
    finally:
        local.stop()
