"""An ordinary PySpark job with no lineagewire code in it.

It writes some raw CSV and JSON, then reads them back, joins, filters and
aggregates, and writes a parquet dataset and a catalog table: the kind of
job `lineagewire instrument -- python examples/daily_orders.py OUT_DIR` observes.
The last, optional argument `fail` makes it die in a Python UDF; `v2` runs the job's
next version, which no longer writes the `orders` column (examples/orders_report.py reads it).
"""

import pathlib
import shutil
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lineagewire-demo"
fail = len(sys.argv) > 2 and sys.argv[2] == "fail"
v2 = len(sys.argv) > 2 and sys.argv[2] == "v2"

spark = (
    SparkSession.builder.appName("daily_orders")
    .master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.warehouse.dir", f"{out}/warehouse")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

orders = spark.createDataFrame(
    [(1, 10, "2026-11-21", 25.0), (2, 11, "2026-11-21", 40.5),
     (3, 10, "2026-11-22", 12.0), (4, 12, "2026-11-22", 99.9)],
    "order_id INT, customer_id INT, order_date STRING, amount DOUBLE",
)
customers = spark.createDataFrame([(10, "NL"), (11, "DE"), (12, "NL")], "customer_id INT, country STRING")
orders.write.mode("overwrite").option("header", True).csv(f"{out}/raw/orders")
customers.write.mode("overwrite").json(f"{out}/raw/customers")

raw_orders = spark.read.option("header", True).schema(orders.schema).csv(f"{out}/raw/orders")
raw_customers = spark.read.schema(customers.schema).json(f"{out}/raw/customers")

daily = (
    raw_orders.join(raw_customers, "customer_id")
    .where(F.col("amount") > 10)
    .groupBy("order_date", "country")
    .agg(F.sum("amount").alias("revenue"), F.count("order_id").alias("orders"))
)
if v2:
    daily = daily.drop("orders")
daily.write.mode("overwrite").parquet(f"{out}/marts/daily_revenue")
# The session's catalog lives in memory, so a run on an OUT_DIR an earlier run wrote (v2 after the
# first version) finds the table's folder but not the table; it replaces it, as the DROP would.
table_dir = pathlib.Path(f"{out}/warehouse/daily_revenue_nl")
if table_dir.is_dir() and not spark.catalog.tableExists("daily_revenue_nl"):
    shutil.rmtree(table_dir)
spark.sql("DROP TABLE IF EXISTS daily_revenue_nl")
daily.where(F.col("country") == "NL").write.mode("overwrite").saveAsTable("daily_revenue_nl")

if fail:
    @F.udf("double")
    def explode(x):  # noqa: ANN001, ANN202
        raise ValueError(f"bad amount {x}")

    raw_orders.select(explode("amount")).collect()

print(f"daily_orders: wrote {daily.count()} rows to {out}/marts/daily_revenue and table daily_revenue_nl")
spark.stop()
