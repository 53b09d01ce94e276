"""Jobs and resources for the tests of executor-side resources (they travel by value).

The resource records every open and close as a file in the output directory, named by its
instance id and the pid of the process; every task records which instance it got. The tests
read the files back. Only the standard library and ``recovery`` are imported at module level:
``zkstore submit`` imports this file on its own.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOG_FORMAT = "%(job_id)s|%(attempt)s|%(stage)s|%(partition)s|%(message)s"


def record(out: str, name: str, **data: Any) -> None:
    """Write ``out/name`` atomically (temp file + rename)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}.{os.getpid()}"
    temporary.write_text(json.dumps({"time": time.time(), "pid": os.getpid(), **data}))
    temporary.replace(Path(out) / name)


class Tracked:
    """A resource that leaves a file when it is opened and when it is closed."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.ident = uuid.uuid4().hex[:12]
        self.closed = False
        record(out, f"open-{self.ident}")

    def close(self) -> None:
        if self.closed:
            record(self.out, f"double-close-{self.ident}")
        self.closed = True
        record(self.out, f"close-{self.ident}")


def open_tracked(out: str) -> Tracked:
    return Tracked(out)


def close_tracked(resource: Tracked) -> None:
    resource.close()


@contextlib.contextmanager
def tracked_session(out: str) -> Iterator[Tracked]:
    """The same resource as a context-manager factory: ``ctx.resource(name, factory)``."""
    resource = Tracked(out)
    try:
        yield resource
    finally:
        resource.close()


def open_flaky(out: str, failures: int) -> Tracked:
    """Fails the first ``failures`` times it is called (counted in files), then opens."""
    failed = len(list(Path(out).glob("failed-open-*")))
    if failed < failures:
        record(out, f"failed-open-{uuid.uuid4().hex[:12]}")
        raise ConnectionRefusedError("db.example:5432 refused the connection (on purpose)")
    return Tracked(out)


@contextlib.contextmanager
def log_to_file(out: str, info: Any) -> Iterator[None]:
    """A job decorator: a handler on the worker's root logger (once per process), and a mark
    of every task it ran around."""
    root = logging.getLogger()
    Path(out).mkdir(parents=True, exist_ok=True)
    if not any(getattr(h, "resource_test", False) for h in root.handlers):
        handler = logging.FileHandler(Path(out) / f"worker-{os.getpid()}.log")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.resource_test = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    record(out, f"enter-{info.stage}-{info.partition}", job=info.job_id, attempt=info.attempt)
    yield
    record(out, f"exit-{info.stage}-{info.partition}")


def use(ref: Any, out: str, stage: int) -> Any:
    """A partition function: get the resource, record who got which instance, pass rows on."""

    def run(rows: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        resource = ref.get()
        task = TaskContext.get()
        assert task is not None
        partition = task.partitionId()
        record(out, f"task-{stage}-{partition}", instance=resource.ident, stage=task.stageId())
        logging.getLogger("resource-job").info("stage %d partition %d done", stage, partition)
        yield from rows

    return run


def three_stages(
    ctx: Any,
    out: str,
    hold: str = "no",
    partitions: int | str = 8,
    linger: float | str = 0.0,
    idle: float | str = 20.0,
) -> None:
    """Three Python stages over ``partitions`` partitions, each task using the ``db`` resource.

    With ``hold=yes`` the job waits at the end until ``zkstore control set JOB go=true``, so
    that a test can look at the running attempt. ``linger`` seconds after the last stage, the
    application stays up (as a job that writes its summary would): a worker whose task ended
    less than a watcher tick before the stop's SIGHUP dies without closing (recovery/executor/
    hooks.py), a window a loaded machine can stretch. ``idle`` is the resource's idle timeout
    (20 s, the default, unless given).
    """
    ref = ctx.resource(
        "db", functools.partial(open_tracked, out), close_tracked, idle_timeout=float(idle)
    )
    ctx.decorate(functools.partial(log_to_file, out))
    partitions = int(partitions)
    rows = ctx.spark.sparkContext.parallelize(range(64), partitions)
    count = (
        rows.mapPartitions(ctx.task(use(ref, out, 1)))
        .map(lambda x: (x % partitions, x))
        .partitionBy(partitions)
        .mapPartitions(ctx.task(use(ref, out, 2)))
        .partitionBy(partitions)
        .mapPartitions(ctx.task(use(ref, out, 3)))
        .count()
    )
    record(out, "result", count=count, counts=ref.counts(), app=ctx.spark.sparkContext.appName)
    time.sleep(float(linger))
    deadline = time.time() + 120
    while hold == "yes" and not ctx.config.get("go"):
        if time.time() > deadline:
            raise TimeoutError("never told to go")
        time.sleep(0.1)


# -- reading the records back (the tests) -------------------------------------------------------


def marks(out: Path) -> dict[str, dict[str, Any]]:
    """Every record in ``out`` by name (not the temporary ones, not the logs)."""
    return {
        p.name: json.loads(p.read_text())
        for p in out.iterdir()
        if p.name[0] != "." and p.suffix != ".log"
    }


def lifecycle(out: Path) -> dict[str, Any]:
    """What the files say: opens and closes by instance, tasks by (stage, partition)."""
    found = marks(out)
    return {
        "opens": {n.split("-", 1)[1]: m for n, m in found.items() if n.startswith("open-")},
        "closes": {n.split("-", 1)[1]: m for n, m in found.items() if n.startswith("close-")},
        "double": [n for n in found if n.startswith("double-close-")],
        "tasks": {n: m for n, m in found.items() if n.startswith("task-")},
    }


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


class Counting:
    """Stands in for a SparkContext's accumulator factory (pyspark's own Accumulator class)."""

    def __init__(self) -> None:
        self.next_id = 100

    def accumulator(self, value: dict[str, int], param: Any) -> Any:
        from pyspark.accumulators import Accumulator

        self.next_id += 1
        return Accumulator(self.next_id, value, param)


def all_closed(out: Path) -> bool:
    state = lifecycle(out)
    return bool(state["opens"]) and set(state["closes"]) == set(state["opens"])


def check_sharing(out: Path, *, reused: bool, tasks: int = 24) -> dict[str, Any]:
    """The invariants of a finished three-stage run; returns the lifecycle for more checks."""
    state = lifecycle(out)
    ran = state["tasks"]
    assert len(ran) == tasks, sorted(ran)
    pids = {t["pid"] for t in ran.values()}
    assert len(state["opens"]) == len(pids), "one open per Python worker that ran tasks"
    assert {o["pid"] for o in state["opens"].values()} == pids
    instances_by_pid: dict[int, set[str]] = defaultdict(set)
    stages_by_pid: dict[int, set[int]] = defaultdict(set)
    for task in ran.values():
        instances_by_pid[task["pid"]].add(task["instance"])
        stages_by_pid[task["pid"]].add(task["stage"])
    assert all(len(ids) == 1 for ids in instances_by_pid.values()), "one instance per process"
    if reused:
        assert len(pids) < tasks
        assert any(len(stages) > 1 for stages in stages_by_pid.values()), "shared across stages"
    else:
        assert len(pids) == tasks, "a fresh worker per task"
    assert set(state["closes"]) == set(state["opens"]) and not state["double"]
    for ident, close in state["closes"].items():
        assert close["pid"] == state["opens"][ident]["pid"], "closed by the process that opened"
    return state


def check_tagged_logs(out: Path, job_id: str) -> None:
    lines = [
        line
        for log in out.glob("worker-*.log")
        for line in log.read_text().splitlines()
        if "done" in line
    ]
    assert len(lines) == 24, lines
    tags = {tuple(line.split("|")[:4]) for line in lines}
    stages = {stage for _, _, stage, _ in tags}
    assert {(job, attempt) for job, attempt, _, _ in tags} == {(job_id, "1")}
    assert len(stages) == 3 and "-" not in stages
    assert {partition for _, _, _, partition in tags} == {str(p) for p in range(8)}
    entered = [n for n in marks(out) if n.startswith("enter-")]
    assert len(entered) == 24 and len([n for n in marks(out) if n.startswith("exit-")]) == 24
