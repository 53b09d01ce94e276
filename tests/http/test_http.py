"""Every daemon's HTTP side, met the way a load balancer, Prometheus, a script and a person meet
it: real daemons as processes, real requests, answers checked against the CLI and ZooKeeper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests import jobs
from tests.cli import json_of, script, script_json
from tests.helpers import SESSION_TIMEOUT, http_status, step_runs, wait_for
from zkstore.config import StoreConfig
from zkstore.records.job_states import CANCELLED, RUNNING, SUCCEEDED

BIN = Path(sys.executable).parent
TOKEN = "t0ken-for-the-tests-" + "x" * 12


def request(
    daemon: DaemonProcess,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request (error statuses included, never raised)."""
    assert daemon.url is not None
    req = urllib.request.Request(daemon.url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def get_json(daemon: DaemonProcess, path: str, status: int = 200) -> Any:
    code, headers, body = request(daemon, path)
    assert code == status, body
    assert headers["Content-Type"].startswith("application/json")
    return json.loads(body)


def connection_args(config: StoreConfig) -> list[str]:
    return ["--zk", config.zk_hosts, "--root", config.root, "--storage", config.storage_url]


def metrics(daemon: DaemonProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, parsed by prometheus_client's own parser."""
    code, headers, body = request(daemon, "/metrics")
    assert code == 200 and headers["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


#: The tests here that take ``web`` get d1 (leading) and d2 serving HTTP with the API token:
#: their process's shared pair (tests/fleets.py), but for those marked ``disturbs``.
pytestmark = [pytest.mark.e2e, pytest.mark.web("d1", "d2")]


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"ZKSTORE_API_TOKEN": TOKEN}


def finished_and_running(client: Client, tmp_path: Path) -> tuple[str, str]:
    """One job that SUCCEEDED (cleaned up), one RUNNING with a checkpoint."""
    done = client.submit_function(jobs.steps, str(tmp_path / "done"), 2, 0.0, job_id="done")
    assert client.wait(done, timeout=60).outcome == SUCCEEDED
    wait_for(lambda: client.status(done).state == SUCCEEDED, timeout=60, what="cleanup")
    out = tmp_path / "live"
    live = client.submit_function(jobs.steps, str(out), 400, 0.25, job_id="live")
    wait_for(lambda: len(step_runs(out)) >= 2, timeout=60, what="a checkpoint of the live job")
    return done, live


def test_every_read_endpoint_on_the_leader_and_on_a_standby(
    web: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    done, live = finished_and_running(client, tmp_path)
    cli_list = script_json(runtime_config, "jobs list", "--all")
    cli_show = script_json(runtime_config, "jobs show", done)
    for daemon in web.daemons.values():
        leading = daemon.daemon_id == "d1"
        health = get_json(daemon, "/health")
        assert health == {"daemon": daemon.daemon_id, "zookeeper": "connected", "leader": leading}
        assert get_json(daemon, "/leader", 200 if leading else 503)["leader"] is leading
        code, _, body = request(daemon, "/health", method="HEAD")
        assert (code, body) == (200, b"")
        info = get_json(daemon, "/api/v1/cluster")
        assert info["leader"]["id"] == "d1" and info["this_daemon"]["leader"] is leading
        assert [(d["id"], d["leader"]) for d in info["daemons"]] == [("d1", True), ("d2", False)]
        assert info["jobs"] == {SUCCEEDED: 1, RUNNING: 1}
        assert get_json(daemon, "/api/v1/jobs") == [j for j in cli_list if j["job_id"] == live]
        listed = {j["job_id"]: j for j in get_json(daemon, "/api/v1/jobs?all=true")}
        assert listed[done] == next(j for j in cli_list if j["job_id"] == done)
        assert listed[live]["state"] == RUNNING and listed[live]["driver"]["pid"] > 0
        assert get_json(daemon, f"/api/v1/jobs/{done}") == cli_show
        shown = get_json(daemon, f"/api/v1/jobs/{live}")
        assert shown["checkpoints"] and shown["state"] == RUNNING
        page_status, page_headers, page = request(daemon, "/")
        assert page_status == 200 and page_headers["Content-Type"].startswith("text/html")
        assert "script-src" not in page_headers["Content-Security-Policy"]
        assert all(word in page.decode() for word in (done, live, RUNNING, SUCCEEDED, "d2"))
    # a daemon has one JSON shape, the command line's and the API's (issue 61): the two up,
    # the one running the live job, and one drained before it ever started
    drained = subprocess.run(
        [
            str(BIN / "zkstore"),
            "daemons",
            "drain",
            "d9",
            "--before-start",
            *connection_args(runtime_config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert drained.returncode == 0, drained.stderr
    volatile = ("rss", "heap_blocks")  # each daemon reports them every 30 s

    def steady(daemons: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in d.items() if k not in volatile} for d in daemons]

    listed_daemons = script_json(runtime_config, "daemons list")
    api_daemons = get_json(web.daemons["d2"], "/api/v1/cluster")["daemons"]
    assert steady(listed_daemons) == steady(api_daemons)
    assert [(d["id"], d["up"], d["drained"]) for d in api_daemons] == [
        ("d1", True, False),
        ("d2", True, False),
        ("d9", False, True),
    ]
    assert [d["jobs"] for d in api_daemons if d["used"]] == [[live]]
    assert {tuple(d) for d in listed_daemons} == {tuple(d) for d in api_daemons}
    # the mark lifted, d9 is gone from the fleet the next test shares
    undrained = script(runtime_config, "daemons undrain", "d9")
    assert undrained.returncode == 0, undrained.stderr
    assert [d["id"] for d in json_of(runtime_config, "daemons list")] == ["d1", "d2"]


def test_logs_endpoint_serves_what_jobs_logs_prints(
    web: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    job = client.submit_function(jobs.steps, str(tmp_path / "out"), 3, 0.0, job_id="logged")
    assert client.wait(job, timeout=60).outcome == SUCCEEDED
    env = {**os.environ, "ZKSTORE_ZK": runtime_config.zk_hosts}
    env.update({"ZKSTORE_ROOT": runtime_config.root, "ZKSTORE_STORAGE": runtime_config.storage_url})

    def printed() -> str:
        return subprocess.run(
            [str(BIN / "zkstore"), "jobs", "logs", job], env=env, capture_output=True, text=True
        ).stdout

    # a new interpreter each time: asked twice a second, not twenty times
    text = wait_for(
        lambda: "SUCCEEDED" in (t := printed()) and t, timeout=60, interval=0.5, what="logs"
    )
    for daemon in web.daemons.values():
        code, headers, body = request(daemon, f"/api/v1/jobs/{job}/logs")
        assert code == 200 and body.decode() == text
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["X-Zkstore-Attempt"] == "1"
        code, _, tail = request(daemon, f"/api/v1/jobs/{job}/logs?attempt=1&tail=1")
        assert code == 200 and tail.decode() == text.splitlines(keepends=True)[-1]
        assert request(daemon, f"/api/v1/jobs/{job}/logs?attempt=7")[0] == 404
        assert request(daemon, f"/api/v1/jobs/{job}/logs?tail=ten")[0] == 400
        assert request(daemon, "/api/v1/jobs/nobody/logs")[0] == 404


@pytest.mark.disturbs  # kills the leader and starts d3
def test_leader_answers_200_on_the_leader_only_across_a_failover(
    web: LocalCluster, runtime_config: StoreConfig
) -> None:
    first, second = web.daemons["d1"], web.daemons["d2"]
    assert request(first, "/leader")[0] == 200 and request(second, "/leader")[0] == 503
    first.signal(signal.SIGKILL)
    wait_for(
        lambda: request(second, "/leader")[0] == 200,
        timeout=SESSION_TIMEOUT * 10,
        what="the standby answering 200 on /leader",
    )
    third = web.start_daemon("d3")
    wait_for(lambda: http_status(third, "/health") == 200, timeout=60, what="d3 up")
    assert request(third, "/leader")[0] == 503
    assert request(second, "/leader")[0] == 200
    samples = metrics(second)
    assert samples[("zkstore_leader", (("daemon", "d2"),))] == 1.0
    assert samples[("zkstore_leadership_acquired_total", (("daemon", "d2"),))] == 1.0
    assert samples[("zkstore_last_takeover_duration_seconds", ())] >= 0.0
    assert metrics(third)[("zkstore_leader", (("daemon", "d3"),))] == 0.0


def test_cancel_needs_the_token_and_a_well_formed_body(
    web: LocalCluster, client: Client, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    job = client.submit_function(jobs.sleeper, str(out), 120.0, job_id="sleepy")
    wait_for(lambda: client.status(job).state == RUNNING, timeout=60, what="running")
    standby = web.daemons["d2"]
    path = f"/api/v1/jobs/{job}/cancel"
    answers = []
    for headers, body, expected in (
        ({}, None, 401),
        ({"Authorization": "Bearer wrong-token-of-some-length"}, None, 401),
        ({"Authorization": f"Basic {TOKEN}"}, None, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, b"{not json", 400),
        ({"Authorization": f"Bearer {TOKEN}"}, b"[1, 2]", 400),
        ({"Authorization": f"Bearer {TOKEN}"}, b'{"reason": 5}', 400),
        ({"Authorization": f"Bearer {TOKEN}"}, b"x" * 70_000, 413),
    ):
        code, answer_headers, answer = request(
            standby, path, method="POST", body=body, headers=headers
        )
        assert code == expected, answer
        assert json.loads(answer)["status"] == expected and "Traceback" not in answer.decode()
        if expected == 401:
            assert answer_headers["WWW-Authenticate"].startswith("Bearer")
        answers.append(answer)
    assert client.status(job).cancel is None, "nothing refused changed anything"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    unknown = request(standby, "/api/v1/jobs/no-such-job/cancel", method="POST", headers=auth)
    assert unknown[0] == 404
    code, _, answer = request(
        standby, path, method="POST", body=b'{"reason": "from the API"}', headers=auth
    )
    assert code == 202 and json.loads(answer)["job_id"] == job
    assert client.wait(job, timeout=90).outcome == CANCELLED
    assert client.status(job).result is not None
    again = request(standby, path, method="POST", headers=auth)
    assert again[0] == 409
    assert all(TOKEN.encode() not in a for a in [*answers, answer, again[2], unknown[2]])


def test_errors_are_json_with_the_right_status(web: LocalCluster) -> None:
    daemon = web.daemons["d2"]
    for method, path, expected in (
        ("GET", "/api/v1/jobs/no-such-job", 404),
        ("GET", "/api/v1/jobs/..", 400),
        ("GET", "/api/v1/jobs/a%2Fb", 400),
        ("GET", "/api/v1/jobs?all=maybe", 400),
        ("GET", "/no/such/route", 404),
        ("DELETE", "/api/v1/jobs", 405),
        ("POST", "/health", 405),
    ):
        code, headers, body = request(daemon, path, method=method)
        assert code == expected, (path, body)
        assert headers["Content-Type"].startswith("application/json")
        assert json.loads(body)["status"] == expected


def test_metrics_tell_the_state_of_the_cluster(
    web: LocalCluster, client: Client, tmp_path: Path
) -> None:
    leader, standby = web.daemons["d1"], web.daemons["d2"]
    # counters count since each daemon started, across the tests that share it: this test
    # asserts on what its own jobs and request added
    started = "zkstore_driver_starts_total"
    starts_before = {
        d.daemon_id: metrics(d)[(started, (("daemon", d.daemon_id),))] for d in (leader, standby)
    }
    key = (
        "zkstore_http_requests_total",
        (("method", "GET"), ("route", "/api/v1/jobs"), ("status", "200")),
    )
    served_before = metrics(standby).get(key, 0.0)
    done, live = finished_and_running(client, tmp_path)
    request(standby, "/api/v1/jobs")
    for daemon in (leader, standby):
        samples = metrics(daemon)
        me = (("daemon", daemon.daemon_id),)
        assert samples[("zkstore_leader", me)] == (1.0 if daemon is leader else 0.0)
        assert samples[("zkstore_zookeeper_up", ())] == 1.0
        assert samples[("zkstore_storage_up", ())] == 1.0
        assert samples[("zkstore_daemons", ())] == 2.0
        assert samples[("zkstore_jobs", (("state", RUNNING),))] == 1.0
        assert samples[("zkstore_jobs", (("state", SUCCEEDED),))] == 1.0
        assert samples[("zkstore_jobs", (("state", "FAILED"),))] == 0.0
        running = client.status(live)
        assert running.running is not None
        assert samples[("zkstore_job_attempts", (("job_id", live),))] == running.running.attempt
        assert samples[("zkstore_job_failures", (("job_id", live),))] == 0.0
        assert ("zkstore_job_attempts", (("job_id", done),)) not in samples, "finished: not live"
        assert samples[("zkstore_job_last_checkpoint_age_seconds", (("job_id", live),))] >= 0.0
        starts = samples[(started, me)] - starts_before[daemon.daemon_id]
        assert starts == (2.0 if daemon is leader else 0.0)
        assert samples[("zkstore_leader_since_timestamp_seconds", ())] > 0
        assert samples[("process_resident_memory_bytes", ())] > 0
    served = metrics(standby)
    assert served[key] - served_before == 1.0


def process_rss(pid: int) -> int:
    """A process's resident memory as ``/proc`` tells it, in bytes."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_each_daemon_tells_its_own_memory_in_metrics_and_daemons_list(
    web: LocalCluster, runtime_config: StoreConfig
) -> None:
    """Its resident memory and its Python heap, per daemon (issue 62): what an operator
    watches to see that a daemon does not grow with the jobs it has seen."""
    for daemon in web.daemons.values():
        samples = metrics(daemon)
        me = (("daemon", daemon.daemon_id),)
        rss = samples[("zkstore_daemon_resident_memory_bytes", me)]
        assert 0.5 < rss / process_rss(daemon.pid) < 2, "the daemon's own process's"
        assert samples[("zkstore_daemon_python_heap_blocks", me)] > 10_000
    fleet = wait_for(
        lambda: (
            (f := {d["id"]: d for d in json_of(runtime_config, "daemons list")})
            and all(d["rss"] for d in f.values())
            and f
        ),
        timeout=60,
        what="both daemons' memory in their records",
    )
    for daemon in web.daemons.values():
        row = fleet[daemon.daemon_id]
        assert 0.5 < row["rss"] / process_rss(daemon.pid) < 2
        assert row["heap_blocks"] > 10_000
    table = subprocess.run(
        [str(BIN / "zkstore"), "daemons", "list", *connection_args(runtime_config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert table.returncode == 0 and "MEMORY" in table.stdout.upper(), table.stdout
    assert table.stdout.count(" MiB") == 2, table.stdout


def test_mutations_are_refused_without_a_configured_token(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    cluster = LocalCluster(runtime_config, tmp_path / "rt", http=True)
    try:
        daemon = cluster.start_daemon("solo")
        wait_for(lambda: http_status(daemon, "/health") == 200, timeout=60, what="HTTP up")
        code, _, body = request(
            daemon,
            "/api/v1/jobs/any/cancel",
            method="POST",
            headers={"Authorization": "Bearer anything-at-all-here"},
        )
        assert code == 403 and "ZKSTORE_API_TOKEN" in json.loads(body)["error"]
    finally:
        cluster.stop()


def test_control_through_the_api_of_a_standby(
    web: LocalCluster, client: Client, runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """The control endpoints store what ``zkstore control`` would, the job acknowledges it, and
    ``control get`` / ``control history`` read back the same as the API's GETs."""
    out = tmp_path / "out"
    job = client.submit_function(jobs.tunable, str(out), job_id="tuned")
    wait_for((out / "declared").exists, timeout=120, what="the job to declare its keys")
    standby = web.daemons["d2"]
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    path = f"/api/v1/jobs/{job}/control"

    def change(route: str, body: dict[str, Any] | None, method: str = "POST") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        code, _, answer = request(standby, route, method=method, body=data, headers=auth)
        return code, json.loads(answer)

    assert request(standby, path, method="PUT", body=b'{"values": {"rate": 1}}')[0] == 401
    code, stored = change(path, {"values": {"rate": 2.5}}, "PUT")
    assert code == 200 and stored["version"] == 0 and stored["changes"] == {"rate": {"new": 2.5}}
    wait_for(
        lambda: (get_json(standby, path)["applied"] or {}).get("version") == 0,
        timeout=60,
        what="the job's acknowledgement",
    )
    assert get_json(standby, path) == script_json(runtime_config, "control get", job)
    for body, expected in (
        ({"values": {"colour": "red"}}, 400),  # not declared by the job
        ({"values": {"rate": "fast"}}, 400),  # declared as a float
        ({"values": {"rate": {"nested": 1}}}, 400),
        ({"values": {"rate": 3}, "expect_version": 7}, 409),
        ({"values": {"rate": 3}, "colour": 1}, 400),
        ({}, 400),
    ):
        code, answer = change(path, body, "PUT")
        assert code == expected and answer["status"] == expected, (body, answer)
    code, stored = change(path, {"values": {"rate": 3}, "expect_version": 0}, "PUT")
    assert code == 200 and stored["version"] == 1
    assert change(f"{path}/pause", None)[1]["values"]["zkstore.pause"] is True
    assert change(f"{path}/resume", {"expect_version": 2})[1]["version"] == 3
    assert change(f"{path}/log-level", {"level": "debug"})[1]["values"]["zkstore.log-level"] == (
        "DEBUG"
    )
    assert change(f"{path}/log-level", {"level": "loud"})[0] == 400
    assert change(f"{path}/checkpoint", None)[0] == 200
    assert change(f"{path}/explode", None)[0] == 404
    assert request(standby, "/api/v1/jobs/no-such-job/control")[0] == 404
    history = get_json(standby, f"{path}/history")
    assert history == script_json(runtime_config, "control history", job)
    assert [e["version"] for e in history["entries"]] == [0, 1, 2, 3, 4, 5]
    assert all(e["by"].endswith("(HTTP API)") for e in history["entries"])
    assert get_json(standby, f"{path}/history?last=2")["entries"][0]["version"] == 4
    assert change(path, {"values": {"stop": True}}, "PUT")[0] == 200
    assert client.wait(job, timeout=120).outcome == SUCCEEDED
