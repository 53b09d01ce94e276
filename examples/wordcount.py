"""Word count: an unmodified PySpark script, as you would run it with spark-submit.

    zkstore submit examples/wordcount.py --wait -- INPUT.txt OUTPUT_DIR

It knows nothing about zkstore: run through the HA wrapper it gets the daemon's Spark master and
is restarted from scratch if its driver dies.
"""

import sys

from pyspark.sql import SparkSession

if __name__ == "__main__":
    source, target = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.appName("wordcount").getOrCreate()
    lines = spark.read.text(source)
    counts = (
        lines.selectExpr("explode(split(lower(value), '[^a-z]+')) AS word")
        .where("word != ''")
        .groupBy("word")
        .count()
    )
    counts.coalesce(1).write.mode("overwrite").json(target)
    print(f"{counts.count()} distinct words (Spark master {spark.sparkContext.master})")
    spark.stop()
