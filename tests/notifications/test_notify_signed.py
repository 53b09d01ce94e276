"""A job's ``--notify`` URL is what its signed definition says (issue 60 item 8): a writer of the
job's handle alone (a plain kazoo client here; a job's own driver may write its handle) cannot
point the job's events elsewhere. The leader posts them to the signed URL, never to the one the
rewritten handle names, and its log says why. A leader loads aiohttp (its import and TLS context:
about 0.15 s of CPU) only once it has something to post."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from recovery.dev.localcluster import LocalCluster
from tests.cli import script
from tests.helpers import SESSION_TIMEOUT, wait_for
from tests.servers import NotificationReceiver
from zkstore.config import StoreConfig

pytestmark = pytest.mark.e2e


def loads_aiohttp(pid: int) -> bool:
    """Whether the process has mapped aiohttp's compiled parser (imported aiohttp)."""
    return "/aiohttp/" in Path(f"/proc/{pid}/maps").read_text()


JOBS = """
import os
import time


def gated(ctx, gate):
    deadline = time.monotonic() + 300
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(gate)
        time.sleep(0.05)
"""


def test_a_handle_rewritten_to_another_notify_url_does_not_redirect_the_jobs_events(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> None:
    own, elsewhere = NotificationReceiver().start(), NotificationReceiver().start()
    zk = KazooClient(hosts=runtime_config.zk_hosts)
    gate = tmp_path / "gate"
    try:
        (laptop / "jobs.py").write_text(JOBS)
        local.start_daemon("d1")
        local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
        done = script(
            runtime_config,
            "submit",
            "jobs.py:gated",
            "--job-id",
            "j",
            "--notify",
            own.url("/own/hook"),
            "--",
            str(gate),
            cwd=laptop,
        )
        assert done.returncode == 0, done.stderr
        zk.start(timeout=30)
        path = f"{runtime_config.base_path}/currentJobs/j"
        data, stat = zk.get(path)
        record = json.loads(data)
        run = json.loads(record["run"])  # the run options, typed (fleet protocol 4)
        assert run["lifecycle"]["notify"] == own.url("/own/hook")
        run["lifecycle"]["notify"] = elsewhere.url("/stolen")
        record["run"] = json.dumps(run)
        zk.set(path, json.dumps(record).encode(), version=stat.version)
        # the job runs: the leader has long started its sender, and has nothing to post yet
        running = f"{runtime_config.base_path}/jobs/j/running"
        wait_for(lambda: zk.exists(running) is not None, timeout=120, what="the job running")
        leader = local.daemons["d1"]
        assert not loads_aiohttp(leader.pid), "a leader with nothing to post loads no aiohttp"
        gate.touch()
        wait_for(
            lambda: "j:1:SUCCEEDED" in own.snapshot()[1], timeout=120, what="the job's end posted"
        )
        assert elsewhere.snapshot()[0] == [], "nothing posted to the handle's URL"
        assert loads_aiohttp(leader.pid), "the POST was aiohttp's"
        said = leader.log()
        assert (
            "job j: not notifying http://127.0.0.1:" in said
            and "the URL its handle names: its signed definition says http://127.0.0.1:" in said
        ), said[-3000:]
        assert "/stolen" not in said and "/own/hook" not in said, "URLs' paths stay out of logs"
    finally:
        zk.stop()
        zk.close()
        own.stop()
        elsewhere.stop()
