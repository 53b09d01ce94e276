"""A job's run options in one typed value (issue 53): ``submit --timeout --retry-delay --after
--notify`` on a finalized fleet keeps them in the handle's ``run`` field, structured (no flat
key), and the leader decides by that value: the dependency holds the job, the timeout ends
each attempt, the retry waits the job's delay, the events go to the job's URL. Submitted with
the installed script, read back from ZooKeeper with a plain kazoo client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from recovery.dev.localcluster import LocalCluster
from tests.cli import script, show
from tests.helpers import SESSION_TIMEOUT, wait_for
from tests.servers import NotificationReceiver
from zkstore.config import StoreConfig
from zkstore.records.handle import RUN_FORMAT

pytestmark = pytest.mark.e2e

JOBS = """
import json, os, time


def gated(ctx, gate):
    while not os.path.exists(gate):
        time.sleep(0.05)


def forever(ctx, out):
    with open(f"{out}-{ctx.attempt}", "w") as f:
        json.dump({"started": time.time()}, f)
    while True:
        time.sleep(0.1)
"""

TIMEOUT, RETRY_DELAY = 3.0, 8.0


def test_run_options_travel_typed_in_the_handle_and_the_leader_decides_by_them(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    config = runtime_config
    receiver = NotificationReceiver().start()
    zk = KazooClient(hosts=config.zk_hosts)
    gate, out = tmp_path / "gate", tmp_path / "slow"
    try:
        (laptop / "jobs.py").write_text(JOBS)
        local.start_daemon("d1")
        local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
        first = script(
            config, "submit", "jobs.py:gated", "--job-id", "first", "--", str(gate), cwd=laptop
        )
        assert first.returncode == 0, first.stderr
        done = script(
            config,
            "submit",
            "jobs.py:forever",
            "--job-id",
            "slow",
            "--after",
            "first",
            "--timeout",
            f"{TIMEOUT:g}s",
            "--retry-delay",
            f"{RETRY_DELAY:g}s",
            "--notify",
            receiver.url("/hook/slow"),
            "--max-attempts",
            "2",
            "--",
            str(out),
            cwd=laptop,
        )
        assert done.returncode == 0, done.stderr

        zk.start(timeout=30)
        record = json.loads(zk.get(f"{config.base_path}/currentJobs/slow")[0])
        assert record["format"] == RUN_FORMAT
        assert not {"timeout", "retry_delay", "notify", "after"} & record.keys(), record
        run = json.loads(record["run"])
        assert run["lifecycle"] == {
            "timeout": TIMEOUT,
            "retry_delay": RETRY_DELAY,
            "notify": receiver.url("/hook/slow"),
        }
        assert run["after"] == {"first": "SUCCEEDED"}

        # the dependency holds it; jobs show derives its options from the typed value
        waiting = wait_for(lambda: show(config, "slow")["waiting"], timeout=60, what="waiting")
        assert waiting == "waiting for job first to end SUCCEEDED"
        shown = show(config, "slow")
        assert shown["state"] == "PENDING" and not Path(f"{out}-1").exists()
        assert shown["lifecycle"]["timeout"] == TIMEOUT
        assert shown["lifecycle"]["retry_delay"] == RETRY_DELAY
        assert shown["lifecycle"]["notify"].startswith("http://127.0.0.1:")
        assert "/hook/slow" not in shown["lifecycle"]["notify"], "the URL's path is redacted"

        gate.touch()
        # the timeout ends each attempt; the retry waits the job's delay, not the daemon's
        result = wait_for(lambda: show(config, "slow")["result"], timeout=120, what="its end")
        assert result["outcome"] == "FAILED", result
        assert f"over its --timeout of {TIMEOUT:g}s" in result["error"], result
        one = json.loads(Path(f"{out}-1").read_text())["started"]
        two = json.loads(Path(f"{out}-2").read_text())["started"]
        # the jitter shortens a delay by up to 20 %
        assert two - one >= TIMEOUT + RETRY_DELAY * 0.8, (one, two)
        # and its events went to its own URL
        wait_for(
            lambda: "slow:2:FAILED" in receiver.snapshot()[1],
            timeout=60,
            what="the job's end posted to its --notify URL",
        )
    finally:
        zk.stop()
        zk.close()
        receiver.stop()
