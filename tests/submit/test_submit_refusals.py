"""Submissions refused before anything is stored, options and paths checked, handles and Spark
records fenced: the command's logic, in this process."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import jobs
from tests.cli import BIN, zkstore
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.errors import UntrustedPayload
from zkstore.jobs.definition import JobDefinition
from zkstore.records.handle import Handle
from zkstore.records.strict import parse_time
from zkstore.zookeeper.zk import ZooKeeper

pytestmark = pytest.mark.integration

T0 = "2026-11-21T00:00:00Z"


@pytest.mark.parametrize(
    ("source", "target", "code", "message"),
    [
        (None, "missing.py", 2, "missing.py: no such file"),
        (None, "{dir}", 2, "is a directory: FILE must be a .py file"),
        ("a,b\n1,2\n", "{dir}/data.csv", 2, "data.csv is not a Python file"),
        ("def other(ctx): pass\n", "{file}:run", 2, "defines no function 'run'"),
        ("def run(ctx:\n", "{file}:run", 2, "syntax error"),
        ("def run(ctx:\n", "{file}", 2, "syntax error"),
        ("import no_such_module_here\n", "{file}:run", 2, "ModuleNotFoundError"),
        (
            "import threading\nLOCK = threading.Lock()\ndef run(ctx):\n    return LOCK\n",
            "{file}:run",
            1,
            "cannot serialize function run",
        ),
    ],
    ids=[
        "no-file",
        "directory",
        "not-python",
        "no-function",
        "syntax-function",
        "syntax-script",
        "import-error",
        "unpicklable",
    ],
)
def test_bad_submissions_fail_clearly_and_store_nothing(
    config: StoreConfig, tmp_path: Path, source: str | None, target: str, code: int, message: str
) -> None:
    file = tmp_path / ("data.csv" if "data.csv" in target else "job.py")
    if source is not None:
        file.write_text(source)
    done = zkstore(config, "submit", target.format(file=file, dir=tmp_path))
    assert done.returncode == code, done
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    with Cluster.open(config) as cluster:
        assert cluster.jobs.job_ids() == []
        assert cluster.storage.list(cluster.storage_layout.jobs) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--conf", "novalue"], "--conf 'novalue' is not KEY=VALUE"),
        (["--conf", "=x"], "--conf '=x' is not KEY=VALUE"),
        (["--conf", "executor.memory=1g"], "'executor.memory' is not a Spark property"),
        (["--job-id", ""], "invalid job id ''"),
        (["--job-id", "../escape"], "invalid job id '../escape'"),
        (["--name", ""], "job name must be 1-100 characters"),
        (["--py-files", "deps.txt"], "--py-files 'deps.txt': want a .py, .zip or .egg file"),
        (["--py-files", "gone.zip"], "--py-files 'gone.zip': no such file"),
        (["--files", "."], "--files '.' is a directory"),
        (["--files", "a.csv,sub/a.csv"], "two shipped files are named 'a.csv'"),
        (["--packages", "org.example:only-two"], "is not groupId:artifactId:version"),
    ],
)
def test_bad_options_are_usage_errors_naming_the_option(
    config: StoreConfig, laptop: Path, options: list[str], message: str
) -> None:
    (laptop / "job.py").write_text("def run(ctx): pass\n")
    (laptop / "deps.txt").write_text("x")
    (laptop / "a.csv").write_text("1")
    (laptop / "sub").mkdir()
    (laptop / "sub" / "a.csv").write_text("2")
    done = zkstore(config, "submit", "job.py:run", *options, cwd=laptop)
    assert done.returncode == 2, done
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    with Cluster.open(config) as cluster:
        assert cluster.jobs.job_ids() == [], "nothing stored, not even with a generated id"


def test_unknown_storage_protocol_is_a_usage_error(config: StoreConfig) -> None:
    # A command that uses the storage (jobs list reads ZooKeeper only since issue 27: it never
    # builds a storage, so it never looks at --storage).
    done = subprocess.run(
        [
            str(BIN / "zkstore"),
            "jobs",
            "show",
            "j",
            "--zk",
            config.zk_hosts,
            "--storage",
            "xyz://b",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Protocol not known: xyz" in done.stderr


def test_relative_paths_in_arguments_never_silently_mean_another_place(
    config: StoreConfig, laptop: Path
) -> None:
    (laptop / "job.py").write_text("def run(ctx, *paths): pass\n")
    (laptop / "sales.csv").write_text("day,amount\n1,2\n")
    (laptop / "in").mkdir()
    refused = zkstore(config, "submit", "job.py:run", "--", "sales.csv", cwd=laptop)
    assert refused.returncode == 2
    assert f"argument 'sales.csv' is {laptop / 'sales.csv'} here" in refused.stderr
    assert "ship it with --files sales.csv" in refused.stderr
    directory = zkstore(config, "submit", "job.py:run", "--", "in/", cwd=laptop)
    assert directory.returncode == 2 and "pass an absolute path or a URI" in directory.stderr
    shipped = zkstore(
        config, "submit", "job.py:run", "--files", "sales.csv", "--", "sales.csv", cwd=laptop
    )
    assert shipped.returncode == 0, shipped.stderr
    assert shipped.stderr == ""
    absolute = zkstore(config, "submit", "job.py:run", "--", str(laptop / "in"), cwd=laptop)
    assert absolute.returncode == 0, absolute.stderr
    warned = zkstore(config, "submit", "job.py:run", "--", "out/", "2026-11-21", cwd=laptop)
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.startswith("zkstore: warning: argument 'out/' looks like a relative")
    unchecked = zkstore(
        config, "submit", "job.py:run", "--no-path-check", "--", "sales.csv", cwd=laptop
    )
    assert unchecked.returncode == 0, unchecked.stderr


def test_control_values_are_flat_json_scalars(config: StoreConfig, tmp_path: Path) -> None:
    with Cluster.open(config) as cluster:
        cluster.jobs.submit(JobDefinition.for_function("j", jobs.sleeper))
    done = zkstore(
        config,
        "control set",
        "j",
        "spark.sql.shuffle.partitions=3",
        "rate=2.5",
        "on=true",
        "off=null",
        "note=a=b",
        "word=NaN",
    )
    assert done.returncode == 0, done.stderr
    read = zkstore(config, "control get", "j", "--format", "json")
    assert json.loads(read.stdout)["values"] == {
        "spark.sql.shuffle.partitions": 3,
        "rate": 2.5,
        "on": True,
        "off": None,
        "note": "a=b",
        "word": "NaN",
    }
    nested = zkstore(config, "control set", "j", 'limits={"max": 3}')
    assert nested.returncode == 2
    assert "control value 'limits={\"max\": 3}': a JSON object is not a scalar" in nested.stderr
    malformed = zkstore(config, "control set", "j", "novalue")
    assert malformed.returncode == 2 and "control value 'novalue' is not KEY=VALUE" in (
        malformed.stderr
    )


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


def test_the_spark_app_record_is_fenced_on_the_attempt(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, stand_in_session: Callable[[], ZooKeeper]
) -> None:
    """What a driver publishes about its Spark application, with no Spark: the application is
    given; the record, its fence and ZooKeeper are real."""
    from recovery.driver import sparkapp
    from zkstore.errors import FenceLost
    from zkstore.jobs.snapshot import read_snapshots
    from zkstore.records.job_records import RunningInfo, SparkApp
    from zkstore.zookeeper.ops import Create, Fence

    def app(app_id: str) -> SparkApp:
        return SparkApp(
            version=None, attempt=1, app_id=app_id, master="local[1]", started=parse_time(T0)
        )

    layout, zk = cluster.layout, cluster.zk
    cluster.jobs.submit(JobDefinition.for_function("j", jobs.sleeper))
    zk.ensure_path(layout.job_dir("j"))
    zk.create(layout.status("j"), b"{}")
    running = RunningInfo(version=None, attempt=1, host="h", pid=1, started=parse_time(T0))
    driver = stand_in_session()  # the driver's own session: running, and its records
    driver.commit([Create(layout.running("j"), running.to_bytes(), ephemeral=True)])
    fence = Fence.check(layout.status("j"), 0) + Fence.check(layout.running("j"), 0)
    monkeypatch.setattr(sparkapp, "current_app", lambda attempt: app("local-1"))
    monkeypatch.setattr(sparkapp, "CHECK_INTERVAL", 0.0)
    record = sparkapp.SparkAppRecord(zk, layout.spark("j"), 1, fence)
    record.refresh()
    shown = read_snapshots(zk, layout, ["j"])["j"]
    assert shown.spark == app("local-1").with_version(0), shown.errors
    zk.set(layout.status("j"), b"{}")  # a newer attempt was assigned: this one may not write
    monkeypatch.setattr(sparkapp, "current_app", lambda attempt: app("local-2"))
    record.refresh()
    assert record.published == app("local-1"), "the fenced write failed and is not taken as done"
    with pytest.raises(FenceLost):
        zk.commit([], fence=fence)
    record.withdraw()
    assert read_snapshots(zk, layout, ["j"])["j"].spark is None
