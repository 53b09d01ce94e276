"""Daily sales rollup: a PySpark pipeline that does one day per step, checkpointing after each.

Submit it (a daemon must be running, with the output directory under one of its artifact roots)::

    python examples/pipeline.py generate /tmp/sales/input          # make some input
    zkstore daemon --artifact-root file:///tmp/sales/output ...    # (where the daemons run)
    zkstore submit examples/pipeline.py:run --wait -- /tmp/sales/input /tmp/sales/output

Each step reads one ``day-NN.csv`` and aggregates it per category with Spark into the
attempt's staging place of the output ``days`` (``output/days/attempt-N/day=NN``), then commits
that part with the step's checkpoint ``{"day": NN}``: one fenced transaction, so each day is
committed exactly once, even by an attempt frozen and resumed after the next one took over
(docs/artifacts.md, "Outputs committed with checkpoints"). A resubmitted run starts after the
last checkpointed day; whatever a killed attempt staged and never committed is deleted before
the next attempt starts. The last step reads every committed day back (``ctx.outputs.read``)
into ``output/summary.json``. ``days`` and ``summary.json`` are kept on success (the job's
result lists them); ``zkstore outputs paths JOB days`` lists the committed days.

``python examples/pipeline.py expected INPUT`` computes the same summary without Spark, which is
how the demo checks the pipeline's output.
"""

from __future__ import annotations

import csv
import json
import os
import random
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
    # Before anything is written: the same output for every attempt, a staging place of this
    # attempt's own (what a dead attempt staged and never committed is gone by then).
    staging = ctx.outputs.stage("days", f"{output_dir}/days")
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
        part = f"{staging}/day={number:02d}"
        daily.coalesce(1).write.mode("overwrite").json(part)
        ctx.checkpoint({"day": number, "file": path.name}, commit={"days": [part]})
        time.sleep(float(step_delay))
    combined = (
        ctx.outputs.read("days", "json")  # every committed day, once
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
    ctx.log.info("summary of %d days written", len(days))


def local_path(uri: str) -> Path:
    """The local path of a ``file://`` artifact URI (this example writes local files)."""
    if not uri.startswith("file://"):
        raise ValueError(f"this example writes local files, not {uri}")
    return Path(uri.removeprefix("file://"))


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
