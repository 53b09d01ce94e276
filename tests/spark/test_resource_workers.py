"""Executor-side resources in real Python worker processes (os._exit, signals, forks), and their
counts in ZooKeeper."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from recovery.cli.main import cli
from recovery.driver.resource_declaring import JobResources
from tests.cli import connection
from tests.helpers import REPO, connected, pause, wait_for
from tests.resource_jobs import Counting, events
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.errors import FenceLost
from zkstore.jobs.resources import ResourceReport, ResourceReports
from zkstore.layout import Layout
from zkstore.records.job_records import JobStatus
from zkstore.zookeeper.ops import Fence

pytestmark = pytest.mark.integration

PRELUDE = f"""
import functools, json, os, signal, sys, time
sys.path.insert(0, {str(REPO)!r})
from pyspark.taskcontext import TaskContext
from pyspark.accumulators import Accumulator
from recovery.executor.ref import CountsParam, ResourceRef
from recovery.executor.tasks import TaskFunction
from recovery.driver.resource_declaring import pickle_by_value
from tests import resource_jobs

OUT = sys.argv[1]

def in_task(task_id, stage=1, partition=0):
    TaskContext._setTaskContext(None)
    TaskContext(stageId=stage, partitionId=partition, taskAttemptId=task_id)

def task_over():
    # what pyspark does after a task, and before waiting for the next one
    TaskContext._setTaskContext(None)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

def make_ref(attempt=1, idle_timeout=20.0, counts=None):
    payload = pickle_by_value(
        (functools.partial(resource_jobs.open_tracked, OUT), resource_jobs.close_tracked), "t")
    return ResourceRef("job", attempt, "db", payload, idle_timeout, counts)

def say(line):
    print(line, flush=True)
"""


def run_worker(out: Path, body: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    script = out.parent / f"worker-{out.name}.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    out.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "SPARK_REUSE_WORKER"}
    return subprocess.Popen(
        [sys.executable, str(script), str(out)],
        stdout=subprocess.PIPE,
        text=True,
        env={**environment, **(env or {})},
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    output, _ = process.communicate(timeout=60)
    return process.returncode, output


def test_worker_exit_through_os_exit_closes(tmp_path: Path) -> None:
    out = tmp_path / "exit"
    code, _ = finish(
        run_worker(
            out,
            """
            in_task(1)
            make_ref().get()
            task_over()
            os._exit(0)  # how pyspark's daemon ends a worker
            """,
        )
    )
    assert code == 0
    found = events(out)
    assert len(found["open"]) == len(found["close"]) == 1 and not found["double"]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_stop_signal_right_after_pyspark_reset_it_closes_then_dies_of_it(
    tmp_path: Path, signum: int
) -> None:
    """pyspark resets SIGHUP/SIGTERM to the default as a worker starts waiting for its next task,
    and the daemon's SIGHUP can follow at once: the reset itself installs the handler, with the
    watcher thread held back (as a loaded machine holds it; the soak saw a worker die there)."""
    out = tmp_path / f"signal-{signum}"
    code, _ = finish(
        run_worker(
            out,
            f"""
            from recovery.executor import hooks
            hooks.WATCH_EVERY = 3600.0  # the watcher never gets to run
            in_task(1)
            make_ref().get()
            task_over()
            os.kill(os.getpid(), {int(signum)})  # handled before the next line runs
            say("still alive")
            """,
        )
    )
    assert code == -signum, "the worker dies of the signal, as it would have"
    found = events(out)
    assert len(found["open"]) == len(found["close"]) == 1


def test_a_reset_that_bypasses_the_wrapper_is_undone_by_the_watcher(tmp_path: Path) -> None:
    """The fallback: a disposition set to the default by the original ``signal.signal`` (code
    that kept a reference to it) is put back by the watcher within its period."""
    out = tmp_path / "bypass"
    process = run_worker(
        out,
        """
        from recovery.executor import hooks
        in_task(1)
        make_ref().get()
        TaskContext._setTaskContext(None)
        hooks._set_disposition(signal.SIGHUP, signal.SIG_DFL)
        while signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            time.sleep(0.01)  # the main thread waits, as a worker waits for its next task
        say("armed")
        while True:
            time.sleep(0.05)
        """,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "armed"
    process.send_signal(signal.SIGHUP)
    code, _ = finish(process)
    assert code == -signal.SIGHUP
    found = events(out)
    assert len(found["open"]) == len(found["close"]) == 1


def test_somebody_elses_handler_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "theirs"
    code, output = finish(
        run_worker(
            out,
            """
            def theirs(signum, frame):
                say("their handler")
            signal.signal(signal.SIGHUP, theirs)
            in_task(1)
            make_ref().get()
            say(signal.getsignal(signal.SIGHUP) is theirs)
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.1)
            """,
        )
    )
    assert code == 0 and output.split() == ["True", "their", "handler"]


def test_a_forked_child_never_closes_its_parents_instance(tmp_path: Path) -> None:
    out = tmp_path / "fork"
    code, output = finish(
        run_worker(
            out,
            """
            in_task(1)
            ref = make_ref()
            parent = ref.get().ident
            child = os.fork()
            if child == 0:
                say(ref.get().ident != parent)
                os._exit(0)
            os.waitpid(child, 0)
            os._exit(0)
            """,
        )
    )
    assert code == 0 and output.strip() == "True"
    found = events(out)
    assert len(found["open"]) == len(found["close"]) == 2
    opened_by = {e["ident"]: e["pid"] for e in found["open"]}
    assert all(opened_by[e["ident"]] == e["pid"] for e in found["close"]), "each closed its own"


@pytest.mark.parametrize("reuse", ["", "1"])
def test_end_of_task_close_without_worker_reuse(tmp_path: Path, reuse: str) -> None:
    out = tmp_path / f"reuse-{reuse or 'off'}"
    code, output = finish(
        run_worker(
            out,
            """
            counts = Accumulator(1, {}, CountsParam())
            ref = make_ref(counts=counts)
            in_task(5)
            def run(rows):
                ref.get()
                yield from rows
            assert list(TaskFunction(run, "job", 1)(iter([1, 2]))) == [1, 2]
            say(json.dumps(counts.value, sort_keys=True))
            task_over()
            os._exit(0)
            """,
            env={"SPARK_REUSE_WORKER": reuse},
        )
    )
    assert code == 0
    reported = json.loads(output)
    found = events(out)
    assert len(found["open"]) == len(found["close"]) == 1
    if reuse:
        assert reported == {"opens": 1, "uses": 1}, "closed at exit, after the task reported"
    else:
        assert reported == {"closes": 1, "opens": 1, "uses": 1}, "closed within the task"


def test_a_failed_task_closes_before_the_worker_leaves(tmp_path: Path) -> None:
    out = tmp_path / "failed"
    code, output = finish(
        run_worker(
            out,
            """
            ref = make_ref()
            in_task(5)
            def run(rows):
                ref.get()
                raise RuntimeError("row 3 is bad")
            try:
                TaskFunction(run, "job", 1)(iter([]))
            except RuntimeError:
                say(len(os.listdir(OUT)))
            """,
            env={"SPARK_REUSE_WORKER": "1"},
        )
    )
    assert code == 0 and output.strip() == "2", "open and close marks, before the exit"


def test_idle_resource_closes_in_a_waiting_worker(tmp_path: Path) -> None:
    out = tmp_path / "idle"
    process = run_worker(
        out,
        """
        in_task(1)
        make_ref(idle_timeout=0.3).get()
        task_over()
        say("waiting")
        time.sleep(60)
        """,
    )
    try:
        wait_for(lambda: events(out)["close"], timeout=30, what="idle close")
    finally:
        process.kill()
        process.communicate(timeout=30)
    assert len(events(out)["open"]) == 1


def test_counts_are_written_fenced_and_shown(config: StoreConfig) -> None:
    with Cluster.open(config) as cluster:
        cluster.state.put_status("job", JobStatus(version=None, attempt=2), expected_version=None)
        guard = f"{cluster.layout.job_dir('job')}/guard"
        cluster.zk.create(guard, b"")
        reports = ResourceReports(cluster.zk, cluster.layout, "job")
        resources = JobResources(
            "job", 2, Counting, reports=reports, fence=Fence.check(guard), publish_every=0.05
        )
        ref = resources.declare("db", dict)
        ref.accumulator.add({"opens": 2, "uses": 24})
        wait_for(lambda: reports.read() is not None, timeout=30, what="first report")
        shown = CliRunner().invoke(cli, ["jobs", "show", "job", *connection(config)])
        assert "resource db: 2 opens, 0 closes, 0 failed opens, 24 uses (attempt 2)" in (
            shown.output
        )
        cluster.zk.delete(guard)  # the attempt loses its standing
        resources.finish()
        report = reports.read()
        assert report is not None and not report.final, "a fenced-out driver writes nothing"
        with pytest.raises(FenceLost):
            reports.write(ResourceReport.build(2, {}, final=True), fence=Fence.check(guard))
        cluster.zk.set(reports.path, b"{not json")
        corrupt = CliRunner().invoke(
            cli, ["jobs", "show", "job", "--format", "json", *connection(config)]
        )
        assert corrupt.exit_code == 0
        item = json.loads(corrupt.output)
        assert item["resources"] is None and "resources" in item["record_errors"]


def test_counts_outlive_a_zookeeper_outage(
    private_zk_server: EmbeddedZooKeeper,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server stops answering while the driver publishes: it says so, and publishes later."""
    zk = connected(private_zk_server.connect_string, session_timeout=10, timeout=1.0)
    try:
        layout = Layout("/outage")
        zk.ensure_path(layout.job_dir("job"))
        reports = ResourceReports(zk, layout, "job")
        resources = JobResources("job", 1, Counting, reports=reports, publish_every=3600)
        ref = resources.declare("db", dict)
        ref.accumulator.add({"opens": 1, "uses": 3})
        pid = private_zk_server.pid
        assert pid is not None
        # Until every thread of the JVM has stopped, it may still answer: the write went
        # through once in about fifteen full runs when the publish followed the signal at once.
        pause(pid, timeout=zk.timeout)
        try:
            with caplog.at_level(logging.WARNING):
                resources.publish(final=False)  # never raises
        finally:
            os.kill(pid, signal.SIGCONT)
        assert zk.wait_connected(15)
        assert "resource counts not written (will retry)" in caplog.text, caplog.text
        resources.finish()
        report = reports.read()
        assert report is not None and report.final
        assert report.resources["db"] == {"opens": 1, "closes": 0, "failed_opens": 0, "uses": 3}
    finally:
        os.kill(private_zk_server.pid or 0, signal.SIGCONT)
        zk.stop()
