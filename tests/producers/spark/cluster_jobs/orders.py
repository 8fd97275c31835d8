"""The cluster tests' job (tests/producers/spark/test_clusters.py): user code that knows nothing of lineagewire.

``orders.py <orders csv> <output folder> [ok|fail|hold]``: totals per customer, written as Parquet.
``fail``: a Python UDF raises on an executor. ``hold``: a Python UDF holds its task until the application
is killed (the test kills it through the cluster manager).
"""

import signal
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType


def checked(amount: float) -> float:
    if amount > 100:
        raise ValueError(f"bad amount {amount}")
    return amount


def held(amount: float) -> float:
    signal.pause()  # until the cluster manager's signal ends the application
    return amount


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "ok"
    spark = SparkSession.builder.appName("cluster_orders").getOrCreate()
    orders = spark.read.schema("order_id INT, customer STRING, amount DOUBLE").option("header", True).csv(source)
    if mode in ("fail", "hold"):
        orders = orders.withColumn("amount", F.udf(checked if mode == "fail" else held, DoubleType())("amount"))
    totals = orders.groupBy("customer").agg(F.sum(F.col("amount") * 2).alias("doubled_total"))
    totals.write.mode("overwrite").parquet(target)
    print(f"cluster_orders: wrote {target}")
    spark.stop()


if __name__ == "__main__":
    main()
