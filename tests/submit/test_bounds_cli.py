"""What a submitter may ask for, refused where it is asked (invariant 15), in this process:
schedules under the cluster's minimum interval or with a --catchup all further back than
--catchup-max, and notification URLs whose destination is not allowed. Each is one line on
stderr, exit 2, and nothing stored. With the production defaults (the suite lowers them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli import zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.lifecycle.destinations import ALLOWED_ENV
from zkstore.schedules.schedule_limits import MIN_INTERVAL_ENV

pytestmark = pytest.mark.integration

#: the production defaults: a 10 s minimum, global destinations only
DEFAULTS = {MIN_INTERVAL_ENV: "", ALLOWED_ENV: ""}


@pytest.fixture
def job(laptop: Path) -> str:
    (laptop / "job.py").write_text("def run(ctx):\n    pass\n")
    return str(laptop / "job.py:run")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            ("--every", "1s"),
            "--every: its windows are 1 s apart, under the cluster's minimum of 10 s: the "
            f"leader would fire none of its windows ({MIN_INTERVAL_ENV}, the daemons' "
            "--schedule-min-interval)",
        ),
        (("--cron", "*/5 * * * * *"), "--cron: its windows are 5 s apart"),
        (
            ("--every", "10s", "--start-at", "2020-01-01T00:00:00Z", "--catchup", "all"),
            "--start-at 2020-01-01T00:00:00Z lies ",
        ),
        (("--every", "1h", "--catchup-max", "0"), "--catchup-max"),
        (("--every", "1h", "--catchup-max", "10001"), "--catchup-max"),
    ],
)
def test_a_schedule_past_the_bounds_exits_2_in_one_line(
    config: StoreConfig, cluster: Cluster, job: str, words: tuple[str, ...], message: str
) -> None:
    done = zkstore(config, "schedules create", "flood", job, *words, env=DEFAULTS)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    if "lies" in message:  # the numbers are named: how far back, the bound, where to start
        assert len(done.stderr.strip().splitlines()) == 1
        assert "windows back, over --catchup-max 1,000 of --catchup all" in done.stderr
        assert "start at " in done.stderr and "or later" in done.stderr
    assert cluster.zk.children(cluster.layout.schedules) == []


def test_a_catchup_within_its_bound_and_a_scan_from_1970_are_made(
    config: StoreConfig, cluster: Cluster, job: str
) -> None:
    """A start 50 windows back with --catchup-max 50; a per-second cron from 1970 with
    --catchup none (its past is missed, counted), where the minimum allows it."""
    start = (datetime.now(UTC) - timedelta(hours=49)).strftime("%Y-%m-%dT%H:%M:%SZ")
    words = ("--every", "1h", "--start-at", start, "--catchup", "all")
    refused = zkstore(config, "schedules create", "bounded", job, *words, "--catchup-max", "40")
    assert refused.returncode == 2 and "lies 50 windows back, over --catchup-max 40" in (
        refused.stderr
    )
    made = zkstore(config, "schedules create", "bounded", job, *words, "--catchup-max", "50")
    assert made.returncode == 0, made.stderr
    scan = zkstore(
        config,
        "schedules create",
        "scan",
        job,
        "--cron",
        "* * * * * *",
        "--start-at",
        "1970-01-01",
        "--catchup",
        "none",
        env={MIN_INTERVAL_ENV: "1s"},
    )
    assert scan.returncode == 0, scan.stderr
    bounded_row, row = json.loads(zkstore(config, "schedules list", "--format", "json").stdout)
    assert (bounded_row["catchup_max"], bounded_row["behind"]) == (50, 50)
    assert row["behind"] > 56 * 365 * 86400  # counted at once, nothing stepped through
    assert row["catchup_max"] == 1000


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://127.0.0.1:8080/admin", "127.0.0.1 is a loopback address"),
        ("http://[::1]:8080/admin", "::1 is a loopback address"),
        ("http://10.0.0.7/hook", "10.0.0.7 is a private address"),
        ("http://localhost:9/hook", "localhost (127.0.0.1) is a loopback address"),
    ],
)
def test_a_notify_url_to_a_forbidden_address_exits_2_in_one_line(
    config: StoreConfig, cluster: Cluster, job: str, url: str, message: str
) -> None:
    done = zkstore(config, "submit", job, "--job-id", "hooked", "--notify", url, env=DEFAULTS)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and ALLOWED_ENV in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert cluster.zk.exists(cluster.layout.job_handle("hooked")) is None


def test_an_allowed_destination_is_taken(config: StoreConfig, cluster: Cluster, job: str) -> None:
    done = zkstore(
        config,
        "submit",
        job,
        "--job-id",
        "hooked",
        "--notify",
        "http://127.0.0.1:8080/hook",
        env={ALLOWED_ENV: "127.0.0.0/8"},
    )
    assert done.returncode == 0, done.stderr


def test_a_daemon_refuses_its_own_notify_url_unless_allowed(config: StoreConfig) -> None:
    done = zkstore(config, "daemon", "--notify", "http://127.0.0.1:1/hook", env=DEFAULTS)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "127.0.0.1 is a loopback address" in done.stderr
    bad = zkstore(config, "daemon", "--notify-allowed-hosts", "http://x/", env=DEFAULTS)
    assert bad.returncode == 2 and "not a host name, an address or a CIDR block" in bad.stderr


def test_a_schedule_name_has_one_limit_and_says_it(
    config: StoreConfig, cluster: Cluster, job: str
) -> None:
    """Issue 49.8: the name limit was stated as 128 and as 100 characters (the installed
    script): 100 is the one that counts, since a run's job id adds the window's time."""
    from tests.cli import script

    too_long = script(config, "schedules create", "n" * 101, job, "--every", "1h")
    assert too_long.returncode == 2, too_long.stderr
    assert too_long.stderr == (
        "zkstore: usage error: a schedule name is at most 100 characters (its runs' job ids "
        "add the window's time)\n"
    )
    longest = script(config, "schedules create", "n" * 100, job, "--every", "1h")
    assert longest.returncode == 0, longest.stderr
    assert cluster.zk.children(cluster.layout.schedules) == ["n" * 100]
