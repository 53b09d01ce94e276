"""The HTTP side against hostile requests, through real HTTP to real daemon processes: bodies
the JSON parser cannot take, Host names that are not the daemon's (DNS rebinding), the read
token, and what held already (auth on every change, no CORS, 413)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from recovery.client.api import Client
from recovery.dev.localcluster import DaemonProcess, LocalCluster, free_port
from recovery.observe.access import AllowedHosts
from recovery.observe.server import is_loopback
from recovery.settings import READ_TOKEN_ENV, api_token_from_env, parse_allowed_hosts
from tests import jobs
from tests.helpers import http_status, wait_for
from zkstore.config import SECRET_ENV_VARS, StoreConfig
from zkstore.errors import ConfigError
from zkstore.records.job_states import RUNNING

TOKEN = "change-t0ken-" + "c" * 20
READ_TOKEN = "read-t0ken-" + "r" * 20
ALL_SECRETS = (TOKEN, READ_TOKEN)


def request(
    url: str,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request (error statuses included, never raised)."""
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def up(daemon: DaemonProcess) -> None:
    wait_for(
        lambda: http_status(daemon, "/health") == 200,
        timeout=60,
        what=f"HTTP of {daemon.daemon_id} up",
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


#: The tests here that take ``web`` get d1 serving HTTP with a change and a read token.
pytestmark = [pytest.mark.e2e, pytest.mark.web("d1")]


@pytest.fixture
def web_env() -> dict[str, str]:
    return {"ZKSTORE_API_TOKEN": TOKEN, "ZKSTORE_API_READ_TOKEN": READ_TOKEN}


@pytest.fixture
def running_job(web: LocalCluster, client: Client, tmp_path: Path) -> str:
    job = client.submit_function(jobs.sleeper, str(tmp_path / "out"), 300.0, job_id="sleepy")
    wait_for(lambda: client.status(job).state == RUNNING, timeout=60, what="running")
    return job


CHANGES = (
    ("POST", "/cancel"),
    ("PUT", "/control"),
    ("POST", "/control/pause"),
    ("POST", "/control/resume"),
    ("POST", "/control/checkpoint"),
    ("POST", "/control/log-level"),
)

DEEP = 30_000
HOSTILE_BODIES = (
    b"[" * DEEP + b"]" * DEEP,  # 60,000 bytes: a list 30,000 deep
    b'{"values": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,  # objects 10,000 deep
    b"[" * 60_000,  # unterminated, deep
    b'{"values": {"rate": {"deeper": {"still": 1}}}}',
    b'{"reason": "\xff\xfe"}',  # not UTF-8
    b"\x00\x01\x02",
    b'{"expect_version": NaN}',
    b'{"expect_version": 1e999}',
    b'"just a string"',
)


def test_a_body_the_parser_cannot_take_is_a_400_never_a_500(
    web: LocalCluster, client: Client, running_job: str
) -> None:
    """Every change route, every hostile body under 64 KB, with a valid token: 400 with a JSON
    error, nothing stored, no traceback in the daemon's log (on the base commit: 500 and a
    RecursionError traceback for the deep ones)."""
    daemon = web.daemons["d1"]
    assert daemon.url is not None
    control = client.cluster.control(running_job)
    desired_before = control.desired()
    for method, route in CHANGES:
        for body in HOSTILE_BODIES:
            assert len(body) < 64 * 1024
            code, headers, answer = request(
                daemon.url,
                f"/api/v1/jobs/{running_job}{route}",
                method=method,
                body=body,
                headers={**bearer(TOKEN), "Content-Type": "application/json"},
            )
            assert code == 400, (route, body[:40], answer)
            assert headers["Content-Type"].startswith("application/json")
            assert json.loads(answer)["status"] == 400
    assert control.desired() == desired_before, "nothing refused changed anything"
    assert client.status(running_job).cancel is None
    log = daemon.log()
    assert "Traceback" not in log and "RecursionError" not in log and "failed" not in log


def test_requests_for_another_host_name_are_refused(
    web: LocalCluster, client: Client, running_job: str
) -> None:
    """A DNS-rebinding page sends its own name as Host: 421 on every route, reads and changes
    alike, with the token or without; localhost and addresses, with a port or without, are
    answered (on the base commit, every route answered ``evil.example``)."""
    daemon = web.daemons["d1"]
    assert daemon.url is not None
    port = daemon.url.rsplit(":", 1)[1]
    reads = (
        "/",
        "/health",
        "/leader",
        "/metrics",
        "/api/v1/cluster",
        "/api/v1/jobs",
        f"/api/v1/jobs/{running_job}",
        f"/api/v1/jobs/{running_job}/logs",
        f"/api/v1/jobs/{running_job}/control",
        f"/api/v1/jobs/{running_job}/control/history",
    )
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "d1", "a@b"):
        for path in reads:
            code, headers, answer = request(
                daemon.url, path, headers={"Host": host, **bearer(READ_TOKEN)}
            )
            assert code == 421, (host, path, answer)
            assert headers["Content-Type"].startswith("application/json")
            assert json.loads(answer)["status"] == 421
            assert running_job.encode() not in answer
        code, _, _ = request(
            daemon.url,
            f"/api/v1/jobs/{running_job}/cancel",
            method="POST",
            headers={"Host": host, **bearer(TOKEN)},
        )
        assert code == 421
    assert client.status(running_job).cancel is None, "a refused change changed nothing"
    for host in (
        f"localhost:{port}",
        "localhost",
        "LOCALHOST.",
        f"127.0.0.1:{port}",
        "127.0.0.1",
        f"[::1]:{port}",
        "10.1.2.3:8780",
    ):
        code, _, answer = request(
            daemon.url, f"/api/v1/jobs/{running_job}", headers={"Host": host, **bearer(READ_TOKEN)}
        )
        assert code == 200, (host, answer)


def test_allowed_host_names_from_the_option_and_the_environment(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    cluster = LocalCluster(runtime_config, tmp_path / "rt", http=True)
    try:
        by_option = cluster.start_daemon("d1", "--http-allowed-hosts", "zk.example.com,.corp.test")
        cluster.extra_env["ZKSTORE_HTTP_ALLOWED_HOSTS"] = "env.example"
        by_env = cluster.start_daemon("d2")
        for daemon in (by_option, by_env):
            up(daemon)
        assert by_option.url is not None and by_env.url is not None
        for daemon, host, expected in (
            (by_option, "zk.example.com", 200),
            (by_option, "ZK.example.com:443", 200),
            (by_option, "corp.test", 200),
            (by_option, "a.b.corp.test:80", 200),
            (by_option, "zk.example.com.evil.example", 421),
            (by_option, "evilcorp.test", 421),
            (by_option, "env.example", 421),
            (by_env, "env.example:8780", 200),
            (by_env, "zk.example.com", 421),
            (by_env, "localhost", 200),
        ):
            code = request(daemon.url, "/api/v1/jobs", headers={"Host": host})[0]
            assert code == expected, (daemon.daemon_id, host)
        bad = cluster.start_daemon("d3", "--http-allowed-hosts", "not a name!")
        assert bad.process.wait(timeout=60) == 2
        assert "not a name" in bad.log() and "Traceback" not in bad.log()
    finally:
        cluster.stop()


def test_the_read_token_guards_details_logs_and_control(
    web: LocalCluster, running_job: str
) -> None:
    """With ZKSTORE_API_READ_TOKEN set: job details and lists, logs, control and its history
    need it (or the change token); no token, an empty one, a wrong one, one in the query
    string or as Basic: 401. Health, leadership, metrics, the cluster and the page stay open.
    The read token changes nothing."""
    daemon = web.daemons["d1"]
    assert daemon.url is not None
    guarded = (
        "/api/v1/jobs",
        f"/api/v1/jobs/{running_job}",
        f"/api/v1/jobs/{running_job}/logs",
        f"/api/v1/jobs/{running_job}/control",
        f"/api/v1/jobs/{running_job}/control/history",
    )
    refused: tuple[tuple[str, dict[str, str]], ...] = (
        ("", {}),
        ("", {"Authorization": "Bearer "}),
        ("", {"Authorization": "Bearer"}),
        ("", bearer("wrong-token-of-some-length")),
        ("", {"Authorization": f"Basic {READ_TOKEN}"}),
        ("", {"Authorization": READ_TOKEN}),
        (f"?token={READ_TOKEN}", {}),
        (f"?access_token={READ_TOKEN}", {}),
    )
    for path in guarded:
        for method in ("GET", "HEAD"):
            for query, headers in refused:
                code, answer_headers, answer = request(
                    daemon.url, path + query, method=method, headers=headers
                )
                assert code == 401, (path, method, query, headers)
                assert answer_headers["WWW-Authenticate"].startswith("Bearer")
                assert running_job.encode() not in answer
            for token in (READ_TOKEN, TOKEN):
                assert request(daemon.url, path, method=method, headers=bearer(token))[0] == 200
    for path in ("/health", "/leader", "/metrics", "/api/v1/cluster", "/"):
        assert request(daemon.url, path)[0] == 200, path
    for method, route in CHANGES:
        code, _, _ = request(
            daemon.url,
            f"/api/v1/jobs/{running_job}{route}",
            method=method,
            body=b'{"level": "DEBUG"}' if route.endswith("log-level") else None,
            headers=bearer(READ_TOKEN),
        )
        assert code == 401, route


def test_every_change_needs_the_change_token_and_nothing_else_opens_it(
    web: LocalCluster, client: Client, running_job: str
) -> None:
    """What held on the base commit keeps holding: every change route answers 401 to no token,
    an empty, a wrong or the read token, a token in the query string or as Basic; no CORS
    header on any answer, preflight included; 413 over 64 KB."""
    daemon = web.daemons["d1"]
    assert daemon.url is not None
    refused: tuple[tuple[str, dict[str, str]], ...] = (
        ("", {}),
        ("", {"Authorization": "Bearer "}),
        ("", bearer("wrong-token-of-some-length")),
        ("", bearer(READ_TOKEN)),
        ("", {"Authorization": f"Basic {TOKEN}"}),
        (f"?token={TOKEN}", {}),
    )
    origin = {"Origin": "http://evil.example"}
    for method, route in CHANGES:
        path = f"/api/v1/jobs/{running_job}{route}"
        for query, headers in refused:
            code, answer_headers, _ = request(
                daemon.url, path + query, method=method, headers={**headers, **origin}
            )
            assert code == 401, (route, query, headers)
            assert not any(h.lower().startswith("access-control-") for h in answer_headers)
        preflight = request(
            daemon.url,
            path,
            method="OPTIONS",
            headers={**origin, "Access-Control-Request-Method": method},
        )
        assert preflight[0] in (404, 405)
        assert not any(h.lower().startswith("access-control-") for h in preflight[1])
        code, _, _ = request(
            daemon.url, path, method=method, body=b" " * 70_000, headers=bearer(TOKEN)
        )
        assert code == 413, route
    assert client.status(running_job).cancel is None
    assert client.cluster.control(running_job).desired().version is None


def test_serving_beyond_loopback_without_a_read_token_is_warned_about(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    cluster = LocalCluster(runtime_config, tmp_path / "rt")
    try:
        wide = cluster.start_daemon("wide", "--http", f"0.0.0.0:{free_port()}")
        cluster.extra_env["ZKSTORE_API_READ_TOKEN"] = READ_TOKEN
        guarded = cluster.start_daemon("guarded", "--http", f"0.0.0.0:{free_port()}")
        cluster.extra_env.pop("ZKSTORE_API_READ_TOKEN")
        local = cluster.start_daemon("local", "--http", f"127.0.0.1:{free_port()}")
        for daemon in (wide, guarded, local):
            wait_for(lambda d=daemon: "HTTP API" in d.log(), timeout=60, what="HTTP up")
        assert "without ZKSTORE_API_READ_TOKEN" in wide.log()
        assert "without ZKSTORE_API_READ_TOKEN" not in guarded.log()
        assert "without ZKSTORE_API_READ_TOKEN" not in local.log()
        assert READ_TOKEN not in guarded.log()
    finally:
        cluster.stop()


def test_allowed_hosts_parse_and_match() -> None:
    hosts = AllowedHosts.of(parse_allowed_hosts("Zk1.Example.com., .corp.test,[::1]"), "x")
    assert hosts.allows("zk1.example.com:8780") and hosts.allows("ZK1.EXAMPLE.COM")
    assert hosts.allows("deep.a.corp.test") and hosts.allows("corp.test:1")
    assert hosts.allows("localhost:1") and hosts.allows("[fe80::1]:80") and hosts.allows(None)
    assert not hosts.allows("x") and not hosts.allows("zk1.example.com:99999")
    assert not hosts.allows("xcorp.test") and not hosts.allows("") and not hosts.allows("::1")
    assert AllowedHosts.of(None, "zk2.internal").allows("zk2.internal:8780")
    assert not AllowedHosts.of(None, "0.0.0.0").allows("zk2.internal")
    assert AllowedHosts.of(("*",), "0.0.0.0").allows("anything.example")
    for bad in ("a b", "host:80", "http://x", "", " , "):
        with pytest.raises(ConfigError):
            parse_allowed_hosts(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("zk1")


def test_a_short_read_token_is_refused_without_showing_it() -> None:
    short = "sh0rt-secret"
    with pytest.raises(ConfigError, match="ZKSTORE_API_READ_TOKEN is too short") as refused:
        api_token_from_env({READ_TOKEN_ENV: short}, variable=READ_TOKEN_ENV)
    assert short not in str(refused.value)
    assert api_token_from_env({READ_TOKEN_ENV: READ_TOKEN}, variable=READ_TOKEN_ENV) == READ_TOKEN
    assert api_token_from_env({}, variable=READ_TOKEN_ENV) is None
    assert READ_TOKEN_ENV in SECRET_ENV_VARS, "never passed on to drivers"


def test_the_status_page_shows_jobs_and_their_errors_only_with_the_read_token(
    web: LocalCluster, client: Client, tmp_path: Path
) -> None:
    """Issue 54 item 7: ``GET /`` showed every job's latest error to anybody while
    ``GET /api/v1/jobs/<id>`` needed the read token. Without it the page now shows what
    ``/api/v1/cluster`` does (the leader, the daemons, the count by state), and no job."""
    daemon = web.daemons["d1"]
    assert daemon.url is not None
    job = client.submit_function(
        jobs.flaky, str(tmp_path / "out"), 99, job_id="leaky-error", max_attempts=1
    )
    assert client.wait(job, timeout=120).outcome == "FAILED"
    error = b"attempt 1 fails on purpose"
    wait_for(  # the page lists it with its error once its cleanup is done
        lambda: error in request(daemon.url or "", "/", headers=bearer(READ_TOKEN))[2],
        timeout=60,
        what="the job's error on the status page, with the read token",
    )
    for headers in ({}, bearer("wrong-token-of-some-length"), {"Authorization": READ_TOKEN}):
        for method in ("GET", "HEAD"):
            code, _, page = request(daemon.url, "/", method=method, headers=headers)
            assert code == 200, headers
            assert error not in page and job.encode() not in page, headers
        assert b"need the read token" in request(daemon.url, "/", headers=headers)[2]
    assert b"FAILED" in request(daemon.url, "/")[2], "the count by state stays open"
