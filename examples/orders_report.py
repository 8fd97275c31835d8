"""An ordinary PySpark job downstream of daily_orders, with no lineagewire code in it.

It reads the `order_date` and `orders` columns of daily_orders' parquet output and
writes the orders per day: `lineagewire instrument -- python examples/orders_report.py OUT_DIR`
with the OUT_DIR daily_orders wrote to. When daily_orders stops writing `orders`,
this is the job that breaks.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lineagewire-demo"

spark = (
    SparkSession.builder.appName("orders_report")
    .master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

report = (
    spark.read.parquet(f"{out}/marts/daily_revenue")
    .groupBy("order_date")
    .agg(F.sum("orders").alias("orders"))
)
report.write.mode("overwrite").parquet(f"{out}/reports/orders_per_day")
print(f"orders_report: wrote the orders per day to {out}/reports/orders_per_day")
spark.stop()
