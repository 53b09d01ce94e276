"""Job functions the end-to-end tests submit (they travel to the drivers by value).

Each records what it did as files in an output directory, so that tests can check which steps
ran, in which attempt, and at what time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def mark(out: str, name: str, **data: Any) -> None:
    """Record ``name`` atomically (temp file + rename): the test may read it at any moment."""
    Path(out).mkdir(parents=True, exist_ok=True)
    temporary = Path(out) / f".{name}.{os.getpid()}"
    temporary.write_text(json.dumps({"time": time.time(), **data}))
    temporary.replace(Path(out) / name)


def steps(ctx: Any, out: str, total: int, delay: float) -> None:
    """Work through ``total`` steps, checkpointing after each; record every step started."""
    checkpoint = ctx.latest_checkpoint()
    start = checkpoint["step"] + 1 if checkpoint else 1
    mark(out, f"start-attempt-{ctx.attempt}", step=start)
    for step in range(start, total + 1):
        mark(out, f"step-{step:03d}-attempt-{ctx.attempt}", pid=os.getpid())
        time.sleep(delay)
        ctx.checkpoint({"step": step})


def flaky(ctx: Any, out: str, succeed_at: int) -> None:
    """Fail until attempt ``succeed_at``; record when each attempt started."""
    mark(out, f"attempt-{ctx.attempt}")
    if ctx.attempt < succeed_at:
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")


def sleeper(ctx: Any, out: str, seconds: float) -> None:
    mark(out, f"attempt-{ctx.attempt}")
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.05)
    mark(out, "finished")


def spark_squares(ctx: Any, out: str, n: int) -> None:
    """A real Spark job: the sum of squares of 0..n-1, computed by the cluster."""
    total = ctx.spark.range(n).selectExpr("sum(id * id) AS total").collect()[0]["total"]
    mark(out, "result", total=int(total), master=ctx.spark.sparkContext.master)


def read_marks(out: str) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(Path(out).glob("[!.]*"))}


def wait_for_go(ctx: Any, out: str) -> None:
    """Wait until the job's dynamic configuration says go (``zkstore control set JOB go=true``)."""
    mark(out, "waiting")
    deadline = time.time() + 60
    while not ctx.config.get("go"):
        if time.time() > deadline:
            raise TimeoutError("never told to go")
        time.sleep(0.05)
    mark(out, "went", rate=ctx.config.get("rate"))


def environment(ctx: Any, out: str) -> None:
    """Record the driver's environment, as the job's code sees it."""
    mark(out, "environ", environ=dict(os.environ))


def printer(ctx: Any, out: str, lines: int, then_sleep: float) -> None:
    """Print numbered lines (and a partial last one), mark, then sleep (to be killed)."""
    for i in range(lines):
        print(f"attempt {ctx.attempt} line {i:05d}", flush=True)
    print(f"attempt {ctx.attempt} last words", flush=True)
    mark(out, f"printed-{ctx.attempt}")
    time.sleep(then_sleep)
    if ctx.attempt == 1 and then_sleep < 60:
        raise RuntimeError("attempt 1 fails on purpose")
