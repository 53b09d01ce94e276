"""Issue 49 through the installed ``zkstore`` script: one meaning per flag name (``--timeout`` is
a run's time limit everywhere, the deadline of a call is ``--store-timeout``), ``schedules
create`` with the run options of ``submit`` carried by every run, ``--every`` windows aligned
to the interval, ``schedules update`` recorded in the schedule, and a daemon that leaves
nothing in /tmp after a clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import connection, json_of, script, show, show_schedule
from tests.helpers import BIN, wait_for
from tests.servers import NotificationReceiver
from zkstore.config import StoreConfig
from zkstore.records.strict import parse_time

pytestmark = [pytest.mark.e2e, pytest.mark.shared_fleet]

JOBS = """
import os
import time


def slow(ctx, out):
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, f"{ctx.job_id}-{ctx.attempt}"), "w").close()
    time.sleep(120)


def mark(ctx, out):
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, ctx.job_id), "w").close()
"""


shown = show_schedule


def polled(config: StoreConfig, name: str) -> dict[str, Any]:
    """``schedules show NAME`` in this process: what a wait asks again and again."""
    found: dict[str, Any] = json_of(config, "schedules show", name)
    return found


def test_the_call_deadline_is_store_timeout_and_the_old_spelling_warns(tmp_path: Path) -> None:
    """``--store-timeout`` takes a duration on every command; ``--timeout`` where it meant the
    deadline still works, saying it is deprecated."""
    storage = ["--zk", "127.0.0.1:9", "--storage", f"file://{tmp_path}"]
    for flag, value in (("--store-timeout", "1s"), ("--timeout", "1")):
        start = time.monotonic()
        done = subprocess.run(
            [str(BIN / "zkstore"), "handles", "list", *storage, flag, value],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 6, done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines[-1] == ("zkstore: error: cannot reach ZooKeeper at 127.0.0.1:9 within 1 s")
        warned = [line for line in lines if "deprecated" in line]
        assert bool(warned) == (flag == "--timeout"), lines
        assert time.monotonic() - start < 30
    if warned:
        assert "use --store-timeout" in warned[0]


def test_schedules_create_takes_submits_run_options_and_checks_notify(
    config: StoreConfig, laptop: Path
) -> None:
    """``schedules create --timeout 10m`` is the runs' time limit (it was the call deadline,
    and refused ``10m``); the retry options and ``--notify`` are stored with the schedule; a
    notification URL goes through submit's destination checks; ``--every 5`` says that a
    plain number is seconds, and its windows fall at multiples of the interval."""
    (laptop / "jobs.py").write_text(JOBS)
    made = script(
        config,
        "schedules create",
        "nightly",
        "jobs.py:mark",
        "--every",
        "5",
        "--timeout",
        "10m",
        "--retry-delay",
        "30s",
        "--max-attempts",
        "4",
        "--notify",
        "http://127.0.0.1:9/hooks/SECRET",
        "--",
        "/tmp/out",
        cwd=laptop,
    )
    assert made.returncode == 0, made.stderr
    assert "windows every 5 s (a plain number is seconds), at multiples of 5 s" in made.stderr
    found = shown(config, "nightly")
    assert found["lifecycle"] == {
        "timeout": 600.0,
        "retry_delay": 30.0,
        "notify": "http://127.0.0.1:9/...",
    }
    assert found["job"]["max_attempts"] == 4
    assert int(parse_time(found["start_at"]).timestamp()) % 5 == 0, found["start_at"]
    table = script(config, "schedules show", "nightly")
    assert "limits: --timeout 600s" in table.stdout and "SECRET" not in table.stdout
    refused = script(
        config,
        "schedules create",
        "metadata",
        "jobs.py:mark",
        "--every",
        "10s",
        "--notify",
        "http://169.254.169.254/latest/meta-data/",
        cwd=laptop,
    )
    assert refused.returncode == 2, refused.stderr
    assert "169.254.169.254 is a link-local address" in refused.stderr


@pytest.mark.disturbs  # its daemon's --end-grace
def test_a_scheduled_run_times_out_retries_and_notifies_as_configured(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """Every run carries the schedule's run options, and the leader applies them: a run over
    its ``--timeout`` is ended, retried after ``--retry-delay`` up to ``--max-attempts``, and
    each event goes to the schedule's ``--notify``."""
    config, out = runtime_config, laptop / "out"
    (laptop / "jobs.py").write_text(JOBS)
    receiver = NotificationReceiver().start()
    try:
        local.start_daemon("d1", "--end-grace", "2s")
        local.wait_for_leader()
        made = script(
            config,
            "schedules create",
            "slow",
            "jobs.py:slow",
            "--every",
            "1h",
            "--start-at",
            "2020-01-01T00:00:00Z",
            "--timeout",
            "3s",
            "--max-attempts",
            "2",
            "--retry-delay",
            "1s",
            "--notify",
            receiver.url("/hook"),
            "--",
            str(out),
            cwd=laptop,
        )
        assert made.returncode == 0, made.stderr
        # --catchup latest fires the newest window at once: one run
        run = wait_for(lambda: polled(config, "slow")["last_run"], timeout=60, what="a run")
        assert show(config, run)["lifecycle"]["timeout"] == 3.0
        # two attempts of 3 s each, ended after --end-grace at most, a second between them
        result = wait_for(lambda: show(config, run)["result"], timeout=90, what="its end")
        assert result["outcome"] == "FAILED", result
        assert result["attempts"] == 2 and "--timeout of 3s" in result["error"], result
        assert sorted(p.name for p in out.iterdir()) == [f"{run}-1", f"{run}-2"]
        expected = {f"{run}:2:TIMED_OUT", f"{run}:2:FAILED"}
        events = wait_for(
            lambda: expected <= (keys := set(receiver.snapshot()[1])) and keys,
            timeout=60,
            what="the events",
        )
        assert any(key.startswith(f"{run}:1:") for key in events), events
    finally:
        receiver.stop()


def test_every_windows_are_aligned_so_two_schedules_a_second_apart_chain(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """Issue 49: two ``--every`` schedules created a second apart had windows a second apart,
    and every run of the one chained ``--after-schedule`` the other failed. Windows now fall at
    multiples of the interval: both schedules share them, and the chained run succeeds. A pair
    whose windows cannot meet is refused at create, naming the fix."""
    config, out = runtime_config, laptop / "out"
    (laptop / "jobs.py").write_text(JOBS)
    local.start_daemon("d1")
    local.wait_for_leader()
    first = ("jobs.py:mark", "--every", "4s", "--", str(out))
    assert script(config, "schedules create", "extract", *first, cwd=laptop).returncode == 0
    created = time.time()
    wait_for(lambda: time.time() >= int(created) + 1, timeout=3, what="the next second")
    chained = script(
        config,
        "schedules create",
        "load",
        *first[:3],
        "--after-schedule",
        "extract",
        "--",
        str(out),
        cwd=laptop,
    )
    assert chained.returncode == 0, chained.stderr
    for name in ("extract", "load"):  # on the same grid, though made a second apart
        assert int(parse_time(shown(config, name)["start_at"]).timestamp()) % 4 == 0
    run = wait_for(lambda: polled(config, "load")["last_run"], timeout=60, what="a load run")
    result = wait_for(lambda: show(config, run)["result"], timeout=90, what="its end")
    assert result["outcome"] == "SUCCEEDED", result
    window = run.removeprefix("load-")
    assert (out / f"extract-{window}").exists() and (out / run).exists()
    mismatched = script(
        config,
        "schedules create",
        "report",
        "jobs.py:mark",
        "--every",
        "6s",
        "--after-schedule",
        "extract",
        cwd=laptop,
    )
    assert mismatched.returncode == 2, mismatched.stderr
    assert "give --every a multiple of 4s" in mismatched.stderr
    for name in ("load", "extract"):
        assert script(config, "schedules delete", name, "--yes").returncode == 0


def test_schedules_update_is_recorded_seen_by_the_leader_and_carried_by_the_runs(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path
) -> None:
    """``schedules update`` changes when a schedule fires and how its runs run, in one
    version-checked write that records what changed. The leader sees the change at once (its
    timer was set for the hourly window), and the runs after it carry the new options."""
    config, out = runtime_config, laptop / "out"
    (laptop / "jobs.py").write_text(JOBS)
    local.start_daemon("d1")
    local.wait_for_leader()
    hourly = ("jobs.py:mark", "--every", "1h", "--timeout", "1m", "--", str(out))
    made = script(config, "schedules create", "tick", *hourly, cwd=laptop)
    assert made.returncode == 0, made.stderr
    changed = script(
        config,
        "schedules update",
        "tick",
        "--every",
        "2s",
        "--timeout",
        "5m",
        "--max-attempts",
        "2",
        "--notify",
        "off",
    )
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.startswith("schedule tick updated: every: 3600s -> 2s; start_at: ")
    assert "max_attempts: 3 -> 2; timeout: 60s -> 300s\n" in changed.stdout
    found = shown(config, "tick")
    assert found["every"] == 2 and found["lifecycle"] == {"timeout": 300.0}
    [change] = found["changes"]
    assert change["what"] == changed.stdout.removeprefix("schedule tick updated: ").strip()
    assert "@" in change["by"]
    run = wait_for(lambda: polled(config, "tick")["last_run"], timeout=30, what="a 2s run")
    assert show(config, run)["lifecycle"]["timeout"] == 300.0
    assert show(config, run)["max_attempts"] == 2
    same = script(
        config, "schedules update", "tick", "--every", "2s", "--start-at", found["start_at"]
    )
    assert (same.returncode, same.stdout) == (0, "schedule tick: nothing changed\n"), same.stderr
    missing = script(config, "schedules update", "nothing", "--timeout", "1m")
    assert missing.returncode == 4, missing.stderr
    assert script(config, "schedules delete", "tick", "--yes").returncode == 0


def test_a_daemon_stopped_cleanly_leaves_nothing_in_tmp(
    runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    """Issue 49: each daemon start left a directory of driver logs (``zkstore-drivers-*``) in
    /tmp after a clean stop. A daemon of the default directories that ran a job and was
    stopped (SIGTERM) with no driver left leaves nothing there but its user's class-data cache
    (``zkstore-<uid>/class-data``: kept for the next start, issue 56.3)."""
    config = runtime_config
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (laptop / "jobs.py").write_text(JOBS)
    env = {**os.environ, "TMPDIR": str(tmp)}
    daemon = subprocess.Popen(
        [str(BIN / "zkstore"), "daemon", *connection(config), "--id", "clean", "--http", "off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        done = script(
            config,
            "submit",
            "jobs.py:mark",
            "--job-id",
            "one",
            "--wait",
            "--wait-timeout",
            "2m",
            "--",
            str(laptop / "out"),
            cwd=laptop,
        )
        assert done.returncode == 0, done.stderr
        assert list(tmp.iterdir()), "the daemon works under TMPDIR"
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0, err
    cache = Path(f"zkstore-{os.getuid()}") / "class-data"
    left = sorted(p.relative_to(tmp) for p in tmp.rglob("*"))
    assert [p for p in left if p != cache.parent and not p.is_relative_to(cache)] == [], left
