"""A leader whose host clock is an hour off fires a schedule's windows on time (issue 50.5),
stamps its records and keeps its results by ZooKeeper's time (issue 60.1).

Windows are instants: a leader deciding them by its own clock fired them an hour late (clock
behind) or an hour of them at once, early (clock ahead). The daemon here runs with its clock
moved by an hour (``tests/skewed_clock``: ``time.time`` and ``datetime.now`` of the daemon and
everything it starts); the schedule is created by the installed ``zkstore`` script on the true
clock. ZooKeeper's own stamps are the witness: each run's job is created (its ``currentJobs``
node's ``ctime``, ZooKeeper's clock) not before its window, and within the schedule's interval
and the leader's pass of it; the daemon says its clock is off.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show_schedule
from tests.helpers import SESSION_TIMEOUT, wait_for
from tests.schedule_jobs import job_file
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.strict import parse_time
from zkstore.schedules.runs import window_of

pytestmark = pytest.mark.e2e

SHIM = Path(__file__).resolve().parent.parent / "skewed_clock"
EVERY = 2
HOUR = 3600.0
#: --keep-results of the retention test: long enough to see a result kept (a leader an hour
#: ahead deleted it at once), short for a test (one an hour behind kept it an hour)
KEEP = 10.0
#: --keep-logs of the retention test: a finished job's logs are kept this long from its end
KEEP_LOGS = 7200.0


def created_runs(config: StoreConfig, name: str) -> dict[datetime, float]:
    """The schedule's runs found in currentJobs or results: window -> the ZooKeeper time
    (seconds) its job was created at."""
    found: dict[datetime, float] = {}
    with Cluster.open(config) as cluster:
        zk, layout = cluster.zk, cluster.layout
        for parent in (layout.current_jobs, layout.results):
            for job in zk.children(parent):
                window = window_of(name, job)
                if window is None:
                    continue
                item = zk.get_if_exists(f"{parent}/{job}")
                if item is not None:
                    stamp = item[1].ctime / 1000.0
                    found[window] = min(found.get(window, stamp), stamp)
    return found


@pytest.mark.parametrize("skew", [-HOUR, HOUR], ids=["behind", "ahead"])
def test_windows_follow_zookeeper_time_not_the_leaders_clock(
    runtime_config: StoreConfig, tmp_path: Path, laptop: Path, skew: float
) -> None:
    config, out = runtime_config, tmp_path / "runs"
    pythonpath = os.pathsep.join(p for p in (str(SHIM), os.environ.get("PYTHONPATH", "")) if p)
    local = LocalCluster(
        config,
        tmp_path / "rt",
        extra_env={"PYTHONPATH": pythonpath, "SKEWED_CLOCK_SECONDS": str(skew)},
    )
    try:
        daemon = local.start_daemon("skewed")
        local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
        job = job_file(laptop)
        made = script(
            config, "schedules create", "tick", f"{job}:run", str(out), "--every", f"{EVERY}s"
        )
        assert made.returncode == 0, made.stderr
        created = parse_time(show_schedule(config, "tick")["created"])
        # Three windows on the true clock: the third's run exists within its interval and a
        # pass, or the leader fired by its own clock (an hour late: none would exist).
        runs = wait_for(
            lambda: (found := created_runs(config, "tick")) and len(found) >= 3 and found,
            timeout=3 * EVERY + SESSION_TIMEOUT * 4 + 30,
            what="three runs of the schedule",
        )
        now = datetime.now(UTC).timestamp()
        for window, at in sorted(runs.items()):
            assert window >= created
            # not early (ZooKeeper stamps whole milliseconds), and none in the future: a clock
            # an hour ahead fired an hour of windows at once
            assert at >= window.timestamp() - 0.001, (window, at)
            assert window.timestamp() <= now, (window, now)
        said = "behind" if skew < 0 else "ahead of"
        assert re.search(rf"this host's clock is 3600\.\d s {said} ZooKeeper's", daemon.log())
    finally:
        local.stop()


def first_result(config: StoreConfig, name: str) -> tuple[str, datetime, float] | None:
    """A run of the schedule with a result: its job, the result's ``finished`` and the
    ZooKeeper time (seconds) the result was created at."""
    with Cluster.open(config) as cluster:
        zk, layout = cluster.zk, cluster.layout
        for job in sorted(zk.children(layout.results)):
            if window_of(name, job) is None:
                continue
            item = zk.get_if_exists(layout.result(job))
            if item is not None:
                finished = parse_time(json.loads(item[0])["finished"])
                return job, finished, item[1].ctime / 1000.0
    return None


def logs_until(config: StoreConfig, job_id: str) -> datetime | None:
    """The ``logs_until`` of the job's result (None: not cleaned up yet)."""
    with Cluster.open(config) as cluster:
        result = cluster.results.get(job_id)
    return result.logs_until if result is not None else None


@pytest.mark.parametrize("skew", [-HOUR, HOUR], ids=["behind", "ahead"])
def test_results_are_stamped_and_kept_by_zookeeper_time(
    runtime_config: StoreConfig, tmp_path: Path, laptop: Path, skew: float
) -> None:
    """A leader an hour ahead stamped a result an hour in the future and, for a result stamped
    by another leader, expired it an hour early (one behind: an hour late). The result's
    ``finished`` is ZooKeeper's time (its node's own stamp is the witness), and it is deleted
    no sooner than ``--keep-results`` after it, on ZooKeeper's clock (this host's is true)."""
    config, out = runtime_config, tmp_path / "runs"
    pythonpath = os.pathsep.join(p for p in (str(SHIM), os.environ.get("PYTHONPATH", "")) if p)
    local = LocalCluster(
        config,
        tmp_path / "rt",
        extra_env={"PYTHONPATH": pythonpath, "SKEWED_CLOCK_SECONDS": str(skew)},
        extra_args=("--keep-results", str(KEEP), "--keep-logs", f"{KEEP_LOGS:g}s"),
    )
    try:
        local.start_daemon("skewed")
        local.wait_for_leader(timeout=SESSION_TIMEOUT * 4 + 30)
        job = job_file(laptop)
        made = script(config, "schedules create", "tick", f"{job}:run", str(out), "--every", "5s")
        assert made.returncode == 0, made.stderr
        job_id, finished, created = wait_for(
            lambda: first_result(config, "tick"),
            timeout=5 + SESSION_TIMEOUT * 4 + 60,
            what="a result of the schedule's first run",
        )
        # stamped just before its write committed, by ZooKeeper's clock (not an hour off)
        assert created - 10.0 <= finished.timestamp() <= created + 0.5, (finished, created)
        # its logs are kept --keep-logs from its cleanup by ZooKeeper's time too: stamped by the
        # leader's clock, they were removed an hour early (clock behind) or kept an hour late
        until = wait_for(
            lambda: logs_until(config, job_id),
            timeout=SESSION_TIMEOUT * 4 + 30,  # the cleanup after the job's end
            what="the result's logs_until",
        )
        kept = (until - finished).total_seconds()
        assert KEEP_LOGS <= kept <= KEEP_LOGS + 10.0, (until, finished)
        seen = [time.time()]
        with Cluster.open(config) as cluster:
            path = cluster.layout.result(job_id)

            def gone() -> bool:
                there = cluster.zk.exists(path) is not None
                if there:
                    seen.append(time.time())
                return not there

            wait_for(gone, timeout=KEEP + SESSION_TIMEOUT * 4 + 60, interval=0.2, what="retention")
        # kept until its retention passed (seen within a poll or two of it), then deleted
        assert seen[-1] >= finished.timestamp() + KEEP - 3.0, (seen[-1], finished)
    finally:
        local.stop()
