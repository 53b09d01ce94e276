"""``zkstore schedules`` refusing what it should, in this process: bad timing and policies exit 2
and store nothing, a second create of a name exits 5, a missing schedule exits 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ((), "give one of --cron EXPR and --every DURATION"),
        (("--cron", "0 2 * * *", "--every", "1h"), "give one of --cron"),
        (("--cron", "61 2 * * *"), "cron"),
        (("--cron", "0 2 * * *", "--timezone", "../../etc/passwd"), "time zone"),
        (("--every", "0s"), ""),
        (("--every", "1h", "--catchup", "often"), "--catchup"),
        (("--every", "1h", "--concurrency", "sometimes"), "sometimes"),
        (("--every", "1h", "--after-schedule", "nightly"), "names the schedule itself"),
        (("--every", "1h", "--start-at", "2026-11-25T00:00:00Z", "--end-at", "2026-11-24"), ""),
    ],
)
def test_bad_schedules_exit_2_and_store_nothing(
    config: StoreConfig, cluster: Cluster, laptop: Path, words: tuple[str, ...], message: str
) -> None:
    (laptop / "job.py").write_text("def run(ctx):\n    pass\n")
    done = zkstore(config, "schedules create", "nightly", str(laptop / "job.py:run"), *words)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert cluster.zk.children(cluster.layout.schedules) == []
    assert not cluster.storage.list(cluster.storage_layout.schedules), "no payload left"


def test_create_twice_exits_5_and_a_missing_schedule_exits_4(
    config: StoreConfig, cluster: Cluster, laptop: Path
) -> None:
    (laptop / "job.py").write_text("def run(ctx):\n    pass\n")
    target = str(laptop / "job.py:run")
    assert zkstore(config, "schedules list").stdout.strip() == "no schedules"
    first = zkstore(config, "schedules create", "nightly", target, "--cron", "@daily")
    assert first.returncode == 0, first.stderr
    again = zkstore(config, "schedules create", "nightly", target, "--every", "1h")
    assert again.returncode == 5 and "exists already" in again.stderr
    assert len(cluster.storage.list(cluster.storage_layout.schedules)) == 1
    shown = json.loads(zkstore(config, "schedules show", "nightly", "--format", "json").stdout)
    assert shown["cron"] == "0 0 * * *" and shown["history"] == [] and shown["next"]
    for command in ("show", "pause", "resume"):
        assert zkstore(config, f"schedules {command}", "nope").returncode == 4
    assert zkstore(config, "schedules delete", "nope", "--yes").returncode == 4
