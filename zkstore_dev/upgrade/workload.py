"""The upgrade test's jobs, submitted as ``workload.py:FUNCTION`` by either release's command line.

A command line passes its arguments as text: these functions take text and call the chaos
jobs (:func:`zkstore_dev.chaos.job.sum_of_squares`,
:func:`zkstore_dev.chaos.schedule_checker.scheduled_run`), or run a Spark job that leaves the
same evidence (an attempt marker per attempt, readable by :func:`zkstore_dev.chaos.job.attempts`;
an exact total in ``output.json``). This file travels by value with each job: it imports nothing
of the upgrade test but the chaos job's modules.

Those travel by value too (:func:`cloudpickle.register_pickle_by_value`): a release names its
harnesses in its own package (``zkstore_dev.chaos`` here, ``recovery.dev.chaos`` before issue
61), and a job that one release's command line submits runs on the other release's drivers,
which could not import them by the submitter's name. The previous release's command line loads
this file too: it finds the chaos job under its own name.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import cloudpickle

#: Where each release keeps the chaos job's modules: this code's name first, then the name of
#: the releases before the harnesses left the runtime package (issue 61). The ledger (the
#: zombie-write check's) is newer than 0.2.0, whose chaos job writes none.
HOMES = {
    "job": ("zkstore_dev.chaos.job", "recovery.dev.chaos.job"),
    "schedules": ("zkstore_dev.chaos.schedule_checker", "recovery.dev.chaos.schedules"),
    "ledger": ("zkstore_dev.chaos.ledger", "recovery.dev.chaos.ledger"),
}


def _by_value(names: tuple[str, ...]) -> ModuleType | None:
    """The first of ``names`` this interpreter has, registered to be pickled by value."""
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        cloudpickle.register_pickle_by_value(module)
        return module
    return None


def _required(names: tuple[str, ...]) -> ModuleType:
    module = _by_value(names)
    if module is None:
        raise ModuleNotFoundError(f"none of {', '.join(names)}")
    return module


_job, _schedules = _required(HOMES["job"]), _required(HOMES["schedules"])
_by_value(HOMES["ledger"])
OUTPUT: str = _job.OUTPUT
PROGRESS: str = _job.PROGRESS
STOP: str = _job.STOP
sum_of_squares = _job.sum_of_squares
scheduled_run = _schedules.scheduled_run

#: ``steps`` for a job that runs until its ``stop`` file appears (the upgrade's whole span).
UNTIL_STOPPED = "until-stopped"
#: The rows of the Spark job's step ``n``: ``n * ROWS``.
ROWS = 1000


def squares(ctx: Any, out: str, steps: str, delay: str) -> None:
    """The chaos job for ``steps`` steps (or until stopped), one checkpoint per ``delay``."""
    sum_of_squares(ctx, out, None if steps == UNTIL_STOPPED else int(steps), float(delay))


def tick(ctx: Any, out: str, seconds: str) -> None:
    """A run of the schedule: its marker, for the schedule checker."""
    scheduled_run(ctx, out, float(seconds))


def spark_total(steps: int) -> int:
    """What :func:`spark_actions` adds up over ``steps`` steps: ``sum(range(n * ROWS))`` each."""
    return sum((n * ROWS) * (n * ROWS - 1) // 2 for n in range(1, steps + 1))


def spark_actions(ctx: Any, out: str, delay: str) -> None:
    """Spark actions until stopped, a checkpoint after each step (two actions: a count and a
    sum, which must agree), resumable from the newest checkpoint."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = ctx.latest_checkpoint() or {"step": 0, "total": 0}
    step, total = int(checkpoint["step"]), int(checkpoint["total"])
    marker = folder / f"attempt-{ctx.attempt}.json"
    record = {"attempt": ctx.attempt, "pid": os.getpid(), "start": time.time(), "from": step}
    record["last"] = record["start"]
    _write(marker, record)
    spark = ctx.spark
    while not (folder / STOP).exists():
        step += 1
        frame = spark.range(step * ROWS)
        if frame.count() != step * ROWS:
            raise RuntimeError(f"step {step}: Spark counted {frame.count()} rows")
        total += int(frame.selectExpr("sum(id) AS s").collect()[0]["s"])
        ctx.checkpoint({"step": step, "total": total})
        record["last"], record["step"] = time.time(), step
        _write(marker, record)
        with open(folder / PROGRESS, "a") as log:
            log.write(f"{ctx.attempt} {step} {record['last']:.3f}\n")
        time.sleep(float(delay))  # the job's own pace, not a wait for anything
    _write(folder / OUTPUT, {"steps": step, "total": total, "attempt": ctx.attempt})
    record["end"] = record["last"] = time.time()
    _write(marker, record)


def _write(path: Path, data: dict[str, Any]) -> None:
    """Atomically (temp file + rename): the checker may read at any moment."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)
