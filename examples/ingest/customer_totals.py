"""A plain PySpark job that an Airflow task starts (examples/ingest/dags/orders_dag.py): no lineagewire code.

lineagewire's emitter observes it when the environment turns it on (LINEAGEWIRE_EMITTER__ENABLED=true, or
spark.lineagewire.enabled=true), and links its run to the Airflow task's run from the parent the OpenLineage
provider passes (OPENLINEAGE_PARENT_ID / OPENLINEAGE_ROOT_PARENT_ID, or the spark.openlineage.parent* conf).
It reads the orders orders_ingest.py landed in LAKE/orders and writes each customer's total to
LAKE/customer_totals.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

lake = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lineagewire-lake"
spark = (
    SparkSession.builder.appName("customer_totals")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
orders = spark.read.parquet(f"{lake}/orders")
(orders.groupBy("customer_id").agg(F.sum("amount").alias("total"))
 .write.mode("overwrite").parquet(f"{lake}/customer_totals"))
spark.stop()
