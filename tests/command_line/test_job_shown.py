"""Issue 27: what ``jobs show`` says of a job's definition and attempts (pure)."""

from __future__ import annotations

import io
import zipfile

import pytest

from zkstore.jobs.definition import JobDefinition, ShippedFile
from zkstore.jobs.shown import (
    MAX_CONF_BYTES,
    REDACTED,
    args_text,
    conf_text,
    cut,
    read_conf_text,
    zipped_modules,
)
from zkstore.records.result_records import JobResult
from zkstore.records.strict import parse_time
from zkstore.service.job_view import attempts_text

pytestmark = pytest.mark.unit


def test_texts_are_cut_with_an_ellipsis_within_their_bytes() -> None:
    assert cut("short", 10) == "short"
    long = "é" * 200
    shown = cut(long, 50)
    assert shown.endswith("…") and len(shown.encode()) <= 50


def test_script_arguments_as_a_shell_takes_them_function_arguments_as_python() -> None:
    assert args_text(["--day", "2024-01-01", "two words"], script=True) == (
        "--day 2024-01-01 'two words'"
    )
    assert args_text(["a", 3, {"k": 1}], script=False) == "'a', 3, {'k': 1}"
    assert args_text([], script=True) is None

    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert args_text([Bad()], script=False) == "<Bad>"


def test_spark_properties_with_secrets_redacted() -> None:
    conf = {
        "spark.executor.memory": "1g",
        "spark.hadoop.fs.s3a.secret.key": "hunter2",
        "spark.hadoop.fs.s3a.access.key": "AKIA",
        "spark.ssl.keyPassword": "pw",
        "spark.authenticate.token": "t",
    }
    shown = conf_text(conf)
    assert shown is not None
    assert "1g" in shown and "hunter2" not in shown and "AKIA" not in shown and "pw," not in shown
    assert shown.count(REDACTED) == 4
    assert conf_text({}) is None


def test_spark_properties_read_back_from_their_text_and_what_was_cut() -> None:
    conf = {
        "spark.jars": "a.jar,b.jar",
        "spark.driver.extraJavaOptions": "-Da=1 -Db=2",
        "spark.hadoop.fs.s3a.secret.key": "hunter2",
        "spark.app.name": "a, b",
    }
    assert read_conf_text(conf_text(conf) or "") == (
        {**conf, "spark.hadoop.fs.s3a.secret.key": REDACTED},
        None,
    )
    long = {"spark.a": "x", "spark.b": "y" * MAX_CONF_BYTES, "spark.c": "z"}
    pairs, cut_key = read_conf_text(conf_text(long) or "")
    assert cut_key == "spark.b" and pairs["spark.a"] == "x" and "spark.c" not in pairs
    assert pairs["spark.b"] and long["spark.b"].startswith(pairs["spark.b"])
    cut_in_key = conf_text(
        {"spark.a": "x" * (MAX_CONF_BYTES - 20), "spark.bbbbbbbbbbbbbbbbbbb": "1"}
    )
    assert read_conf_text(cut_in_key or "") == ({"spark.a": "x" * (MAX_CONF_BYTES - 20)}, "spark.a")
    assert read_conf_text("") == ({}, None)


def test_the_modules_in_a_modules_zip() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("helpers.py", "")
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/sub.py", "")
    assert zipped_modules(buffer.getvalue()) == "helpers, pkg/"
    assert zipped_modules(b"not a zip") is None


def test_the_summary_carries_them_and_fits_a_handle() -> None:
    definition = JobDefinition.for_function(
        "job",
        print,
        args=["x" * 5000],
        spark_conf={f"spark.k{i}": "v" * 100 for i in range(50)},
        files=[
            ShippedFile("zkstore-modules.zip", "modules", _zip(*(f"m{i}.py" for i in range(80))))
        ],
    )
    summary = definition.summary()
    assert str(summary["args"]).startswith("'xxx") and str(summary["args"]).endswith("…")
    assert str(summary["conf"]).endswith("…") and str(summary["modules"]).endswith("…")
    assert sum(len(str(v).encode()) for v in summary.values()) < 1024


def test_attempts_in_words_lost_apart_from_failed() -> None:
    item = {"attempt": 3, "failures": 0, "lost": 2, "max_attempts": 3, "max_lost_attempts": 10}
    assert attempts_text(item) == (
        "3 (2 lost to the infrastructure); failures 0 of 3 allowed, losses 2 of 10"
    )
    item = {**item, "failures": 1, "lost": 1}
    assert attempts_text(item) == (
        "3 (1 lost to the infrastructure, 1 failed); failures 1 of 3 allowed, losses 1 of 10"
    )
    assert attempts_text({**item, "attempt": 0}) is None


def test_a_result_keeps_the_daemon_and_the_counters_and_reads_old_results() -> None:
    result = JobResult(
        version=None,
        job_id="j",
        outcome="SUCCEEDED",
        attempts=2,
        finished=parse_time("2026-01-01T00:00:00.000Z"),
        daemon="d1",
        failures=0,
        lost=1,
    )
    back = JobResult.from_znode(result.to_bytes(), None, "/r")
    assert (back.daemon, back.failures, back.lost) == ("d1", 0, 1)
    old = (
        b'{"job_id":"j","state":"DIRTY","outcome":"FAILED","attempts":1,'
        b'"finished":"2026-01-01T00:00:00.000Z"}'
    )
    assert JobResult.from_znode(old, None, "/r").daemon is None


def _zip(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(name, "")
    return buffer.getvalue()


def test_a_running_jobs_error_is_none_whatever_an_earlier_attempt_left() -> None:
    """Issue 50: attempt 1 failed, attempt 2 runs (here paused, then being stopped): the
    ERROR column shows nothing; the earlier error stays the labelled ``last_error``."""
    from zkstore.jobs.control.control_records import ControlAck
    from zkstore.jobs.snapshot import JobSnapshot
    from zkstore.jobs.stops import StopRequest
    from zkstore.records.job_records import JobStatus, RunningInfo
    from zkstore.service.job_view import describe, job_error

    now = "2026-11-28T00:00:00Z"
    status = JobStatus(
        version=3, state="STARTING", attempt=2, updated=parse_time(now), last_error="boom"
    )
    running = RunningInfo(version=0, attempt=2, host="h", pid=7, started=parse_time(now))
    paused = ControlAck(version=0, attempt=2, applied_version=0, paused=True)
    for snapshot in (
        JobSnapshot("j", status=status, running=running),
        JobSnapshot("j", status=status, running=running, control=paused),
        JobSnapshot(
            "j",
            status=status,
            running=running,
            stop=StopRequest(version=0, requested=parse_time(now), by="me", reason="r"),
        ),
    ):
        assert job_error(snapshot) is None, snapshot.state
        assert describe(snapshot)["last_error"] == "boom"
    waiting = JobStatus(
        version=4, state="RESTARTING", attempt=1, updated=parse_time(now), last_error="boom"
    )
    assert job_error(JobSnapshot("j", status=waiting)) == "boom", "between attempts: its error"
