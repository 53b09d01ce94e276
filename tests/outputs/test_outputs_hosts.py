"""Exactly-once outputs across a network partition (invariant 18), on hosts that really fail
(zkstore_dev/hosts.py: network namespaces behind a router; root only, elsewhere skipped saying
why in one line). The same test on local disk and on S3 (a moto server on a host of its own).

The job (``tests/output_jobs.py:days``) has staged day 2's part when its driver's host is cut
off from ZooKeeper (storage still reachable), and is let go at once: its commit goes into the
cut. The driver's lease ends before its session can expire, so it is gone before another
attempt exists; the next attempt, on the other host, redoes day 2 from the checkpoint of day 1
and commits it. The cut attempt's commit never lands (no commit of attempt 1 but day 1), what
it staged is deleted, the manifest holds exactly one part per day, and what readers get (Spark
in the job on local disk, the manifest files with fsspec alone, ``zkstore outputs``) is every
day's rows once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from recovery.dev.localcluster import LocalCluster
from tests.cli import json_of
from tests.helpers import alive, hands_client, wait_for, written_json
from tests.output_checks import check_committed_once, submit
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.records.job_states import SUCCEEDED
from zkstore_dev import hosts
from zkstore_dev.chaos.world import S3Server
from zkstore_dev.hosts import Network

pytestmark = pytest.mark.e2e

DAEMONS = ("d1", "d2")


@dataclass
class World:
    network: Network
    config: StoreConfig


@pytest.fixture(params=["file", "s3"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    why = hosts.unavailable()
    if why is not None:
        pytest.skip(why)
    with Network(["zk", "s3", *DAEMONS]).start() as network:
        zk_host = network["zk"]
        with EmbeddedZooKeeper(
            port=2181, address=zk_host.address, command_prefix=zk_host.command([])
        ) as server:
            config = StoreConfig(
                zk_hosts=server.connect_string,
                root="/outputs-cut",
                storage_url=(tmp_path / "storage").as_uri(),
                session_timeout=4.0,
                timeout=2.0,
            )
            if request.param == "file":
                yield World(network, config)
                return
            with S3Server(tmp_path / "s3.log", network["s3"]).start() as s3:
                s3.create_bucket("outputs")
                yield World(
                    network,
                    config.with_changes(
                        storage_url="s3://outputs/zkstore", storage_options=s3.options()
                    ),
                )


def test_a_driver_host_cut_off_from_zookeeper_at_its_staged_part_commits_nothing(
    world: World, tmp_path: Path
) -> None:
    network, config, out = world.network, world.config, tmp_path / "out"
    daemons = {name: network[name].command([]) for name in DAEMONS}
    local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.5, hosts=daemons)
    try:
        for name in DAEMONS:
            local.start_daemon(name)
        local.wait_for_leader(timeout=120)
        submit(config, out, hold_before=2, hold_after=0)
        staged = written_json(out / "staged-2-attempt-1", timeout=180, what="day 2 staged")
        host = network.host_of(staged["pid"])
        assert host in daemons, f"the driver runs on {host}"
        cut = network.isolate(host, from_="zk")
        (out / "go-commit-2").write_text("")  # its commit goes into the cut
        try:
            second = written_json(
                out / "committed-2-attempt-2", timeout=180, what="attempt 2 commits day 2"
            )
            assert not alive(staged["pid"]), "the cut driver was gone before attempt 2 began"
            assert network.host_of(second["pid"]) != host, "attempt 2 ran elsewhere"
        finally:
            cut.restore()
        with hands_client(config) as client:
            result = client.wait("days", timeout=300)
        assert (result.outcome, result.attempts) == (SUCCEEDED, 2), result.error
        started = json.loads((out / "start-attempt-2").read_text())
        assert started["resumed_from"] == 1, "attempt 2 redid day 2"
        assert not (out / "committed-2-attempt-1").exists(), "the cut attempt committed nothing"
        refused = out / "refused-2-attempt-1"
        if refused.exists():  # its commit failed before its lease ended the driver: refused
            assert "attempt 1" in json.loads(refused.read_text())["error"]
        wait_for(
            lambda: json_of(config, "outputs list", "days")[0]["from"] == "manifest",
            timeout=60,
            what="the job's cleanup",
        )
        check_committed_once(
            config, out, ["attempt-1/day=1", *(f"attempt-2/day={d}" for d in range(2, 5))]
        )
    finally:
        local.stop()
