"""Pools (issue 59), through the installed ``zkstore`` script against real daemons:

- a pool limited to 2 never has 3 of its jobs running at once (counted from the jobs'
  ``running`` nodes, sampled on every change of them, not from timing), and a job waiting on
  its pool says so in ``jobs show``, ``jobs list`` and ``pools list``; the counts are in
  ``/metrics`` and on the status page;
- a job of a higher-priority pool submitted after a backlog starts first, under a leader that
  took over after the pools were set (the pools survive a failover);
- a slot a new leader finds free goes to the highest priority, not to the first job id;
- ``submit --pool`` of a pool that does not exist is refused, changing nothing.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from recovery.dev.localcluster import LocalCluster
from tests.cli import json_of, script, script_json, script_ok, zkstore
from tests.helpers import wait_for
from tests.pool_jobs import JOB
from zkstore.config import StoreConfig
from zkstore.errors import StoreUnavailable
from zkstore.layout import Layout

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

#: how long daemons may take to start, lead and launch on a machine shared by the whole suite
BOUND = 120.0


def submit(config: StoreConfig, laptop: Path, job_id: str, *options: str) -> None:
    log, gate = laptop / "started.log", laptop / "gate"
    script_ok(
        config,
        "submit",
        "job.py:run",
        "--job-id",
        job_id,
        *options,
        "--",
        job_id,
        str(log),
        str(gate),
        cwd=laptop,
    )


def show(config: StoreConfig, job_id: str) -> dict[str, object]:
    """``jobs show JOB --format json`` in this process: what a wait asks again and again."""
    data = json_of(config, "jobs show", job_id)
    assert isinstance(data, dict)
    return data


def metrics(url: str | None) -> dict[tuple[str, str], float]:
    """``zkstore_pool_jobs`` of a daemon's ``/metrics``: (pool, state) -> jobs."""
    assert url is not None
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return {
        (sample.labels["pool"], sample.labels["state"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "zkstore_pool_jobs"
        for sample in family.samples
    }


class RunningCount:
    """The most jobs of ``jobs`` whose ``running`` node existed at once, sampled by a thread
    that reads them all again whenever any of them changes (and at least every 20 ms)."""

    def __init__(self, local: LocalCluster, jobs: list[str]) -> None:
        layout = Layout(local.config.base_path)
        self.paths = [layout.running(job) for job in jobs]
        self.zk = local.zk
        self.most = 0
        self.changed = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        with contextlib.suppress(StoreUnavailable):  # the test ended: its ZooKeeper went
            self._sample_until_done()

    def _sample_until_done(self) -> None:
        while not self.done.is_set():
            self.changed.clear()
            found = [
                self.zk.exists(path, watch=lambda _: self.changed.set()) for path in self.paths
            ]
            self.most = max(self.most, sum(stat is not None for stat in found))
            self.changed.wait(0.02)

    def stop(self) -> int:
        self.done.set()
        self.thread.join(timeout=10)
        return self.most


@pytest.mark.disturbs  # its daemon's --max-drivers
def test_a_pool_limited_to_two_never_runs_three_and_its_waiting_jobs_say_why(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    (laptop / "job.py").write_text(JOB)
    local.http = True
    local.start_daemon("d1", "--max-drivers", "4")
    local.wait_for_leader(timeout=BOUND)
    config = runtime_config
    out = script_ok(config, "pools set", "backfill", "--max-running", "2")
    assert "pool backfill: at most 2 running" in out
    jobs = [f"fill-{n}" for n in range(5)]
    counter = RunningCount(local, jobs)
    for job in jobs:
        submit(config, laptop, job, "--pool", "backfill")
    submit(config, laptop, "other")  # the default pool: not held back by backfill's limit

    layout = Layout(config.base_path)

    def running() -> list[str]:
        return [j for j in [*jobs, "other"] if local.zk.exists(layout.running(j)) is not None]

    wait_for(lambda: len(running()) == 3, timeout=BOUND, what="two of backfill and other")
    assert "other" in running()
    waiting = [j for j in jobs if j not in running()]
    reason = "waiting: pool backfill at 2 of 2"
    wait_for(  # asked in this process
        lambda: all(reason in zkstore(config, "jobs show", j).stdout for j in waiting),
        timeout=BOUND,
        what="the waiting jobs' reason",
    )
    listed = script_ok(config, "jobs list")
    assert reason in listed, listed
    pools = {p["name"]: p for p in script_json(config, "pools list")}
    assert pools["backfill"] == {
        "name": "backfill",
        "max_running": 2,
        "priority": 0,
        "running": 2,
        "waiting": 3,
    }
    assert pools["default"]["running"] == 1
    scraped = metrics(local.daemons["d1"].url)
    assert scraped[("backfill", "running")] == 2.0 and scraped[("backfill", "waiting")] == 3.0
    assert scraped[("default", "running")] == 1.0
    url = local.daemons["d1"].url
    with urllib.request.urlopen(f"{url}/", timeout=30) as answer:
        page = answer.read().decode()
    # the status page's pools: running, waiting, limit, priority
    assert "<tr><td>backfill</td><td>2</td><td>3</td><td>2</td><td>0</td></tr>" in page, page
    assert "<tr><td>default</td><td>1</td><td>0</td><td>none</td><td>0</td></tr>" in page

    (laptop / "gate").write_text("")
    for job in [*jobs, "other"]:
        wait_for(
            lambda job=job: show(config, job).get("state") == "SUCCEEDED",
            timeout=BOUND,
            what=f"{job} succeeded",
        )
    assert counter.stop() == 2  # every backfill job ran, never three at once
    assert len((laptop / "started.log").read_text().split()) == 6


@pytest.mark.disturbs  # daemons with labels, a leader's failover
def test_a_higher_priority_pool_starts_first_after_a_leader_failover(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    (laptop / "job.py").write_text(JOB)
    config = runtime_config
    local.start_daemon("d1", "--max-drivers", "1", "--label", "role=lead")
    assert local.wait_for_leader(timeout=BOUND).daemon_id == "d1"
    local.start_daemon("d2", "--max-drivers", "1", "--label", "role=work")
    script_ok(config, "pools set", "urgent", "--priority", "10")
    script_ok(config, "pools set", "bulk", "--max-running", "5")
    work = ("--require", "role=work")
    submit(config, laptop, "blocker", *work)
    log = laptop / "started.log"
    wait_for(lambda: log.exists() and "blocker" in log.read_text(), timeout=BOUND, what="blocker")
    for n in range(3):
        submit(config, laptop, f"bulk-{n}", *work, "--pool", "bulk")
    submit(config, laptop, "urgent", *work, "--pool", "urgent")
    wait_for(
        lambda: show(config, "urgent").get("state") == "PENDING",
        timeout=BOUND,
        what="urgent waiting",
    )

    local.daemons["d1"].signal(signal.SIGKILL)  # the leader goes; d2 takes over
    wait_for(
        lambda: (info := local.leader()) is not None and info.daemon_id == "d2",
        timeout=BOUND,
        what="d2 leading",
    )
    pools = {p["name"]: p for p in script_json(config, "pools list")}
    assert pools["urgent"]["priority"] == 10 and pools["bulk"]["waiting"] == 3

    (laptop / "gate").write_text("")
    for job in ["blocker", "urgent", "bulk-0", "bulk-1", "bulk-2"]:
        wait_for(
            lambda job=job: show(config, job).get("state") == "SUCCEEDED",
            timeout=BOUND,
            what=f"{job} succeeded",
        )
    started = log.read_text().split()
    assert started[:2] == ["blocker", "urgent"], started


def test_submit_to_a_pool_that_does_not_exist_is_refused(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    (laptop / "job.py").write_text(JOB)
    local.start_daemon("d1")
    local.wait_for_leader(timeout=BOUND)
    ran = script(
        runtime_config, "submit", "job.py:run", "--job-id", "x", "--pool", "nosuch", cwd=laptop
    )
    assert ran.returncode == 4, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    assert "no pool 'nosuch'" in ran.stderr.strip().splitlines()[-1]
    layout = Layout(runtime_config.base_path)
    assert local.zk.exists(f"{layout.current_jobs}/x") is None


def test_pools_set_show_list_and_delete_through_the_command_line(
    local: LocalCluster, runtime_config: StoreConfig
) -> None:
    config = runtime_config
    local.start_daemon("d1")
    local.wait_for_leader(timeout=BOUND)
    made = script_json(config, "pools set", "etl", "--max-running", "3")
    assert (made["max_running"], made["priority"], made["version"]) == (3, 0, 0)
    changed = script_json(config, "pools set", "etl", "--priority", "7")
    assert (changed["max_running"], changed["priority"], changed["version"]) == (3, 7, 1)
    shown = script_json(config, "pools show", "etl")
    assert shown == {"name": "etl", "max_running": 3, "priority": 7, "running": 0, "waiting": 0}
    listed = script_ok(config, "pools list")
    assert "etl" in listed and "default" in listed

    bad = script(config, "pools set", "Bad/Name", "--max-running", "1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "invalid pool name" in bad.stderr.strip().splitlines()[-1]

    assert "would delete pool etl" in script_ok(config, "pools delete", "etl", "--dry-run")
    assert "etl" in script_ok(config, "pools list")
    script_ok(config, "pools delete", "etl", "--yes")
    gone = script(config, "pools show", "etl")
    assert gone.returncode == 4 and "no pool 'etl'" in gone.stderr, gone.stderr


def test_a_schedules_runs_inherit_its_pool(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """``schedules create --pool``: each run waits in the pool (here one that runs nothing
    until its limit is raised), and starts once the pool lets it."""
    config = runtime_config
    (laptop / "job.py").write_text(JOB)
    (laptop / "gate").write_text("")
    local.start_daemon("d1")
    local.wait_for_leader(timeout=BOUND)
    script_ok(config, "pools set", "etl", "--max-running", "0")
    log = laptop / "started.log"
    script_ok(
        config,
        "schedules create",
        "nightly",
        "job.py:run",
        "--every",
        "1h",
        "--start-at",
        "2020-01-01T00:00:00Z",
        "--pool",
        "etl",
        "--",
        "run",
        str(log),
        str(laptop / "gate"),
        cwd=laptop,
    )
    reason = "waiting: pool etl at 0 of 0"

    def waiting_run() -> str | None:
        rows = script_json(config, "jobs list")
        for row in rows:
            if reason in json.dumps(row):
                return str(row["job_id"])
        return None

    run = wait_for(waiting_run, timeout=BOUND, what="the schedule's run waiting on its pool")
    assert not log.exists()
    script_ok(config, "pools set", "etl", "--max-running", "1")
    wait_for(lambda: show(config, run).get("state") == "SUCCEEDED", timeout=BOUND, what="run ended")
    assert log.read_text().split() == ["run"]
    script_ok(config, "schedules delete", "nightly", "--yes")
    script_ok(config, "pools delete", "etl", "--yes")


@pytest.mark.disturbs  # daemons with labels, a leader killed
def test_a_leader_that_takes_over_gives_a_free_slot_by_priority_not_by_job_id(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """Two jobs wait for a daemon that can run them; the leader is killed and such a daemon
    starts, to lead: the new leader, which knows nobody waiting yet, gives its one slot to the
    urgent job, whose id sorts last, not to the bulk job whose id sorts first."""
    (laptop / "job.py").write_text(JOB)
    (laptop / "gate").write_text("")
    config = runtime_config
    local.start_daemon("d1", "--max-drivers", "1", "--label", "role=lead")
    assert local.wait_for_leader(timeout=BOUND).daemon_id == "d1"
    script_ok(config, "pools set", "urgent", "--priority", "10")
    script_ok(config, "pools set", "bulk", "--priority", "0")
    work = ("--require", "role=work")
    submit(config, laptop, "a-bulk", *work, "--pool", "bulk")
    submit(config, laptop, "z-urgent", *work, "--pool", "urgent")
    for job in ("a-bulk", "z-urgent"):
        wait_for(
            lambda job=job: show(config, job).get("state") == "PENDING",
            timeout=BOUND,
            what=f"{job} waiting",
        )

    local.daemons["d1"].signal(signal.SIGKILL)
    local.start_daemon("d2", "--max-drivers", "1", "--label", "role=work")
    wait_for(
        lambda: (info := local.leader()) is not None and info.daemon_id == "d2",
        timeout=BOUND,
        what="d2 leading",
    )
    for job in ("z-urgent", "a-bulk"):
        wait_for(
            lambda job=job: show(config, job).get("state") == "SUCCEEDED",
            timeout=BOUND,
            what=f"{job} succeeded",
        )
    log = laptop / "started.log"
    assert log.read_text().split() == ["z-urgent", "a-bulk"]
