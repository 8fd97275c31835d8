"""A plain PySpark job, as a team that already runs the openlineage-spark jar has it: no lineagewire code.

It lands the day's orders as Parquet in LAKE/orders (read by the dbt project beside this file and by
customer_totals.py). Run with openlineage-spark's listener pointed at `lineagewire ingest openlineage`:

    spark-submit --packages io.openlineage:openlineage-spark_2.13:1.53.0 \
      --conf spark.extraListeners=io.openlineage.spark.agent.OpenLineageSparkListener \
      --conf spark.openlineage.transport.type=http --conf spark.openlineage.transport.url=http://127.0.0.1:5000 \
      --conf spark.openlineage.namespace=spark-ol examples/ingest/orders_ingest.py /tmp/lake
"""

import sys

from pyspark.sql import SparkSession

lake = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lineagewire-lake"
spark = (
    SparkSession.builder.appName("orders_ingest")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
orders = spark.createDataFrame(
    [(1, 10, 25.0), (2, 11, 40.5), (3, 10, 12.0), (4, 12, 99.9)],
    "order_id INT, customer_id INT, amount DOUBLE",
)
orders.write.mode("overwrite").parquet(f"{lake}/orders")
spark.stop()
