"""Executor-side resources without Spark: the registry, references, task scopes, the exit and
signal hooks (in real child processes that act like pyspark's workers), and the counts record.

The Spark runs (local mode, standalone, ``zkstore submit``) are in ``test_resources_spark.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.accumulators import Accumulator

from recovery.cli import cli
from recovery.executor import registry as registry_module
from recovery.executor.ref import CountsParam, ResourceRef
from recovery.executor.registry import Registry, ResourceKey
from recovery.executor.tasks import (
    TaskFunction,
    TaskInfo,
    TaskLogFilter,
    current_task_id,
    current_task_info,
)
from recovery.resources import JobResources, pickle_by_value
from tests import resource_jobs
from tests.helpers import wait_for
from tests.test_store import private_zk_server  # noqa: F401 - a fixture
from zkstore.cluster import Cluster
from zkstore.config import StoreConfig
from zkstore.dev.embedded import EmbeddedZooKeeper
from zkstore.errors import ConfigError, CorruptRecord, FenceLost, SerializationError
from zkstore.jobs import resources as report_module
from zkstore.jobs.records import JobStatus
from zkstore.jobs.resources import ResourceReport, ResourceReports
from zkstore.layout import Layout
from zkstore.ops import Fence
from zkstore.zk import ZooKeeper

REPO = Path(__file__).resolve().parent.parent
KEY = ResourceKey("job", 1, "db")


def opener(log: list[str], value: str = "v") -> Any:
    def open_() -> tuple[str, Any]:
        log.append(f"open {value}")
        return value, lambda: log.append(f"close {value}")

    return open_


# -- the registry ------------------------------------------------------------------------------


def test_concurrent_first_uses_open_once() -> None:
    registry = Registry()
    opened = threading.Event()
    log: list[str] = []

    def slow_open() -> tuple[object, Any]:
        log.append("open")
        opened.set()
        time.sleep(0.2)  # widens the window in which the other threads ask too
        return object(), lambda: log.append("close")

    start = threading.Barrier(8)
    results: list[object] = []

    def use() -> None:
        start.wait(timeout=30)
        results.append(registry.acquire(KEY, slow_open, idle_timeout=10, task=None))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert log == ["open"]
    assert len(results) == 8 and len({id(r) for r in results}) == 1
    assert registry.close_where(lambda _k: True, "test") == 1
    assert registry.close_where(lambda _k: True, "again") == 0, "closed exactly once"
    assert log == ["open", "close"]


def test_failed_open_is_not_cached_and_is_counted() -> None:
    registry = Registry()
    sink = Accumulator(1, {}, CountsParam())
    attempts: list[int] = []

    def flaky() -> tuple[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionRefusedError("refused (on purpose)")
        return "up", lambda: None

    with pytest.raises(ConnectionRefusedError, match="on purpose"):
        registry.acquire(KEY, flaky, idle_timeout=10, task=None, sink=sink)
    assert registry.open_keys() == []
    assert registry.acquire(KEY, flaky, idle_timeout=10, task=None, sink=sink) == "up"
    assert registry.acquire(KEY, flaky, idle_timeout=10, task=None, sink=sink) == "up"
    assert len(attempts) == 2
    assert sink.value == {"failed_opens": 1, "opens": 1, "uses": 2}, "every use outside a task"


def test_a_failing_close_still_ends_its_open_and_nothing_unopened_is_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry()
    sink = Accumulator(2, {}, CountsParam())

    def broken_close() -> None:
        raise OSError("socket already gone")

    registry.acquire(KEY, lambda: ("v", broken_close), idle_timeout=10, task=None, sink=sink)
    assert registry.close_where(lambda k: k.name == "other", "test") == 0
    with caplog.at_level(logging.WARNING):
        assert registry.close_where(lambda _k: True, "test") == 1
    assert "socket already gone" in caplog.text
    registry.flush(KEY, None)
    assert sink.value == {"opens": 1, "uses": 1, "closes": 1}


def test_idle_instances_close_unless_the_running_task_used_them() -> None:
    registry = Registry()
    log: list[str] = []
    registry.acquire(KEY, opener(log, "a"), idle_timeout=0.05, task=7)
    other = ResourceKey("job", 1, "cache")
    registry.acquire(other, opener(log, "b"), idle_timeout=0.05, task=6)
    time.sleep(0.1)  # both are past their idle timeout now
    assert registry.close_idle(running_task=7) == 1, "task 7 still runs and used 'a'"
    assert log == ["open a", "open b", "close b"]
    wait_for(lambda: registry.close_idle(running_task=None) == 1, timeout=10, what="idle close")
    assert log[-1] == "close a"


def test_a_newer_attempt_never_shares_and_supersedes_the_older() -> None:
    registry = Registry()
    log: list[str] = []
    first = registry.acquire(KEY, opener(log, "one"), idle_timeout=10, task=1)
    second = registry.acquire(
        ResourceKey("job", 2, "db"), opener(log, "two"), idle_timeout=10, task=2
    )
    assert (first, second) == ("one", "two")
    assert log == ["open one", "open two", "close one"], "attempt 1's instance is closed"
    assert registry.open_keys() == [ResourceKey("job", 2, "db")]


def test_counts_wait_for_a_task_that_uses_the_resource() -> None:
    registry = Registry()
    stale = Accumulator(3, {}, CountsParam())
    fresh = Accumulator(4, {}, CountsParam())
    log: list[str] = []
    registry.acquire(KEY, opener(log), idle_timeout=10, task=1, sink=stale)
    registry.close_where(lambda _k: True, "idle")  # between tasks: nobody to report to yet
    registry.flush_all(task=2)
    assert stale.value == {"opens": 1, "uses": 1}
    registry.acquire(KEY, opener(log), idle_timeout=10, task=2, sink=fresh)
    assert fresh.value == {"closes": 1, "opens": 1, "uses": 1}


# -- references --------------------------------------------------------------------------------


def make_ref(out: Path, attempt: int = 1, **kwargs: Any) -> ResourceRef:
    payload = pickle_by_value(
        (functools.partial(resource_jobs.open_tracked, str(out)), resource_jobs.close_tracked),
        "test resource",
    )
    return ResourceRef("job", attempt, "db", payload, **kwargs)


def test_reference_pickles_and_opens_context_managers(tmp_path: Path) -> None:
    ref = make_ref(tmp_path)
    copy = pickle.loads(pickle.dumps(ref))
    assert (copy.key, copy.payload, copy.idle_timeout) == (ref.key, ref.payload, ref.idle_timeout)
    factory = functools.partial(resource_jobs.tracked_session, str(tmp_path / "cm"))
    managed = ResourceRef("job", 1, "s", pickle_by_value((factory, None), "cm"))
    value, closer = managed._open()
    assert isinstance(value, resource_jobs.Tracked), "the value the context manager gave"
    assert [len(found) for found in events(tmp_path / "cm").values()] == [1, 0, 0]
    closer()
    assert [len(found) for found in events(tmp_path / "cm").values()] == [1, 1, 0]


def test_open_errors_keep_their_message_and_name_the_resource() -> None:
    def refuse() -> None:
        raise ConnectionRefusedError("db.example:5432 refused")

    ref = ResourceRef("job", 3, "db", pickle_by_value((refuse, None), "refusing"))
    with pytest.raises(ConnectionRefusedError, match=r"db\.example:5432 refused") as caught:
        ref._open()
    assert "while opening resource 'db' of job attempt 3" in "".join(caught.value.__notes__)


# -- task scopes on the driver (no Spark task: nothing is closed) --------------------------------


def test_task_scope_runs_decorators_once_and_tags_log_records() -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def decorator(info: TaskInfo) -> Iterator[None]:
        events.append(f"enter {info.job_id} #{info.attempt}")
        try:
            yield
        except ValueError:
            events.append("saw ValueError")
            raise
        finally:
            events.append("exit")

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    handler.addFilter(TaskLogFilter())
    logger = logging.getLogger("test-task-scope")
    logger.addHandler(handler)
    decorators = [decorator]

    def inner(rows: Iterator[int]) -> Iterator[int]:
        logger.warning("inside %s", current_task_info())
        yield from rows

    def outer(rows: Iterator[int]) -> Iterator[int]:
        return TaskFunction(inner, "job", 2, decorators)(rows)

    try:
        assert list(TaskFunction(outer, "job", 2, decorators)(iter([1, 2]))) == [1, 2]
        assert events == ["enter job #2", "exit"], "nested scopes of one task decorate once"
        assert current_task_info() is None
        logger.warning("outside")
        failing = TaskFunction(lambda rows: 1 / 0 if False else _raise(), "job", 2, decorators)
        with pytest.raises(ValueError, match="bad row"):
            failing(iter([]))
        assert events[-2:] == ["saw ValueError", "exit"]
    finally:
        logger.removeHandler(handler)
    tagged = [(r.job_id, r.attempt, r.stage, r.partition) for r in records]  # type: ignore[attr-defined]
    assert tagged == [("job", 2, "-", "-"), ("-", "-", "-", "-")]


def _raise() -> None:
    raise ValueError("bad row")


# -- real child processes acting as pyspark workers ----------------------------------------------

PRELUDE = f"""
import functools, json, os, signal, sys, time
sys.path.insert(0, {str(REPO)!r})
from pyspark.taskcontext import TaskContext
from pyspark.accumulators import Accumulator
from recovery.executor.ref import CountsParam, ResourceRef
from recovery.executor.tasks import TaskFunction
from recovery.resources import pickle_by_value
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


def events(out: Path) -> dict[str, list[dict[str, Any]]]:
    """open-/close- marks of the Tracked resource, by kind."""
    found: dict[str, list[dict[str, Any]]] = {"open": [], "close": [], "double": []}
    for path in out.iterdir():
        kind = path.name.split("-", 1)[0]
        if kind in found:
            found[kind].append(
                {"ident": path.name.rsplit("-", 1)[-1], **json.loads(path.read_text())}
            )
    return found


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
def test_stop_signal_while_waiting_for_a_task_closes_then_dies_of_it(
    tmp_path: Path, signum: int
) -> None:
    """pyspark resets SIGHUP/SIGTERM while the worker waits: the watcher puts the handler back."""
    out = tmp_path / f"signal-{signum}"
    process = run_worker(
        out,
        """
        in_task(1)
        make_ref().get()
        task_over()
        while signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
            time.sleep(0.01)  # the main thread waits, as a worker waits for its next task
        say("armed")
        while True:
            time.sleep(0.05)
        """,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "armed"
    process.send_signal(signum)
    code, _ = finish(process)
    assert code == -signum, "the worker dies of the signal, as it would have"
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


# -- the driver's side: declaring, counts in ZooKeeper, jobs show --------------------------------


class Counting:
    """Stands in for a SparkContext's accumulator factory (pyspark's own Accumulator class)."""

    def __init__(self) -> None:
        self.next_id = 100

    def accumulator(self, value: dict[str, int], param: CountsParam) -> Accumulator[Any]:
        self.next_id += 1
        return Accumulator(self.next_id, value, param)


def test_declaring_checks_names_timeouts_and_serializability() -> None:
    resources = JobResources("job", 1, Counting)
    resources.declare("db", dict)
    quiet = resources.declare("quiet", dict, counts=False)
    assert quiet.accumulator is None and list(resources.counts()) == ["db"]
    with pytest.raises(ConfigError, match="declared already"):
        resources.declare("db", dict)
    with pytest.raises(ConfigError, match="invalid resource name"):
        resources.declare("../db", dict)
    with pytest.raises(ConfigError, match="under 60 s"):
        resources.declare("slow", dict, idle_timeout=60)
    lock = threading.Lock()
    with pytest.raises(SerializationError, match="cannot be serialized"):
        resources.declare("locked", lambda: lock)


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
        shown = CliRunner().invoke(cli, ["jobs", "show", "job", *cli_args(config)])
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
            cli, ["jobs", "show", "job", "--format", "json", *cli_args(config)]
        )
        assert corrupt.exit_code == 0
        item = json.loads(corrupt.output)
        assert item["resources"] is None and "resources" in item["record_errors"]


def cli_args(config: StoreConfig) -> list[str]:
    return ["--zk", config.zk_hosts, "--root", config.root, "--storage", config.storage_url]


@pytest.mark.parametrize(
    ("resources", "problem"),
    [
        ({"db": {"opens": 1}}, "exactly opens"),
        ({"db": {"opens": -1, "closes": 0, "failed_opens": 0, "uses": 0}}, "non-negative"),
        ({"db": {"opens": True, "closes": 0, "failed_opens": 0, "uses": 0}}, "non-negative"),
        ({"a/b": {"opens": 0, "closes": 0, "failed_opens": 0, "uses": 0}}, "bad resource name"),
    ],
)
def test_corrupt_reports_are_refused(resources: dict[str, Any], problem: str) -> None:
    data = json.dumps(
        {"attempt": 1, "updated": "2026-11-21T00:00:00Z", "final": False, "resources": resources}
    ).encode()
    with pytest.raises(CorruptRecord, match=problem):
        ResourceReport.from_znode(data, None, "/r/jobs/j/resources")


def test_both_sides_name_the_same_counts() -> None:
    assert registry_module.COUNTS == report_module.COUNTS


def test_counts_outlive_a_zookeeper_outage(
    private_zk_server: EmbeddedZooKeeper,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server stops answering while the driver publishes: it says so, and publishes later."""
    zk = ZooKeeper(private_zk_server.connect_string, session_timeout=10, timeout=1.0).start()
    try:
        layout = Layout("/outage")
        zk.ensure_path(layout.job_dir("job"))
        reports = ResourceReports(zk, layout, "job")
        resources = JobResources("job", 1, Counting, reports=reports, publish_every=3600)
        ref = resources.declare("db", dict)
        ref.accumulator.add({"opens": 1, "uses": 3})
        pid = private_zk_server.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            with caplog.at_level(logging.WARNING):
                resources.publish(final=False)  # never raises
        finally:
            os.kill(pid, signal.SIGCONT)
        assert "resource counts not written (will retry)" in caplog.text
        assert zk.wait_connected(15)
        resources.finish()
        report = reports.read()
        assert report is not None and report.final
        assert report.resources["db"] == {"opens": 1, "closes": 0, "failed_opens": 0, "uses": 3}
    finally:
        os.kill(private_zk_server.pid or 0, signal.SIGCONT)
        zk.stop()


def test_a_task_context_still_being_built_is_no_task() -> None:
    """pyspark publishes a TaskContext before filling it in; the watcher may see it then."""
    from pyspark.taskcontext import TaskContext

    TaskContext._setTaskContext(object.__new__(TaskContext))
    try:
        assert current_task_id() is None
    finally:
        TaskContext._setTaskContext(None)
