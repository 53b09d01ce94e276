"""What an operator sees: the daemon's own log at its default level, the HTTP side through a
ZooKeeper outage, and a status page that shows anybody's text as text."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from recovery.daemon import CONNECT_RETRY
from recovery.dev.localcluster import DaemonProcess, LocalCluster
from tests import jobs
from tests.helpers import hands_client, holds_for, wait_for
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.records.job_states import SUCCEEDED

pytestmark = pytest.mark.e2e


def status(daemon: DaemonProcess, path: str) -> tuple[int | None, bytes]:
    assert daemon.url is not None
    try:
        with urllib.request.urlopen(daemon.url + path, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except urllib.error.URLError:
        return None, b""


def test_default_log_tells_the_story_and_an_outage_is_not_a_flood(tmp_path: Path) -> None:
    """A daemon without -v logs leadership and each job's life with id, attempt and host; a
    ZooKeeper outage costs a few lines, not one per second, and the HTTP side keeps answering
    (503 where it needs ZooKeeper) until it is over."""
    server = EmbeddedZooKeeper().start()
    config = StoreConfig(
        zk_hosts=server.connect_string,
        root="/outage",
        storage_url=f"file://{tmp_path}/storage",
        session_timeout=3.0,
        timeout=2.0,
    )
    local = LocalCluster(config, tmp_path / "rt", restart_backoff=0.2, http=True, verbose=False)
    try:
        daemon = local.start_daemon("quiet")
        local.wait_for_leader()
        with hands_client(config) as client:
            job = client.submit_function(jobs.steps, str(tmp_path / "out"), 2, 0.0, job_id="story")
            assert client.wait(job, timeout=60).outcome == SUCCEEDED
        host = socket.gethostname()
        log = wait_for(lambda: "cleaned up" in (t := daemon.log()) and t, timeout=60, what="log")
        for line in (
            "daemon quiet is the leader",
            "leadership taken: ",
            "job story: attempt 1 placed on quiet",
            f"job story: attempt 1 started on {host}, driver pid ",
            "job story: SUCCEEDED after 1 attempt(s) (last on ",
        ):
            assert line in log, line
        assert " DEBUG " not in log
        before = len(daemon.log().splitlines())
        server.stop()
        wait_for(lambda: status(daemon, "/health")[0] == 503, timeout=60, what="/health 503")
        # The daemon retries every second or two all this while (CONNECT_RETRY, the loop's
        # retry); over several of its retries the HTTP side keeps answering.
        holds_for(
            lambda: status(daemon, "/health")[0] == 503,
            3 * CONNECT_RETRY,
            interval=0.5,
            what="/health answering 503 through the outage",
        )
        code, body = status(daemon, "/metrics")
        assert code == 200 and b"zkstore_zookeeper_up 0.0" in body
        assert status(daemon, "/api/v1/jobs")[0] == 503
        page_code, page = status(daemon, "/")
        assert page_code == 503 and b"ZooKeeper" in page
        outage = daemon.log().splitlines()[before:]
        warnings = [line for line in outage if " WARNING " in line]
        assert len(warnings) <= 4, "\n".join(warnings)
        server.start()
        wait_for(lambda: status(daemon, "/leader")[0] == 200, timeout=90, what="leading again")
        assert json.loads(status(daemon, "/health")[1])["zookeeper"] == "connected"
    finally:
        local.stop()
        server.close()


def test_daemon_http_settings_fail_as_usage_errors_without_showing_the_token(
    tmp_path: Path,
) -> None:
    """A bad --http, a token too short to be safe, an explicit address in use: exit 2, one
    line, before anything else happens (ZooKeeper is not even reachable here)."""
    zkstore = str(Path(sys.executable).parent / "zkstore")
    base = [zkstore, "daemon", "--zk", "127.0.0.1:1", "--storage", f"file://{tmp_path}/s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKSTORE_")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for extra, extra_env, message in (
            (["--http", "nowhere"], {}, "invalid HTTP address 'nowhere'"),
            (["--http", "off"], {"ZKSTORE_API_TOKEN": "short-secret"}, "is too short"),
            (["--http", f"127.0.0.1:{port}"], {}, f"cannot serve HTTP on 127.0.0.1:{port}"),
        ):
            done = subprocess.run(
                base + extra, env={**env, **extra_env}, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 2, done.stderr
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("zkstore: usage error: ") and message in last, done.stderr
            assert "short-secret" not in done.stderr + done.stdout
            assert "Traceback" not in done.stderr


def test_a_second_daemon_on_the_default_port_runs_and_says_the_fix(
    runtime_config: StoreConfig, tmp_path: Path
) -> None:
    """Issue 49.8: two daemons on one host, the second without ``--http``, met on the shared
    default port. The second runs without the HTTP side and says so, naming the fix, as its
    ``--http`` given explicitly would have refused to start (the test above)."""
    from recovery.settings import DEFAULT_HTTP
    from tests.cli import BIN, connection, read_until, with_credentials, zkstore

    host, port = DEFAULT_HTTP.rsplit(":", 1)
    first = socket.socket()  # the first daemon's address
    try:
        first.bind((host, int(port)))
        first.listen()
    except OSError:  # something on this host serves there already: in use all the same
        pass
    env = with_credentials(runtime_config, {**os.environ, "TMPDIR": str(tmp_path)})
    env["ZKSTORE_JOBS_MAY_READ_SECRETS"] = "1"  # with ZKSTORE_TEST_CREDENTIALS: drivers as root
    daemon = subprocess.Popen(
        [str(BIN / "zkstore"), "daemon", *connection(runtime_config), "--id", "second"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    try:
        seen: list[str] = []
        read_until(daemon.stderr, "running without the HTTP API", seen)
        assert f"cannot serve HTTP on {DEFAULT_HTTP}" in seen[-1], seen
        assert "(--http HOST:PORT or off)" in seen[-1], seen
        wait_for(
            lambda: "second" in zkstore(runtime_config, "daemons list").stdout,  # in this process
            timeout=60,
            what="the second daemon in the fleet",
        )
        daemon.terminate()
        daemon.communicate(timeout=60)
    finally:
        first.close()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0
