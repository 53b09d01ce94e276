"""Jobs that commit outputs with their checkpoints, for the end-to-end tests (submitted by
value or as a file): each records what it did in an output directory (``mark``), and can be
held at a point of a step until the test lets it go (``hold``), so that the test freezes or
kills its driver exactly there.

Self-contained on purpose (the standard library only, and what the driver gives the job).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def mark(out: str, name: str, **data: Any) -> None:
    """Record ``name`` atomically (the test may read it at any moment)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}.{os.getpid()}"
    temporary.write_text(json.dumps({"time": time.time(), "pid": os.getpid(), **data}))
    temporary.replace(Path(out) / name)


def hold(out: str, name: str, timeout: float = 600.0) -> None:
    """Wait until the test writes ``out/go-<name>`` (or is done with this driver)."""
    until = time.monotonic() + timeout
    while not (Path(out) / f"go-{name}").exists() and time.monotonic() < until:
        time.sleep(0.05)


def rows(day: int) -> list[dict[str, int]]:
    """Day ``day``'s rows: ``day`` of them."""
    return [{"day": day, "value": day * 100 + i} for i in range(day)]


def days(ctx: Any, out: str, count: str, hold_before: str, hold_after: str) -> None:
    """One part per day (a directory holding a JSON-lines file), committed with the day's
    checkpoint. Attempt 1 holds before committing day ``hold_before`` and after committing day
    ``hold_after`` (0: never). At the end: the committed paths, and what Spark reads of them
    (on local disk: the engine used by jobs, ``ctx.outputs.read``)."""
    from recovery.driver.signals import AttemptSuperseded

    done = (ctx.latest_checkpoint() or {}).get("day", 0)
    mark(out, f"start-attempt-{ctx.attempt}", resumed_from=done)
    staging = ctx.outputs.stage("days")
    for day in range(done + 1, int(count) + 1):
        part = f"{staging}/day={day}"
        with ctx.outputs.open(f"{part}/rows.json") as file:
            file.write("".join(json.dumps(r) + "\n" for r in rows(day)).encode())
        mark(out, f"staged-{day}-attempt-{ctx.attempt}")
        if ctx.attempt == 1 and day == int(hold_before):
            hold(out, f"commit-{day}")
        try:
            ctx.checkpoint({"day": day}, commit={"days": [part]})
        except AttemptSuperseded as exc:
            mark(out, f"refused-{day}-attempt-{ctx.attempt}", error=str(exc))
            raise
        mark(out, f"committed-{day}-attempt-{ctx.attempt}")
        if ctx.attempt == 1 and day == int(hold_after):
            hold(out, f"next-{day}")
    paths = ctx.outputs.paths("days")
    found: dict[str, Any] = {"paths": paths, "uri": ctx.outputs.uri("days")}
    if paths[0].startswith("file://"):
        from pyspark.sql import functions

        frame = ctx.outputs.read("days", "json")
        total = frame.agg(functions.sum("value")).collect()[0][0]
        found.update(spark_rows=frame.count(), spark_sum=total)
    mark(out, f"done-attempt-{ctx.attempt}", **found)
