"""An attempt's end is acted on only once its driver is known gone (issue 21, finding 3).

A driver records its outcome (releasing ``running``), then closes its session and exits. Until
its member has seen the process end, the leader neither releases the attempt's artifacts nor
places the next attempt: first the leader's decision, branch by branch (pure), then a real
driver that lingers after its outcome.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recovery.client import Client
from recovery.decide import CleanUp, Local, Restart, Wait, decide
from recovery.dev.localcluster import LocalCluster
from recovery.settings import DaemonSettings
from tests.helpers import SESSION_TIMEOUT, wait_for
from zkstore.config import StoreConfig
from zkstore.handle import Handle
from zkstore.jobs.records import JobResult, JobStatus, Outcome
from zkstore.jobs.snapshot import JobSnapshot
from zkstore.jobs.states import CANCELLED, DIRTY, FAILED, STARTING, SUCCEEDED

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
SETTINGS = DaemonSettings(
    store=StoreConfig(session_timeout=10.0), restart_backoff=1.0, start_timeout=60
)


def ago(seconds: float) -> str:
    return (
        (NOW - timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def failed_attempt(finished: float, **records: Any) -> JobSnapshot:
    handle = Handle(
        uri="file:///s/x",
        size=1,
        sha256="a" * 64,
        created=ago(600),
        writer="w",
        summary={"max_attempts": 3},
        version=0,
    )
    status = JobStatus(version=4, state=STARTING, attempt=1, updated=ago(120), member="m")
    outcome = Outcome(version=0, attempt=1, outcome=FAILED, finished=ago(finished), error="x")
    return JobSnapshot(job_id="j", handle=handle, status=status, outcome=outcome, **records)


def test_an_outcome_is_acted_on_once_the_member_saw_the_driver_exit() -> None:
    waiting = decide(failed_attempt(1), Local(member_alive=True), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and "waiting for its driver to exit" in waiting.reason
    assert waiting.until == NOW + timedelta(seconds=59), "at most the launch deadline"
    exited = Local(member_alive=True, exited="exited with code 1")
    assert isinstance(decide(failed_attempt(1), exited, SETTINGS, NOW), Restart)


def test_with_no_member_to_say_the_end_waits_one_session_timeout() -> None:
    waiting = decide(failed_attempt(1), Local(member_alive=False), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=9)
    assert isinstance(decide(failed_attempt(11), Local(), SETTINGS, NOW), Restart)
    stuck = failed_attempt(61)  # its member is up but never saw it end: a stuck driver
    assert isinstance(decide(stuck, Local(member_alive=True), SETTINGS, NOW), Restart)


def test_a_cleanup_waits_for_a_driver_that_ended_after_the_result() -> None:
    """A quarantined job cancelled while its driver ran: the result was recorded first."""
    result = JobResult(
        version=0, job_id="j", state=DIRTY, outcome=CANCELLED, attempts=1, finished=ago(5)
    )
    later = failed_attempt(1, result=result)
    waiting = decide(later, Local(member_alive=True), SETTINGS, NOW)
    assert isinstance(waiting, Wait) and waiting.until == NOW + timedelta(seconds=9)
    earlier = failed_attempt(6, result=result)  # ended before the result: gone long since
    assert isinstance(decide(earlier, Local(member_alive=True), SETTINGS, NOW), CleanUp)


# -- a real driver that lingers after its outcome ---------------------------------------------


def mark(out: str, name: str, **data: Any) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}"
    temporary.write_text(json.dumps({"time": time.time(), **data}))
    temporary.replace(Path(out) / name)


def lingering(ctx: Any, out: str, linger: float) -> None:
    """Stages a file in an attempt-scoped artifact; attempt 1 then fails, and its driver stays
    alive ``linger`` seconds after recording that (its session still open), as a driver slow to
    close its session and exit would."""
    uri = ctx.artifacts.register("staging")
    staging = Path(uri.removeprefix("file://"))
    staging.mkdir(parents=True, exist_ok=True)
    (staging / f"by-attempt-{ctx.attempt}").write_text("")
    mark(out, f"staged-{ctx.attempt}", path=str(staging), pid=os.getpid())
    if ctx.attempt > 1:
        return
    from zkstore.cluster import Cluster

    close = Cluster.close

    def slow_close(self: Cluster) -> None:
        mark(out, "lingering", pid=os.getpid())
        time.sleep(linger)
        close(self)

    Cluster.close = slow_close  # type: ignore[method-assign]
    raise RuntimeError("attempt 1 fails on purpose")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_failed_attempts_staging_is_kept_while_its_driver_lingers(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    job_id = client.submit_function(
        lingering, str(out), SESSION_TIMEOUT, job_id="lingers", max_attempts=2
    )
    wait_for((out / "lingering").exists, timeout=90, what="attempt 1 lingering")
    marks = json.loads((out / "staged-1").read_text())
    staging, pid = Path(marks["path"]), int(marks["pid"])
    lingered = json.loads((out / "lingering").read_text())["time"]
    assert (staging / "by-attempt-1").exists(), "released while its driver still ran"
    while alive(pid):
        assert (staging / "by-attempt-1").exists(), "released while its driver still ran"
        time.sleep(0.05)
    assert time.time() - lingered >= SESSION_TIMEOUT, "the driver lived its time out"
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    assert not staging.exists(), "released once its driver was gone"
    assert "stopping it" not in local.daemons["d1"].log(), "nobody killed the lingering driver"
