"""Planted summaries, checkpoints and names never crash the CLI."""

from __future__ import annotations

import json

import pytest

from tests import jobs
from tests.cli import answers, every_command_answers
from tests.helpers import plant
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.integration


def test_planted_summaries_checkpoints_and_names_never_crash_the_cli(
    cluster: Cluster, config: StoreConfig
) -> None:
    for job_id, submitted in (("s1", "yesterday"), ("s2", 5), ("s3", "2026-01-01T00:00:00")):
        cluster.jobs.submit(JobDefinition.for_function(job_id, jobs.sleeper))
        node = cluster.layout.job_handle(job_id)
        record = json.loads(cluster.zk.get(node)[0])
        plant(cluster.zk, node, json.dumps({**record, "submitted": submitted}).encode())
    cluster.jobs.submit(JobDefinition.for_function("ckpt", jobs.sleeper))
    plant(cluster.zk, f"{cluster.layout.checkpoints('ckpt')}/not-a-number", b"garbage")
    cluster.jobs.submit(JobDefinition.for_function("forged", jobs.sleeper))
    node = cluster.layout.job_handle("forged")
    record = json.loads(cluster.zk.get(node)[0])
    forged_name = "x\nforged  RUNNING  1"
    record["name"] = forged_name
    cluster.zk.set(node, json.dumps(record).encode())
    every_command_answers(config, ["s1", "s2", "s3", "ckpt", "forged"])
    listing = answers(config, "jobs", "list").stdout
    lines = listing.strip().splitlines()
    assert len(lines) == 1 + 5, "one line per job, and a header"
    assert not any(line.startswith("forged  RUNNING") for line in lines)
