"""Daily sales rollup: a PySpark pipeline that does one day per step, checkpointing after each.

Submit it (a daemon must be running, with the output directory under one of its artifact roots)::

    python examples/pipeline.py generate /tmp/sales/input          # make some input
    zkstore daemon --artifact-root file:///tmp/sales/output ...    # (where the daemons run)
    zkstore submit examples/pipeline.py:run --wait -- /tmp/sales/input /tmp/sales/output

Each step reads one ``day-NN.csv``, aggregates it per category with Spark into the attempt's
staging directory (``output/_staging/attempt-N``, an attempt-scoped artifact), then moves the
finished result to ``output/days/day=NN`` and checkpoints ``{"day": NN}``. A resubmitted run
starts after the last checkpointed day; whatever a killed attempt left half-written in its
staging directory is deleted before the next attempt starts. The last step combines every day
into ``output/summary.json``. ``days`` and ``summary.json`` are artifacts kept on success (the
job's result lists them); the staging directory is released with its attempt.

``python examples/pipeline.py expected INPUT`` computes the same summary without Spark, which is
how the demo checks the pipeline's output.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

CATEGORIES = ("books", "garden", "games", "kitchen", "music", "tools")


def generate(input_dir: str, days: int = 8, rows_per_day: int = 5000, seed: int = 7) -> None:
    """Write ``days`` CSV files of orders (order_id, category, amount in cents)."""
    rng = random.Random(seed)
    Path(input_dir).mkdir(parents=True, exist_ok=True)
    order = 0
    for day in range(1, days + 1):
        with open(Path(input_dir) / f"day-{day:02d}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["order_id", "category", "amount"])
            for _ in range(rows_per_day):
                order += 1
                writer.writerow([order, rng.choice(CATEGORIES), rng.randint(100, 20_000)])


def expected(input_dir: str) -> dict[str, dict[str, int]]:
    """The summary computed directly in Python, for checking the pipeline's output."""
    totals: dict[str, dict[str, int]] = {}
    for path in sorted(Path(input_dir).glob("day-*.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                entry = totals.setdefault(row["category"], {"amount": 0, "orders": 0})
                entry["amount"] += int(row["amount"])
                entry["orders"] += 1
    return dict(sorted(totals.items()))


def run(ctx: Any, input_dir: str, output_dir: str, step_delay: str = "0") -> None:
    """The pipeline: one day per step, a checkpoint after each, a summary at the end."""
    from pyspark.sql import functions as F

    days = sorted(Path(input_dir).glob("day-*.csv"))
    if not days:
        raise FileNotFoundError(f"no day-*.csv files in {input_dir}")
    checkpoint = ctx.latest_checkpoint()
    done = checkpoint["day"] if checkpoint else 0
    if done:
        ctx.log.info("resuming after day %d of %d (checkpointed)", done, len(days))
    # Registered before anything is written: a resumed attempt gets the same "days" back, and a
    # fresh staging directory of its own (the dead attempt's is gone by then).
    results = local_path(
        ctx.artifacts.register("days", f"{output_dir}/days", scope="job", keep=True)
    )
    staging = local_path(
        ctx.artifacts.register("staging", f"{output_dir}/_staging/attempt-{ctx.attempt}")
    )
    spark = ctx.spark
    for number, path in enumerate(days, start=1):
        if number <= done:
            continue
        orders = spark.read.csv(
            str(path), header=True, schema="order_id LONG, category STRING, amount LONG"
        )
        daily = orders.groupBy("category").agg(
            F.sum("amount").alias("amount"), F.count("*").alias("orders")
        )
        staged = staging / f"day={number:02d}"
        daily.coalesce(1).write.mode("overwrite").json(str(staged))
        publish(staged, results / f"day={number:02d}")
        ctx.checkpoint({"day": number, "file": path.name})
        time.sleep(float(step_delay))
    ctx.artifacts.finish("days")
    combined = (
        spark.read.json(str(results))
        .groupBy("category")
        .agg(F.sum("amount").alias("amount"), F.sum("orders").alias("orders"))
    )
    summary = {
        row["category"]: {"amount": int(row["amount"]), "orders": int(row["orders"])}
        for row in combined.orderBy("category").collect()
    }
    target = local_path(
        ctx.artifacts.register("summary", f"{output_dir}/summary.json", scope="job", keep=True)
    )
    temporary = target.with_name(f".summary.json.{os.getpid()}")
    temporary.write_text(json.dumps(summary, indent=2, sort_keys=True))
    temporary.replace(target)
    ctx.artifacts.finish("summary")
    ctx.artifacts.release("staging")
    ctx.log.info("summary of %d days written", len(days))


def local_path(uri: str) -> Path:
    """The local path of a ``file://`` artifact URI (this example writes local files)."""
    if not uri.startswith("file://"):
        raise ValueError(f"this example writes local files, not {uri}")
    return Path(uri.removeprefix("file://"))


def publish(staged: Path, target: Path) -> None:
    """Move a finished day from staging to its place (replacing a day redone after a crash)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged.rename(target)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "generate":
        generate(argv[1], *(int(a) for a in argv[2:4]))
        return 0
    if len(argv) == 2 and argv[0] == "expected":
        print(json.dumps(expected(argv[1]), indent=2, sort_keys=True))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
