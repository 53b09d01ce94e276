"""A failed attempt's staging is kept while its driver lingers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import LocalCluster
from tests.helpers import SESSION_TIMEOUT, alive, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


def mark(out: str, name: str, **data: Any) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}"
    temporary.write_text(json.dumps({"time": time.time(), **data}))
    temporary.replace(Path(out) / name)


def lingering(ctx: Any, out: str, linger: float) -> None:
    """Stages a file in an attempt-scoped artifact; attempt 1 then fails, and its driver stays
    alive ``linger`` seconds after recording that (its session still open), as a driver slow to
    close its session and exit would."""
    uri = ctx.artifacts.register("staging")
    staging = Path(uri.removeprefix("file://"))
    staging.mkdir(parents=True, exist_ok=True)
    (staging / f"by-attempt-{ctx.attempt}").write_text("")
    mark(out, f"staged-{ctx.attempt}", path=str(staging), pid=os.getpid())
    if ctx.attempt > 1:
        return
    from zkstore.cluster import Cluster

    close = Cluster.close

    def slow_close(self: Cluster) -> None:
        mark(out, "lingering", pid=os.getpid())
        time.sleep(linger)
        close(self)

    Cluster.close = slow_close  # type: ignore[method-assign]
    raise RuntimeError("attempt 1 fails on purpose")


def test_a_failed_attempts_staging_is_kept_while_its_driver_lingers(
    local: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    local.start_daemon("d1")
    local.wait_for_leader(timeout=SESSION_TIMEOUT * 10)
    job_id = client.submit_function(
        lingering, str(out), SESSION_TIMEOUT, job_id="lingers", max_attempts=2
    )
    wait_for((out / "lingering").exists, timeout=90, what="attempt 1 lingering")
    marks = json.loads((out / "staged-1").read_text())
    staging, pid = Path(marks["path"]), int(marks["pid"])
    lingered = json.loads((out / "lingering").read_text())["time"]
    assert (staging / "by-attempt-1").exists(), "released while its driver still ran"
    while alive(pid):
        assert (staging / "by-attempt-1").exists(), "released while its driver still ran"
        time.sleep(0.05)
    assert time.time() - lingered >= SESSION_TIMEOUT, "the driver lived its time out"
    result = client.wait(job_id, timeout=90)
    assert (result.outcome, result.attempts) == (SUCCEEDED, 2)
    assert not staging.exists(), "released once its driver was gone"
    assert "stopping it" not in local.daemons["d1"].log(), "nobody killed the lingering driver"
