"""Jobs that register artifacts, for the end-to-end tests (submitted as a file by the installed
``zkstore`` script, or as functions by value): each records what it saw in an output directory.

Self-contained on purpose (the standard library only): ``zkstore submit`` ships this one file.
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
    temporary.write_text(json.dumps({"time": time.time(), **data}))
    temporary.replace(Path(out) / name)


def local(uri: str) -> Path:
    assert uri.startswith("file://"), uri
    return Path(uri.removeprefix("file://"))


def seen(ctx: Any) -> list[list[Any]]:
    return [[a.name, a.scope, a.attempt, a.state] for a in ctx.artifacts.list()]


def staged(ctx: Any, out: str, scratch: str, parts: str, delay: str) -> None:
    """Squares of 0..99 computed once (job scope, reused by a resumed attempt), written part by
    part into a staging directory (attempt scope, the same place in every attempt), combined
    into an output kept on success."""
    staging_path = Path(scratch) / "staging"
    mark(
        out,
        f"start-attempt-{ctx.attempt}",
        staging_before_register=sorted(p.name for p in staging_path.glob("*")),
        artifacts=seen(ctx),
    )
    squares = local(ctx.artifacts.register("squares", scope="job"))
    if ctx.artifacts.finished("squares"):
        mark(out, f"squares-reused-attempt-{ctx.attempt}")
    else:
        squares.mkdir(parents=True, exist_ok=True)
        (squares / "values.json").write_text(json.dumps([i * i for i in range(100)]))
        ctx.artifacts.finish("squares")
    staging = local(ctx.artifacts.register("staging", str(staging_path)))
    staging.mkdir(parents=True, exist_ok=True)
    (staging / f"written-by-attempt-{ctx.attempt}").write_text("")
    values = json.loads((squares / "values.json").read_text())
    count = int(parts)
    for part in range(count):
        chunk = values[part::count]
        (staging / f"part-{part}.json").write_text(json.dumps(chunk))
        mark(out, f"staged-{part}-attempt-{ctx.attempt}")
        time.sleep(float(delay))
    total = sum(sum(json.loads(p.read_text())) for p in sorted(staging.glob("part-*.json")))
    files = sorted(p.name for p in staging.glob("*"))
    output = local(ctx.artifacts.register("total", f"{scratch}/total", scope="job", keep=True))
    output.mkdir(parents=True, exist_ok=True)
    (output / "total.json").write_text(json.dumps({"total": total, "staging": files}))
    ctx.artifacts.finish("total")
    mark(out, f"done-attempt-{ctx.attempt}", artifacts=seen(ctx))


def failing(ctx: Any, out: str, scratch: str) -> None:
    """Registers one artifact of each kind, finishes the output to keep, then fails."""
    for name, scope, keep in (("staging", "attempt", False), ("parts", "job", False)):
        path = local(ctx.artifacts.register(name, f"{scratch}/{name}", scope=scope, keep=keep))
        path.mkdir(parents=True)
        (path / "data").write_text(name)
    report = local(ctx.artifacts.register("report", scope="job", keep=True))
    report.mkdir(parents=True)
    (report / "report.json").write_text("{}")
    ctx.artifacts.finish("report")
    mark(out, "registered", artifacts=seen(ctx))
    raise RuntimeError("fails on purpose, after finishing an output it wanted to keep")


def cancellable(ctx: Any, out: str) -> None:
    """Writes an output to keep, then waits; cancelled, it finishes the output anyway (too
    late: a cancelled job keeps nothing, the artifact is released at once)."""
    report = local(ctx.artifacts.register("report", scope="job", keep=True))
    report.mkdir(parents=True)
    (report / "report.json").write_text(json.dumps({"rows": 42}))
    mark(out, "ready", uri=f"file://{report}")
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # the driver interrupts it once, on the cancel
            time.sleep(0.05)
    except KeyboardInterrupt:
        mark(out, "cancel-seen")
    try:
        ctx.artifacts.finish("report")
    except BaseException as exc:
        after = {"exists": report.exists(), "record": seen(ctx)}
        mark(out, "finished-late", raised=type(exc).__name__, **after)
        raise
    mark(out, "kept-after-cancel")


def spark_checkpoints(ctx: Any, out: str) -> None:
    """Checkpoints an RDD with the checkpoint directory zkstore set, and records where it went."""
    context = ctx.spark.sparkContext
    rdd = context.parallelize(range(1000), 4).map(lambda x: x * 2)
    rdd.checkpoint()
    total = rdd.sum()
    directory = context.getCheckpointDir()
    record = ctx.artifacts.get("spark-checkpoints")
    written = [str(p) for p in Path(directory.removeprefix("file:")).rglob("part-*")]
    mark(
        out,
        "checkpointed",
        total=total,
        directory=directory,
        checkpointed=rdd.isCheckpointed(),
        record=None if record is None else [record.uri, record.scope, record.attempt],
        written=len(written),
    )
