"""Issue 27: what a user sees of a job, as they meet it: the installed ``zkstore`` script against
a real daemon, a job killed under it (SIGKILL of its driver), another that cannot be placed.

- ``jobs wait`` says that attempt 1 was lost and why, never the same state line twice, and
  Ctrl-C says that the job goes on and how to follow it again (exit 130);
- ``jobs logs --follow`` says how attempt 1 ended before attempt 2's output;
- ``jobs show`` has the job's arguments, its Spark properties (a secret redacted), the modules
  shipped automatically, its ``--require`` labels and why a PENDING job waits, and attempts
  told apart (lost vs failed) in words and in the JSON;
- ``jobs logs`` of a job that has not started says so (exit 4), not silence and exit 0;
- a finished job keeps its DAEMON in ``jobs list``;
- ``ps`` names the driver by its job and attempt, the daemon and its fork server by its id.

Before this change (01c8155) each of these failed: wait printed ``STARTING (attempt 2)`` with no
word of attempt 1, ``logs --follow`` jumped to ``--- attempt 2 ---``, ``show`` had none of the
fields, ``jobs logs`` printed nothing with exit 0, the finished job's daemon was null.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import read_until, script, start
from tests.helpers import SESSION_TIMEOUT, wait_for, written_json
from zkstore.config import StoreConfig

pytestmark = pytest.mark.e2e

JOB = """
import json, os, time
from pathlib import Path

import helpers


def run(ctx, out, *words):
    Path(out).mkdir(parents=True, exist_ok=True)
    print(helpers.greeting(ctx.attempt), flush=True)
    mark = Path(out) / f"attempt-{ctx.attempt}.json"
    mark.write_text(json.dumps({"pid": os.getpid(), "words": list(words)}))
    if ctx.attempt == 1:
        time.sleep(300)  # until the test kills this driver
    while not (Path(out) / "finish").exists():  # until the test has seen attempt 2 start
        time.sleep(0.05)
"""


def title(pid: int) -> str:
    """What ``ps -o args`` shows of a process."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, NotADirectoryError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def fields(shown: str) -> dict[str, str]:
    """The ``name: value`` lines of ``jobs show``."""
    pairs = (line.partition(":") for line in shown.splitlines() if not line.startswith(" "))
    return {name.strip(): value.strip() for name, _, value in pairs}


def test_a_killed_job_and_a_waiting_one_as_a_user_sees_them(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    config = runtime_config
    (laptop / "job.py").write_text(textwrap.dedent(JOB))
    (laptop / "helpers.py").write_text("def greeting(n):\n    return f'hello from attempt {n}'\n")
    out = tmp_path / "out"
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)

    submitted = script(
        config, "submit", "job.py:run", "--job-id", "killed", "--", str(out), cwd=laptop
    )
    assert submitted.returncode == 0, submitted.stderr
    waiter = start(config, "jobs wait", "killed", cwd=laptop)
    follower = start(config, "jobs logs", "killed", "--follow", cwd=laptop)
    driver = written_json(out / "attempt-1.json", timeout=90, what="attempt 1 running")["pid"]
    read_until(follower.stdout, "hello from attempt 1", [])  # the user follows attempt 1
    assert title(driver) == "zkstore driver killed attempt 1"
    assert title(local.daemons["d1"].pid) == "zkstore daemon d1"
    assert "zkstore fork-server d1" in {title(pid) for pid in children(local.daemons["d1"].pid)}
    # The waiter has seen attempt 1 run before it dies (under two busy loops on a slow day, a
    # waiter started at the submission first looked when attempt 2 ran, and rightly said only
    # "earlier attempts: 0 failed, 1 lost").
    waited: list[str] = []
    read_until(waiter.stderr, "RUNNING attempt 1", waited)
    os.kill(driver, signal.SIGKILL)

    told: list[str] = []
    read_until(follower.stderr, "--- killed: attempt 2 ---", told)
    (out / "finish").write_text("")
    _, rest = waiter.communicate(timeout=120)
    said = "\n".join([*waited, rest.rstrip("\n")])
    assert waiter.returncode == 0, said
    lines = [line.removeprefix("killed: ") for line in said.splitlines()]
    lost = [line for line in lines if line.startswith("attempt 1 was lost")]
    assert len(lost) == 1, said
    assert "killed by signal 9" in lost[0] and "do not count against --max-attempts" in lost[0]
    assert not any("STARTING attempt 1" in line for line in lines[lines.index(lost[0]) :]), said
    assert all(a != b for a, b in itertools.pairwise(lines)), f"a line twice: {said}"
    assert lines[-1] == "SUCCEEDED after 2 attempt(s)", said

    printed, _ = follower.communicate(timeout=120)
    assert follower.returncode == 0
    assert "hello from attempt 2" in printed
    assert told == [
        "--- killed: attempt 1 was lost (it does not count against --max-attempts): driver of "
        "attempt 1 on d1 killed by signal 9 and left no outcome ---",
        "--- killed: attempt 2 ---",
    ]

    shown = script(config, "jobs show", "killed", cwd=laptop)
    assert shown.returncode == 0, shown.stderr
    assert fields(shown.stdout)["attempt"] == (
        "2 (1 lost to the infrastructure); failures 0 of 3 allowed, losses 1 of 10"
    ), shown.stdout

    def finished_row() -> dict[str, object] | None:  # once cleaned up: the result only
        listed = script(config, "jobs list", "--all", "--format", "json", cwd=laptop)
        rows = [job for job in json.loads(listed.stdout) if job["job_id"] == "killed"]
        return rows[0] if rows and rows[0]["state"] != "CLEANING" else None

    row = wait_for(finished_row, timeout=60, what="killed cleaned up")
    assert (row["state"], row["daemon"], row["lost"], row["failures"]) == ("SUCCEEDED", "d1", 1, 0)

    submitted = script(
        config,
        "submit",
        "job.py:run",
        "--job-id",
        "waits",
        "--require",
        "zone=eu",
        "--conf",
        "spark.executor.memory=1g",
        "--conf",
        "spark.hadoop.fs.s3a.secret.key=hunter2",
        "--",
        str(out),
        "two words",
        cwd=laptop,
    )
    assert submitted.returncode == 0, submitted.stderr

    def pending() -> bool:
        found = json.loads(script(config, "jobs show", "waits", "--format", "json").stdout)
        return bool(found["state"] == "PENDING" and found["waiting"])

    wait_for(pending, timeout=60, what="the leader says why waits waits")
    found = json.loads(script(config, "jobs show", "waits", "--format", "json").stdout)
    assert found["args"] == f"{str(out)!r}, 'two words'"
    assert found["conf"] == (
        "spark.executor.memory=1g, spark.hadoop.fs.s3a.secret.key=*********(redacted)"
    )
    assert found["modules"] == "helpers"
    assert found["require"] == "zone=eu"
    assert "no daemon with zone=eu" in found["waiting"], found["waiting"]
    shown = script(config, "jobs show", "waits", cwd=laptop)
    assert "hunter2" not in shown.stdout + found["conf"]
    text = fields(shown.stdout)
    assert text["require"] == "zone=eu"
    assert text["modules"] == "helpers (shipped automatically from the job's directory)"
    assert text["waiting"].startswith("no daemon with zone=eu"), shown.stdout
    assert text["arguments"] == f"{str(out)!r}, 'two words'"

    logs = script(config, "jobs logs", "waits", cwd=laptop)
    assert logs.returncode == 4, logs
    assert "no logs of waits yet: it has not started (PENDING: no daemon with zone=eu" in (
        logs.stderr
    )

    waiting = start(config, "jobs wait", "waits", cwd=laptop)
    seen: list[str] = []
    read_until(waiting.stderr, "PENDING", seen)
    waiting.send_signal(signal.SIGINT)
    try:
        _, rest = waiting.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        waiting.kill()
        _, rest = waiting.communicate()
        raise AssertionError(f"jobs wait went on after SIGINT: {seen} {rest}") from None
    assert waiting.returncode == 130, rest
    assert "interrupted: only this command stopped; job waits goes on in the cluster" in rest
    assert "follow it again: zkstore jobs wait waits" in rest
