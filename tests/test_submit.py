"""The HA submit wrapper from the command line and from Python: bad input, exit codes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import recovery
from recovery.cli import cli
from recovery.dev.localcluster import LocalCluster
from tests import jobs
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.handle import Handle
from zkstore.jobs.definition import JobDefinition
from zkstore.jobs.states import FAILED, SUCCEEDED

BIN = Path(sys.executable).parent


def args(config: StoreConfig) -> list[str]:
    return ["--zk", config.zk_hosts, "--root", config.root, "--storage", config.storage_url]


def submit(config: StoreConfig, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "zkstore"), "submit", *words[:1], *args(config), *words[1:]],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (None, "missing.py", "missing.py: no such file"),
        ("def other(ctx): pass\n", "{file}:run", "defines no function 'run'"),
        ("def run(ctx:\n", "{file}:run", "syntax error"),
        ("def run(ctx:\n", "{file}", "syntax error"),
        ("import no_such_module_here\n", "{file}:run", "importing it failed: ModuleNotFoundError"),
        (
            "import threading\nLOCK = threading.Lock()\ndef run(ctx):\n    return LOCK\n",
            "{file}:run",
            "cannot serialize",
        ),
    ],
    ids=[
        "no-file",
        "no-function",
        "syntax-function",
        "syntax-script",
        "import-error",
        "unpicklable",
    ],
)
def test_bad_submissions_fail_clearly_and_store_nothing(
    config: StoreConfig, tmp_path: Path, source: str | None, target: str, message: str
) -> None:
    file = tmp_path / "job.py"
    if source is not None:
        file.write_text(source)
    done = submit(config, target.format(file=file))
    assert done.returncode in (1, 2), done
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    with Cluster.open(config) as cluster:
        assert cluster.jobs.job_ids() == []
        assert cluster.storage.list(cluster.storage_layout.jobs) == []


def test_bad_options_are_usage_errors(config: StoreConfig, tmp_path: Path) -> None:
    file = tmp_path / "job.py"
    file.write_text("def run(ctx): pass\n")
    bad_conf = submit(config, f"{file}:run", "--conf", "novalue")
    assert bad_conf.returncode == 2 and "not key=value" in bad_conf.stderr
    bad_id = submit(config, f"{file}:run", "--job-id", "../escape")
    assert bad_id.returncode == 2 and "invalid job id" in bad_id.stderr
    runner = CliRunner()
    unknown = runner.invoke(cli, ["jobs", "list", "--zk", config.zk_hosts, "--storage", "xyz://b"])
    assert unknown.exit_code == 2 and "Protocol not known: xyz" in unknown.output


def test_handle_pointing_outside_the_storage_root_is_refused(
    config: StoreConfig, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.pkl"
    outside.write_bytes(b"not yours")
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("j", jobs.sleeper))
        node = cluster.layout.job_handle("j")
        evil = Handle(
            uri=f"file://{outside}",
            size=9,
            sha256=hashlib.sha256(b"not yours").hexdigest(),
            created="2026-11-21T00:00:00Z",
            writer="attacker",
        )
        cluster.zk.set(node, evil.to_bytes())
        with pytest.raises(UntrustedPayload, match="is not where the payloads of"):
            cluster.jobs.recover("j")


@pytest.fixture
def daemon(config: StoreConfig, tmp_path: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(config, tmp_path / "runtime", restart_backoff=0.1)
    local.start_daemon("d1")
    yield local
    local.stop()


def test_submit_wait_exits_with_the_outcome(
    config: StoreConfig, tmp_path: Path, daemon: LocalCluster
) -> None:
    file = tmp_path / "flaky.py"
    file.write_text(
        "def run(ctx, succeed):\n"
        "    if succeed != 'yes':\n"
        "        raise ValueError('bad input data')\n"
    )
    ok = submit(config, f"{file}:run", "--job-id", "ok", "--wait", "--", "yes")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "ok"
    assert "ok: SUCCEEDED after 1 attempt(s)" in ok.stderr
    assert "RUNNING" in ok.stderr or "STARTING" in ok.stderr, "progress is shown"
    failed = submit(
        config, f"{file}:run", "--job-id", "ko", "--max-attempts", "2", "--wait", "--", "no"
    )
    assert failed.returncode == 1
    assert "ko: FAILED after 2 attempt(s): ValueError: bad input data" in failed.stderr


def test_python_api_submit_and_wait(
    config: StoreConfig, tmp_path: Path, daemon: LocalCluster
) -> None:
    result = recovery.submit(
        jobs.steps, str(tmp_path / "out"), 2, 0.01, wait=True, config=config, job_id="api"
    )
    assert not isinstance(result, str) and result.outcome == SUCCEEDED
    with recovery.Client(config) as client:
        job_id = client.submit_function(jobs.flaky, str(tmp_path / "f"), 5, max_attempts=1)
        assert client.wait(job_id, timeout=60).outcome == FAILED
        with pytest.raises(recovery.JobNotFound):
            client.status("never-submitted")
