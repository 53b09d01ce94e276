"""Schedules as a user meets them: the installed ``zkstore`` script creates, lists, shows,
pauses, resumes and deletes a schedule; real daemons fire its windows; every run writes a marker
(``zkstore_dev.chaos.schedule_checker.scheduled_run``), so the tests count what really ran, per
window.

One cluster of two daemons per test: the leader is SIGKILLed between windows, and the checker of
the chaos harness (``zkstore_dev.chaos.schedule_checker.check``) says that every window in the span
has exactly one run or a recorded decision, that none ran twice and none before its time.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests.cli import script, show_schedule
from tests.helpers import SESSION_TIMEOUT, plant, wait_for
from tests.schedule_jobs import job_file
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.records.strict import parse_time
from zkstore.schedules.schedule_store import Schedule, ScheduleStore
from zkstore_dev.chaos.schedule_checker import check, expected_windows, read_runs, recorded

pytestmark = pytest.mark.e2e

EVERY = 3  # seconds between windows: a driver starts well within one on a loaded machine
TOKEN = "t0ken-for-the-schedule-tests-" + "x" * 12


def schedule_of(config: StoreConfig, name: str) -> Schedule:
    with Cluster.open(config) as cluster:
        return ScheduleStore.for_config(config, cluster.zk).get(name)


@pytest.fixture
def web_env() -> dict[str, str]:
    """The change token of the ``web`` fixture's daemons."""
    return {"ZKSTORE_API_TOKEN": TOKEN}


def request(
    daemon: DaemonProcess, path: str, method: str = "GET", token: str | None = None
) -> tuple[int, bytes]:
    assert daemon.url is not None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(daemon.url + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_schedule_fires_each_window_once_across_a_leader_kill(
    web: LocalCluster, runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    """create -> two windows fire -> SIGKILL the leader -> two more windows fire on the new
    leader; no window ran twice, none was lost, none ran before its time; a garbage schedule
    beside it changes none of that; list/show/pause/resume/delete answer as documented, on the
    command line, over HTTP and on the page."""
    config, out, local = runtime_config, tmp_path / "runs", web
    local.start_daemon("d1")
    local.wait_for_leader()
    local.start_daemon("d2")
    with Cluster.open(config) as cluster:  # garbage beside it: that schedule's problem only
        plant(cluster.zk, f"{cluster.layout.schedules}/broken", b'{"name": "broken", "cron": 7')
    job = job_file(laptop)
    created = script(
        config,
        "schedules create",
        "tick",
        f"{job}:run",
        str(out),
        "--every",
        f"{EVERY}s",
        "--catchup",
        "all",
        cwd=laptop,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "tick"
    assert "next window:" in created.stderr
    began = parse_time(show_schedule(config, "tick")["created"])

    def runs() -> int:
        return len(read_runs(out, "tick"))

    wait_for(lambda: runs() >= 2, timeout=4 * EVERY + 30, what="two runs")
    leader = local.wait_for_leader()
    local.kill_host(leader.daemon_id)
    local.wait_for_leader(exclude=leader.daemon_id, timeout=SESSION_TIMEOUT * 4 + 30)
    wait_for(lambda: runs() >= 4, timeout=4 * EVERY + 30, what="two more runs after the kill")

    listed = script(config, "schedules list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    broken, row = json.loads(listed.stdout)
    assert broken["name"] == "broken" and "CorruptRecord" in broken["error"]
    assert row["name"] == "tick" and row["every"] == EVERY and row["paused"] is False
    assert row["next"] is not None and row["fired"] >= 4

    survivor = local.wait_for_leader()
    code, body = request(survivor, "/api/v1/schedules")
    assert code == 200 and [r["name"] for r in json.loads(body)] == ["broken", "tick"]
    code, body = request(survivor, "/api/v1/schedules/tick")
    assert code == 200 and json.loads(body)["history"][0]["outcome"] == "fired"
    assert json.loads(body)["behind"] in (0, 1)  # a leader keeps up (a window may just be due)
    code, page = request(survivor, "/")
    assert code == 200 and b"Schedules" in page and b"tick-2" in page  # its last run
    assert b"<th>Behind</th>" in page
    assert request(survivor, "/api/v1/schedules/nope")[0] == 404
    assert request(survivor, "/api/v1/schedules/tick/pause", "POST")[0] == 401, "no token"

    code, body = request(survivor, "/api/v1/schedules/tick/pause", "POST", TOKEN)
    assert code == 200 and json.loads(body)["paused"] is True
    assert show_schedule(config, "tick")["next"] is None  # a paused schedule has no next fire
    paused = script(config, "schedules pause", "tick")  # pausing a paused one: no change
    assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr

    # Every window up to the pause has exactly one run or a recorded decision.
    spec, state = schedule_of(config, "tick").spec, schedule_of(config, "tick").state
    assert state.last is not None
    end = state.last
    windows = expected_windows(spec.timing(), began, end)
    verdict = check(windows, read_runs(out, "tick"), recorded(state.history, windows))
    assert verdict.violations == [], verdict.violations
    assert verdict.ran >= 4 and len(windows) >= 4

    table = script(config, "schedules show", "tick")
    assert table.returncode == 0 and "WINDOW" in table.stdout and "fired" in table.stdout

    resumed = script(config, "schedules resume", "tick")
    assert resumed.returncode == 0 and "resumed" in resumed.stdout, resumed.stderr
    assert show_schedule(config, "tick")["next"] is not None

    refused = script(config, "schedules delete", "tick")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    deleted = script(config, "schedules delete", "tick", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    gone = script(config, "schedules show", "tick")
    assert gone.returncode == 4, (gone.returncode, gone.stderr)
    assert request(survivor, "/api/v1/schedules/tick", "DELETE", TOKEN)[0] == 404
    assert all(delay > -0.5 for delay in verdict.delays)  # none before its window
