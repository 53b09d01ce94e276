"""Order totals per customer, in euros: a two-file PySpark pipeline, run as a function job.

    zkstore submit examples/orders/job.py:run --conf spark.sql.shuffle.partitions=4 \\
        --wait -- /data/orders.csv /data/order-totals

``helpers.py`` beside this file converts currencies. The driver imports it here, and the
executors import it inside the UDF: zkstore ships it with the job because this file imports it
from its own directory (to ship it from elsewhere, pass it with ``--py-files``). The output
directory gets ``summary.json``: the totals, and the settings they were computed with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helpers

#: Spark settings recorded with the output, so that a result says how it was computed.
RECORDED_SETTINGS = ("spark.sql.shuffle.partitions", "spark.executor.memory", "spark.master")


def run(ctx: Any, orders_csv: str, output_dir: str) -> None:
    from pyspark.sql import functions, types

    spark = ctx.spark
    to_eur = functions.udf(helpers.to_eur, types.DoubleType())
    orders = spark.read.option("header", True).csv(orders_csv)
    totals = (
        orders.withColumn("eur", to_eur(functions.col("amount"), functions.col("currency")))
        .groupBy("customer")
        .agg(functions.round(functions.sum("eur"), 2).alias("eur"))
    )
    summary = {
        "totals": {row["customer"]: row["eur"] for row in totals.collect()},
        "rates": helpers.RATES_DATE,
        "settings": {key: spark.conf.get(key, None) for key in RECORDED_SETTINGS},
    }
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    ctx.log.info("%d customers, rates of %s", len(summary["totals"]), helpers.RATES_DATE)
