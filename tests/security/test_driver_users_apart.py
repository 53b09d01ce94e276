"""Issue 54 (items 1 and 2) and issue 60 (item 7): what a job running as a driver user cannot
do, shown with users the test makes, daemons as root (the installed ``zkstore`` script), real
drivers and ZooKeeper, storage on a moto S3 server.

- A daemon that holds secrets and would run its drivers as its own user is refused unless it is
  told ``--jobs-may-read-secrets`` (as root, and as an unprivileged user, as the probe ran it):
  a process of that user is readable in ``/proc`` from its exec until it turns undumpable.
- With a pool, a job that polls ``/proc`` for every ``zkstore`` process as it appears (a
  ``jobs wait``, ``jobs list``, the daemon restarted under it) reads no ``environ`` and opens
  no ``mem`` of any, so reads no secret, however early.
- What job A (one user) leaves in /tmp, /dev/shm, /var/tmp is gone before its user is handed
  on, and its set-user-ID copy of Python, run by job C (the other user) meanwhile, runs as C.
- A second daemon of the host given the same driver user is refused, naming the first; a user
  a job left a process running as is shown out of the pool in ``daemons list``, and back once
  that process is gone.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import secret_jobs
from tests.cli import connection, json_of, script
from tests.helpers import BIN, hands_client, print_logs, wait_for, written_json
from tests.servers import S3Server
from tests.users import User, shared_directory
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e

KEY = b"the-cluster-signing-key-" + b"k" * 16
TOKEN = "change-t0ken-of-the-daemon-" + "a" * 8


@pytest.fixture
def base() -> Iterator[Path]:
    """Outside pytest's directory (private to root): the drivers pass through it. Not in a
    place a driver user's sweep empties (/tmp...): what the jobs write there for the test is
    theirs, and would be gone once their user's last process ended, before the test read it."""
    place = shared_directory("zkstore-apart-", parent="/run")
    (place / "out").mkdir()
    (place / "out").chmod(0o1777)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def on_s3(config: StoreConfig, s3: S3Server) -> StoreConfig:
    return config.with_changes(
        storage_url=f"s3://{s3.new_bucket()}/zkstore",
        storage_options=s3.options(),
        signing_key=KEY,
    )


def plain_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
    return {**env, **extra}


def test_a_daemon_whose_jobs_could_read_its_secrets_is_refused(
    runtime_config: StoreConfig, other_users: list[User], their_python: str, base: Path
) -> None:
    config = runtime_config.with_changes(storage_url=f"file://{base}/storage")
    args = [*connection(config), "--id", "d1", "--http", "off", "--max-drivers", "1"]
    args += ["--warm-drivers", "0", "--work-dir", str(base / "work")]
    user = other_users[0]
    as_root = {}
    as_user = {"user": user.uid, "group": user.gid, "extra_groups": []}
    for who, python, env, how in (
        ("root", str(BIN / "python"), {"ZKSTORE_SIGNING_KEY": KEY.decode()}, as_root),
        (user.name, their_python, {"ZKSTORE_SIGNING_KEY": KEY.decode()}, as_user),
        (user.name, their_python, {"ZKSTORE_API_TOKEN": TOKEN}, as_user),
    ):
        done = subprocess.run(
            [python, str(BIN / "zkstore"), "daemon", *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=base,
            env=plain_environment(HOME=str(base), **env),
            **how,  # type: ignore[call-overload]
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (who, done.stderr)
        assert "drivers would run as this daemon's user" in lines[0], lines
        assert "--driver-user" in lines[0] and "--jobs-may-read-secrets" in lines[0], lines
        assert KEY.decode() not in done.stderr and TOKEN not in done.stderr


def test_jobs_as_driver_users_read_nothing_of_a_zkstore_process_as_it_starts(
    runtime_config: StoreConfig,
    s3_server: S3Server,
    other_users: list[User],
    their_python: str,
    base: Path,
) -> None:
    config = on_s3(runtime_config, s3_server)
    out, gate = base / "out" / "catch", base / "out" / "gate"
    local = LocalCluster(
        config,
        base / "rt",
        restart_backoff=0.2,
        python=their_python,
        extra_env={"ZKSTORE_API_TOKEN": TOKEN},
        jobs_may_read_secrets=False,  # the pool keeps them apart: no need
    )
    pool = ("--driver-user", ",".join(user.name for user in other_users))
    env = plain_environment(ZKSTORE_SIGNING_KEY=KEY.decode(), ZKSTORE_API_TOKEN=TOKEN)
    try:
        local.start_daemon("d1", *pool)
        local.wait_for_leader()
        with hands_client(config) as client:
            needles = [KEY.decode(), TOKEN]
            job = client.submit_function(
                secret_jobs.catch_starting, str(out), str(gate), needles, job_id="catch"
            )
            ready = written_json(out / "ready", timeout=120, what="the job polls /proc")
            assert ready["uid"] in {user.uid for user in other_users}
            for _ in range(3):  # commands an operator runs, each a new zkstore process
                listed = script(config, "jobs list", env=env, timeout=120)
                assert listed.returncode == 0, listed.stderr
            waiting = subprocess.Popen(
                [str(BIN / "zkstore"), "jobs", "wait", job, *connection(config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            try:
                local.daemons["d1"].signal(signal.SIGKILL)  # a daemon restarted under it
                local.daemons["d1"].process.wait()
                restarted = local.start_daemon("d1", *pool)
                daemon_pid = restarted.process.pid
                wait_for(
                    lambda: "job catch: attempt 1 adopted" in restarted.log(), 120, what="adopted"
                )
                gate.touch()
                assert waiting.wait(timeout=180) == 0
                for name in ("ZKSTORE_SIGNING_KEY", "ZKSTORE_API_TOKEN"):  # it warns: use files
                    assert f"{name}: a secret in the environment is deprecated" in restarted.log()
            finally:
                if waiting.poll() is None:
                    waiting.kill()
                    waiting.wait()
            assert client.wait(job, timeout=120).outcome == SUCCEEDED
        found = written_json(out / "catch", timeout=60, what="what the job caught")
    except BaseException:
        print_logs(local)
        raise
    finally:
        local.stop()
    print("caught:", *(f"{key}: {seen['cmdline']}" for key, seen in found["caught"].items()))

    def words_of(pid: int) -> list[list[str]]:
        """What the catcher saw of ``pid`` (keys ``pid@start:crc``): each command line's words."""
        return [
            seen["cmdline"].replace("\0", " ").split()
            for key, seen in found["caught"].items()
            if key.split("@")[0] == str(pid)
        ]

    # the long-lived ones are caught whatever the load (a jobs list may end between two looks),
    # known by their pids: the daemon retitles itself "zkstore daemon d1" as it starts, so its
    # first command line is seen only when a look falls before that
    assert any("jobs" in w and "wait" in w for w in words_of(waiting.pid)), words_of(waiting.pid)
    assert any("daemon" in w and "d1" in w for w in words_of(daemon_pid)), words_of(daemon_pid)
    pool = {user.uid for user in other_users}
    for pid, seen in found["caught"].items():  # ours and every other zkstore process here
        if seen.get("uid") not in pool:  # the daemon's, a command's: closed to a driver user
            assert seen.get("environ_error") == "PermissionError", (pid, seen["cmdline"])
            assert seen.get("mem_error") == "PermissionError", (pid, seen["cmdline"])
        # and a driver user's own (the daemon's check that it runs Python as each) holds none
        environ = base64.b64decode(seen.get("environ", ""))
        assert KEY not in environ and TOKEN.encode() not in environ
        assert not seen.get("mem_holds"), (pid, seen)


def test_what_a_job_leaves_is_gone_before_its_user_is_handed_on_and_grants_nothing(
    runtime_config: StoreConfig,
    s3_server: S3Server,
    other_users: list[User],
    their_python: str,
    base: Path,
) -> None:
    config = on_s3(runtime_config, s3_server)
    out = base / "out"
    local = LocalCluster(config, base / "rt", restart_backoff=0.2, python=their_python)
    pool = ("--driver-user", ",".join(user.name for user in other_users))
    planted: dict[str, Any] = {}
    try:
        local.start_daemon("d1", *pool)
        local.wait_for_leader()
        with hands_client(config) as client:
            client.submit_function(secret_jobs.plant, str(out), str(out / "a-go"), job_id="a")
            planted = written_json(out / "a", timeout=120, what="job A planted")
            assert os.stat(planted["planted"]).st_mode & 0o4000, "a set-user-ID file"
            client.submit_function(
                secret_jobs.run_planted,
                str(out),
                planted["planted"],
                str(out / "c-go"),
                job_id="c",
            )
            ran = written_json(out / "c", timeout=120, what="job C ran A's file")
            (out / "a-go").touch()
            assert client.wait("a", timeout=120).outcome == SUCCEEDED
            client.submit_function(secret_jobs.look_for, str(out), planted["places"], job_id="v")
            assert client.wait("v", timeout=120).outcome == SUCCEEDED
            victim = json.loads((out / "v").read_text())
            (out / "c-go").touch()
            assert client.wait("c", timeout=120).outcome == SUCCEEDED
    except BaseException:
        print_logs(local)
        raise
    finally:
        local.stop()
        for place in planted.get("places", ()):  # whatever happened
            if os.path.isdir(place):
                shutil.rmtree(place, ignore_errors=True)
            elif os.path.lexists(place):
                os.unlink(place)
    assert ran["uid"] != planted["uid"], "C runs as the other user of the pool"
    assert ran["ran"]["code"] == 0, ran["ran"]
    assert ran["ran"]["out"] == f"{ran['uid']} {ran['uid']}", "no new privileges: C stays C"
    assert victim["uid"] == planted["uid"], "V got A's user, handed on"
    assert victim["found"] == [], "what A left was removed before"


def test_driver_users_are_one_daemons_and_a_user_left_busy_comes_back(
    runtime_config: StoreConfig,
    s3_server: S3Server,
    other_users: list[User],
    their_python: str,
    base: Path,
) -> None:
    config = on_s3(runtime_config, s3_server)
    out = base / "out"
    first, second = other_users
    local = LocalCluster(config, base / "rt", restart_backoff=0.2, python=their_python)
    left = 0
    try:
        local.start_daemon("d1", "--driver-user", f"{first.name},{second.name}")
        local.wait_for_leader()
        wait_for(lambda: "member d1 registered" in local.daemons["d1"].log(), 60, what="d1")
        words = ["--id", "d2", "--http", "off", "--driver-user", second.name, "--max-drivers"]
        words += ["1", "--warm-drivers", "0", "--work-dir", str(base / "d2")]
        other = subprocess.run(  # its drivers' Python: only the shared user stops it
            [their_python, str(BIN / "zkstore"), "daemon", *connection(config), *words],
            capture_output=True,
            text=True,
            env=plain_environment(),
            timeout=120,
        )
        lines = other.stderr.strip().splitlines()
        assert other.returncode == 2, other.stderr
        assert f"--driver-user {second.name} is the driver user of daemon d1 (pid " in lines[-1]
        with hands_client(config) as client:
            client.submit_function(secret_jobs.leave_a_process, str(out), job_id="leaves")
            assert client.wait("leaves", timeout=120).outcome == SUCCEEDED
            found = json.loads((out / "leaves").read_text())
            left = found["left"]
            user = next(u.name for u in other_users if u.uid == found["uid"])
            wait_for(lambda: users_out(config).get(user), 60, what=f"{user} shown out")
            shown = users_out(config, installed=True).get(user)  # as an operator reads it
            assert shown == "a process left by a driver still runs as it", shown
            os.kill(left, signal.SIGKILL)
            wait_for(lambda: user not in users_out(config), 60, what=f"{user} back in the pool")
    except BaseException:
        print_logs(local)
        raise
    finally:
        local.stop()
        if left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(left, signal.SIGKILL)


def users_out(config: StoreConfig, *, installed: bool = False) -> dict[str, str]:
    """The users d1 holds out of its pool, and why (``daemons list``): in this process for a
    wait that asks again and again, or by the ``installed`` script."""
    if installed:
        done = script(config, "daemons list", "--format", "json", timeout=60)
        assert done.returncode == 0, done.stderr
        (daemon,) = json.loads(done.stdout)
    else:
        (daemon,) = json_of(config, "daemons list")
    found: dict[str, str] = daemon["users_out"]
    return found
