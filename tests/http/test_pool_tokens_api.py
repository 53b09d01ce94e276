"""Tokens of pools (issue 59), through the HTTP API of a real daemon: a line
``TOKEN pool=etl,reporting`` of ``--api-token-file`` lists, reads, cancels and controls the jobs
of its pools only.

The routes are enumerated from the API's own router, so a route added later is tried too: every
route about one job answers 403 to the token for a job of another pool (and works on its own
pool's); every other route must be one this test knows, with what it shows checked.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from recovery.dev.localcluster import DaemonProcess, LocalCluster
from recovery.observe.access import AllowedHosts, Tokens
from recovery.observe.http_api import Api
from tests.cli import script, script_ok
from tests.helpers import wait_for
from tests.pool_jobs import JOB
from zkstore.config import StoreConfig
from zkstore.layout import Layout

pytestmark = pytest.mark.e2e

CLUSTER_TOKEN = "cluster-wide-token-" + "c" * 16
ETL_TOKEN = "etl-and-reporting-token-" + "e" * 12
BOUND = 120.0
#: the routes about no one job, and what each answers the scoped token
NOT_ABOUT_A_JOB = {
    ("GET", "/"),
    ("GET", "/health"),
    ("GET", "/leader"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/cluster"),
    ("GET", "/api/v1/cluster/settings"),
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/schedules"),
    ("GET", "/api/v1/schedules/{name}"),
    ("POST", "/api/v1/schedules/{name}/pause"),
    ("POST", "/api/v1/schedules/{name}/resume"),
    ("DELETE", "/api/v1/schedules/{name}"),
}
#: what stands for the routes' other parameters
FILLERS = {"{command}": "pause", "{name}": "nightly"}


def routes() -> list[tuple[str, str]]:
    """Every (method, path) the API serves, from its router (HEAD: as GET)."""
    api = Api(
        cast(Any, None),
        cast(Any, None),
        tokens=Tokens(None),
        hosts=AllowedHosts.of(None, "127.0.0.1"),
    )
    try:
        app = api.application()
        found = {
            (route.method, route.resource.canonical)
            for route in app.router.routes()
            if route.resource is not None and route.method != "HEAD"
        }
    finally:
        api.close()
    return sorted(found)


def call(daemon: DaemonProcess, method: str, path: str, token: str | None) -> tuple[int, bytes]:
    assert daemon.url is not None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = b"{}" if method in ("POST", "PUT") else None
    req = urllib.request.Request(daemon.url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def fill(path: str, job_id: str) -> str:
    path = path.replace("{job_id}", job_id)
    for placeholder, value in FILLERS.items():
        path = path.replace(placeholder, value)
    assert not re.search(r"\{\w+\}", path), f"a parameter this test cannot fill: {path}"
    return path


@pytest.fixture
def daemon(
    local: LocalCluster, runtime_config: StoreConfig, laptop: Path, tmp_path: Path
) -> Iterator[DaemonProcess]:
    """A daemon with a cluster-wide token and a token of pools etl and reporting, running
    ``etl-job`` (pool etl) and ``bulk-job`` (pool bulk) until the test opens their gate."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# the API's tokens\n{CLUSTER_TOKEN}\n{ETL_TOKEN} pool=etl,reporting\n")
    tokens.chmod(0o600)
    local.http = True
    started = local.start_daemon("d1", "--max-drivers", "4", "--api-token-file", str(tokens))
    local.wait_for_leader(timeout=BOUND)
    config = runtime_config
    for pool in ("etl", "bulk"):
        script_ok(config, "pools set", pool, "--max-running", "4")
    (laptop / "job.py").write_text(JOB)
    log, gate = laptop / "started.log", laptop / "gate"
    for job_id, pool in (("etl-job", "etl"), ("bulk-job", "bulk")):
        script_ok(
            config,
            "submit",
            "job.py:run",
            "--job-id",
            job_id,
            "--pool",
            pool,
            "--",
            job_id,
            str(log),
            str(gate),
            cwd=laptop,
        )
    layout = Layout(config.base_path)
    for job_id in ("etl-job", "bulk-job"):
        wait_for(
            lambda job_id=job_id: local.zk.exists(layout.running(job_id)) is not None,
            timeout=BOUND,
            what=f"{job_id} running",
        )
    yield started
    gate.write_text("")
    for token in (CLUSTER_TOKEN, ETL_TOKEN):
        assert token not in started.log(), "a token never reaches a log"


def test_a_pool_token_is_refused_on_every_route_about_another_pools_job(
    daemon: DaemonProcess,
) -> None:
    about_a_job = [(m, p) for m, p in routes() if "{job_id}" in p]
    assert len(about_a_job) >= 9, about_a_job  # the job's page, details, logs, control...
    for method, path in about_a_job:
        status, body = call(daemon, method, fill(path, "bulk-job"), ETL_TOKEN)
        assert status == 403, (method, path, status, body)
        assert b"pool(s) etl, reporting only; bulk-job is in pool bulk" in body, body
        # the cluster-wide token is not refused (what it answers is the route's own)
        status, body = call(daemon, method, fill(path, "bulk-job"), CLUSTER_TOKEN)
        assert status not in (401, 403), (method, path, status, body)
    # its own pool's job: read, logs, controlled, cancelled
    for path in ("/api/v1/jobs/etl-job", "/api/v1/jobs/etl-job/logs", "/jobs/etl-job"):
        status, body = call(daemon, "GET", path, ETL_TOKEN)
        assert status == 200, (path, body)
    status, body = call(daemon, "POST", "/api/v1/jobs/etl-job/control/pause", ETL_TOKEN)
    assert status == 200, body
    status, body = call(daemon, "POST", "/api/v1/jobs/etl-job/cancel", ETL_TOKEN)
    assert status == 202 and json.loads(body)["cancel_requested"], body
    # a job that does not exist is a 404 as for any token, not a hint of its pool
    assert call(daemon, "GET", "/api/v1/jobs/nosuch", ETL_TOKEN)[0] == 404
    # without a token, the reads of a job are guarded (anyone could read every log otherwise)
    assert call(daemon, "GET", "/api/v1/jobs/bulk-job/logs", None)[0] == 401


def test_a_pool_token_lists_only_its_pools_jobs_and_changes_nothing_else(
    daemon: DaemonProcess,
) -> None:
    others = {(m, p) for m, p in routes() if "{job_id}" not in p}
    assert others == NOT_ABOUT_A_JOB, "a new route: say here what a pool's token gets of it"
    status, body = call(daemon, "GET", "/api/v1/jobs", ETL_TOKEN)
    assert status == 200
    assert [job["job_id"] for job in json.loads(body)] == ["etl-job"]
    status, body = call(daemon, "GET", "/api/v1/jobs", CLUSTER_TOKEN)
    assert sorted(job["job_id"] for job in json.loads(body)) == ["bulk-job", "etl-job"]
    status, page = call(daemon, "GET", "/", ETL_TOKEN)
    assert status == 200 and b"etl-job" in page and b"bulk-job" not in page
    for method, path in sorted(NOT_ABOUT_A_JOB):
        if method != "GET":  # the schedules' changes: the cluster-wide token's
            status, body = call(daemon, method, fill(path, ""), ETL_TOKEN)
            assert status == 403, (method, path, status, body)
            assert b"acts on the jobs of pool(s) etl, reporting only" in body, body


def test_a_token_file_that_cannot_be_read_as_tokens_is_refused_in_one_line(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{CLUSTER_TOKEN}\n{ETL_TOKEN} pool=Bad/Name\n")
    tokens.chmod(0o600)
    ran = script(runtime_config, "daemon", "--api-token-file", str(tokens), "--http", "off")
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert "line 2" in last and "invalid pool name" in last, last
    assert ETL_TOKEN not in ran.stderr
