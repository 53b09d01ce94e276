"""Orders priced from a reference database: one connection per Spark worker, shared by every
task and stage of the job, closed when the job is done.

Submit it (a daemon must be running)::

    python examples/shared_resource.py generate /tmp/enrich/input     # orders.csv + catalog.db
    zkstore submit examples/shared_resource.py:run --wait -- /tmp/enrich/input /tmp/enrich/output

The catalog is a SQLite file standing in for a database server. ``ctx.resource`` declares the
connection; the first task that calls ``catalog.get()`` in a Python worker opens it, every later
task of any stage in that worker reuses it, and zkstore closes it once: idle for 20 s, or when
the worker exits or is stopped (see the README, "Resources on executors"). Two stages use it:
pricing each order (SKU -> category, unit price) and labelling each category total (name, VAT
rate). ``output/summary.json`` gets the totals and the connection counts: opens is the number
of Python workers that used the catalog, not the number of tasks.

``python examples/shared_resource.py expected INPUT`` computes the same totals without Spark.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import logging
import os
import random
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CATEGORIES = {"books": ("Books", 7), "garden": ("Garden", 20), "games": ("Games", 20)}


def generate(input_dir: str, orders: int = 2000, skus: int = 50, seed: int = 7) -> None:
    """Write ``catalog.db`` (skus, categories) and ``orders.csv`` (order_id, sku, quantity)."""
    rng = random.Random(seed)
    Path(input_dir).mkdir(parents=True, exist_ok=True)
    catalog = Path(input_dir) / "catalog.db"
    catalog.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(catalog)) as db, db:
        db.execute("CREATE TABLE skus (sku TEXT PRIMARY KEY, category TEXT, cents INTEGER)")
        db.execute("CREATE TABLE categories (category TEXT PRIMARY KEY, label TEXT, vat INTEGER)")
        db.executemany(
            "INSERT INTO categories VALUES (?, ?, ?)",
            [(name, label, vat) for name, (label, vat) in CATEGORIES.items()],
        )
        db.executemany(
            "INSERT INTO skus VALUES (?, ?, ?)",
            [
                (f"sku-{i:03d}", rng.choice(list(CATEGORIES)), rng.randint(100, 9000))
                for i in range(skus)
            ],
        )
    with open(Path(input_dir) / "orders.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["order_id", "sku", "quantity"])
        for order in range(orders):
            writer.writerow([order, f"sku-{rng.randrange(skus):03d}", rng.randint(1, 5)])


def connect(path: str) -> sqlite3.Connection:
    """Open the catalog read-only. ``check_same_thread=False``: zkstore may close it from its
    own thread (the idle close)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)


def price(catalog: Any, orders: Iterator[Any]) -> Iterator[tuple[str, int]]:
    """Stage 1: (category, cents) of each order, looked up in the shared connection."""
    db = catalog.get()
    for order in orders:
        category, cents = db.execute(
            "SELECT category, cents FROM skus WHERE sku = ?", (order["sku"],)
        ).fetchone()
        yield category, cents * int(order["quantity"])


def label(catalog: Any, totals: Iterator[tuple[str, int]]) -> Iterator[dict[str, Any]]:
    """Stage 2: each category total with its label and VAT, from the same connection."""
    db = catalog.get()
    for category, cents in totals:
        name, vat = db.execute(
            "SELECT label, vat FROM categories WHERE category = ?", (category,)
        ).fetchone()
        yield {"category": name, "cents": cents, "with_vat": cents + cents * vat // 100}


@contextlib.contextmanager
def timed(info: Any) -> Iterator[None]:
    """A task decorator: how long each task took (in the worker's log, tagged with the task)."""
    start = time.monotonic()
    yield
    logging.getLogger("enrich").info("%s: %.3f s", info.tags, time.monotonic() - start)


def run(ctx: Any, input_dir: str, output_dir: str) -> None:
    """Price the orders, total them per category, label the totals, write the summary."""
    catalog = ctx.resource(
        "catalog",
        functools.partial(connect, str(Path(input_dir) / "catalog.db")),
        sqlite3.Connection.close,
    )
    ctx.decorate(timed)
    orders = ctx.spark.read.csv(str(Path(input_dir) / "orders.csv"), header=True).rdd
    totals = (
        orders.mapPartitions(ctx.task(functools.partial(price, catalog)))
        .reduceByKey(lambda a, b: a + b, numPartitions=4)
        .mapPartitions(ctx.task(functools.partial(label, catalog)))
        .collect()
    )
    summary = {
        "totals": {row["category"]: row for row in sorted(totals, key=lambda r: r["category"])},
        "catalog": catalog.counts(),
    }
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    temporary = Path(output_dir) / f".summary.json.{os.getpid()}"
    temporary.write_text(json.dumps(summary, indent=2, sort_keys=True))
    temporary.replace(Path(output_dir) / "summary.json")
    ctx.log.info("catalog connection: %s", summary["catalog"])


def expected(input_dir: str) -> dict[str, dict[str, Any]]:
    """The totals computed directly, for checking the job's output."""
    with contextlib.closing(connect(str(Path(input_dir) / "catalog.db"))) as db:
        skus = {sku: (cat, cents) for sku, cat, cents in db.execute("SELECT * FROM skus")}
    cents: dict[str, int] = {}
    with open(Path(input_dir) / "orders.csv", newline="") as f:
        for order in csv.DictReader(f):
            category, unit = skus[order["sku"]]
            cents[category] = cents.get(category, 0) + unit * int(order["quantity"])
    totals = {}
    for category, total in cents.items():
        name, vat = CATEGORIES[category]
        totals[name] = {"category": name, "cents": total, "with_vat": total + total * vat // 100}
    return dict(sorted(totals.items()))


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "generate":
        generate(argv[1], *(int(a) for a in argv[2:3]))
        return 0
    if len(argv) == 2 and argv[0] == "expected":
        print(json.dumps(expected(argv[1]), indent=2, sort_keys=True))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
