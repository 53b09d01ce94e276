"""Executor-side resources without Spark: the registry, references, task scopes, the exit and
signal hooks (in real child processes that act like pyspark's workers), and the counts record.

The Spark runs (local mode, standalone, ``zkstore submit``) are in
``tests/spark/test_resources_in_session.py`` and ``tests/spark/test_resources_on_spark.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import pickle
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.accumulators import Accumulator

from recovery.driver.resource_declaring import JobResources, pickle_by_value
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
from tests import resource_jobs
from tests.helpers import wait_for
from tests.resource_jobs import Counting, events
from zkstore.errors import ConfigError, CorruptRecord, SerializationError
from zkstore.jobs import resources as report_module
from zkstore.jobs.resources import ResourceReport

pytestmark = pytest.mark.unit

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


def test_a_close_on_the_way_out_waits_for_a_close_another_thread_has_under_way() -> None:
    """The watcher takes an idle instance out and closes it on its own thread; a stop signal
    arriving meanwhile closes everything (nothing is left to take) and the process dies of it:
    it must not die before that other close has ended (it would leave the open unclosed)."""
    registry = Registry()
    closing, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def slow_close() -> None:
        closing.set()
        release.wait(10)
        ended.append("closed")

    key = ResourceKey("job", 1, "db")
    registry.acquire(key, lambda: ("v", slow_close), idle_timeout=0.0, task=None)
    idle = threading.Thread(target=registry.close_idle, args=(None,))
    idle.start()
    assert closing.wait(10), "the idle close began"
    threading.Timer(0.3, release.set).start()
    assert registry.close_where(lambda _: True, "signal SIGHUP", bound=10) == 0, "nothing left"
    assert ended == ["closed"], "returned only once the close under way had ended"
    idle.join()


def test_a_stuck_close_under_way_is_waited_for_no_longer_than_the_bound() -> None:
    registry = Registry()
    release = threading.Event()
    key = ResourceKey("job", 1, "db")
    registry.acquire(key, lambda: ("v", lambda: release.wait(10)), idle_timeout=0.0, task=None)
    idle = threading.Thread(target=registry.close_idle, args=(None,), daemon=True)
    idle.start()
    wait_for(lambda: not registry.open_keys(), timeout=10, what="the close taken")
    began = time.monotonic()
    registry.close_where(lambda _: True, "exit", bound=0.3)
    assert 0.25 <= time.monotonic() - began < 5, "waited for the bound, then went on"
    release.set()
    idle.join()


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


# -- the driver's side: declaring, counts in ZooKeeper, jobs show --------------------------------


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


def test_a_task_context_still_being_built_is_no_task() -> None:
    """pyspark publishes a TaskContext before filling it in; the watcher may see it then."""
    from pyspark.taskcontext import TaskContext

    TaskContext._setTaskContext(object.__new__(TaskContext))
    try:
        assert current_task_id() is None
    finally:
        TaskContext._setTaskContext(None)
