"""The fleet protocol as an operator meets it (issue 45): a record of a newer protocol is left
alone and shown as needing a newer daemon by the command line, the API and the page; a daemon
refuses to join a fleet finalized past it, with one line and exit 9."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests import jobs
from tests.cli import script
from tests.helpers import hands_client, plant, wait_for
from zkstore.cluster import fleet_protocol as fleet
from zkstore.config import StoreConfig
from zkstore.errors import EXIT_FLEET
from zkstore.layout import Layout, StorageLayout
from zkstore.protocol import PROTOCOL
from zkstore.records.job_states import SUCCEEDED
from zkstore.records.strict import utc_now

pytestmark = pytest.mark.e2e

NEWER = PROTOCOL + 1


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


def test_a_job_of_a_newer_protocol_is_left_alone_and_shown_as_needing_a_newer_daemon(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    local = LocalCluster(runtime_config, tmp_path / "rt", http=True, verbose=False)
    layout = Layout(runtime_config.base_path)
    payload_key = f"{StorageLayout(runtime_config.cluster_id).definitions('future')}/a.pkl"
    future_handle = {
        "format": NEWER,
        "uri": "",
        "size": 5,
        "sha256": "ab" * 32,
        "created": utc_now(),
        "writer": "a newer zkstore",
        "name": "future",
        "something": "only a newer release knows",
    }
    try:
        with hands_client(runtime_config) as client:
            zk, storage = client.cluster.zk, client.cluster.storage
            future_handle["uri"] = storage.url(payload_key)
            path = storage.path_of(storage.url(payload_key))
            storage.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            storage.fs.pipe_file(path, b"newer")
            plant(zk, layout.job_handle("future"), json.dumps(future_handle).encode())
            zk.create(f"{layout.job_handle('future')}/locks")  # published: a live entry
            daemon = local.start_daemon("d1")
            local.wait_for_leader(timeout=60)
            # The leader has looked at every job once it ran one submitted after them.
            client.submit_function(jobs.steps, str(tmp_path / "ok"), 1, 0.01, job_id="ok")
            assert client.wait("ok", timeout=120).outcome == SUCCEEDED
            assert zk.exists(layout.quarantine_entry("future")) is None, "never quarantined"
            assert zk.exists(layout.status("future")) is None, "nothing written for it"
            stored = zk.get(layout.job_handle("future"))[0]
            assert json.loads(stored) == future_handle, "its handle left as it was"

            listed = script(runtime_config, "jobs list", "--format", "json")
            assert listed.returncode == 0, listed.stderr
            (shown,) = [j for j in json.loads(listed.stdout) if j["job_id"] == "future"]
            assert shown["state"] == "NEEDS_UPGRADE"
            assert shown["error"].startswith("needs a newer daemon:"), shown["error"]
            table = script(runtime_config, "jobs show", "future")
            assert "NEEDS_UPGRADE" in table.stdout and "needs a newer daemon" in table.stdout

            assert daemon.url is not None
            status, body = _get(f"{daemon.url}/api/v1/jobs/future")
            assert status == 200 and json.loads(body)["state"] == "NEEDS_UPGRADE"
            _, page = _get(f"{daemon.url}/")
            assert "NEEDS_UPGRADE" in page
            _, job_page = _get(f"{daemon.url}/jobs/future")
            assert "needs a newer daemon" in job_page

            lingering = script(runtime_config, "handles lingering", "--min-age", "0s")
            assert "future" not in lingering.stdout, lingering.stdout
            assert daemon.alive
            refused = script(runtime_config, "handles cleanup", "--min-age", "0s", "--yes")
            assert refused.returncode == 2 and "while daemons are up (d1)" in refused.stderr
            local.stop()  # no daemon up: a cleanup of any age may run
            cleanup = script(runtime_config, "handles cleanup", "--min-age", "0s", "--yes")
            assert cleanup.returncode == 0, cleanup.stderr
            assert storage.fs.exists(storage.path_of(storage.url(payload_key))), (
                "its payload is a newer zkstore's to judge"
            )
    finally:
        local.stop()
    assert "Traceback" not in daemon.log()


def test_a_daemon_refuses_to_join_a_fleet_finalized_past_it(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    layout = Layout(runtime_config.base_path)
    with hands_client(runtime_config) as client:
        record = fleet.FleetRecord(version=None, current=NEWER, since=utc_now(), by="later")
        client.cluster.zk.set(layout.fleet, record.to_bytes())
        ran = script(
            runtime_config,
            "daemon",
            "--id",
            "old",
            "--http",
            "off",
            "--work-dir",
            str(tmp_path / "w"),
            timeout=60,
        )
        assert ran.returncode == EXIT_FLEET, (ran.returncode, ran.stderr[-2000:])
        last = ran.stderr.strip().splitlines()[-1]
        assert last.startswith("zkstore: error: daemon old"), last
        assert f"speaks fleet protocol {PROTOCOL}; the fleet is finalized at protocol {NEWER}" in (
            last
        )
        wait_for(
            lambda: client.cluster.zk.exists(layout.member("old")) is None,
            timeout=5,
            what="its member record gone with it",
        )
