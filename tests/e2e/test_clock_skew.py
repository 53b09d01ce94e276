"""A leader whose host clock is an hour off fires a schedule's windows on time (issue 50.5).

Windows are instants: a leader deciding them by its own clock fired them an hour late (clock
behind) or an hour of them at once, early (clock ahead). The daemon here runs with its clock
moved by an hour (``tests/skewed_clock``: ``time.time`` and ``datetime.now`` of the daemon and
everything it starts); the schedule is created by the installed ``zkstore`` script on the true
clock. ZooKeeper's own stamps are the witness: each run's job is created (its ``currentJobs``
node's ``ctime``, ZooKeeper's clock) not before its window, and within the schedule's interval
and the leader's pass of it; the daemon says its clock is off.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import script
from tests.e2e.test_schedules_e2e import job_file, shown
from tests.helpers import SESSION_TIMEOUT, wait_for
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.schedules.runs import window_of
from zkstore.strict import parse_time

SHIM = Path(__file__).resolve().parent.parent / "skewed_clock"
EVERY = 2
HOUR = 3600.0


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
        created = parse_time(shown(config, "tick")["created"])
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
