"""The upgrade test's jobs, submitted as ``workload.py:FUNCTION`` by either release's command line.

A command line passes its arguments as text: these functions take text and call the chaos
jobs, which both releases install (:func:`zkstore_dev.chaos.job.sum_of_squares`,
:func:`zkstore_dev.chaos.schedule_checker.scheduled_run`; pickled by reference, so each driver runs
its own release's copy), or run a Spark job that leaves the same evidence (an attempt marker
per attempt, readable by :func:`zkstore_dev.chaos.job.attempts`; an exact total in
``output.json``). This file travels by value with each job: it imports nothing of the upgrade
test but these two modules.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from zkstore_dev.chaos.job import OUTPUT, PROGRESS, STOP, sum_of_squares
from zkstore_dev.chaos.schedule_checker import scheduled_run

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
