"""The operator CLI as the installed console script: exit codes, one clear line when ZooKeeper is
unreachable."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests import jobs
from tests.cli import connection
from tests.helpers import BIN
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.jobs.definition import JobDefinition

pytestmark = pytest.mark.e2e


def test_console_script_as_a_subprocess(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("sub", jobs.noop))
    done = subprocess.run(
        [str(BIN / "zkstore"), "handles", "lingering", "--format", "json", *connection(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []
    bad = subprocess.run(
        [str(BIN / "zkstore"), "jobs", "show", "../etc", *connection(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert (
        bad.stderr.startswith("zkstore: usage error: invalid job id")
        and "Traceback" not in bad.stderr
    )


def test_unreachable_zookeeper_is_one_clear_line_not_a_hang(tmp_path: Path) -> None:
    start = time.monotonic()
    done = subprocess.run(
        [
            str(BIN / "zkstore"),
            "handles",
            "list",
            "--zk",
            "127.0.0.1:9",
            "--store-timeout",
            "1",
            "--storage",
            f"file://{tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 6  # unavailable
    assert done.stderr.strip().splitlines() == [
        "zkstore: error: cannot reach ZooKeeper at 127.0.0.1:9 within 1 s"
    ]
    assert time.monotonic() - start < 60, "not a hang"
