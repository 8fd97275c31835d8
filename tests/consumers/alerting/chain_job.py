"""A job of the incident chain, an ordinary PySpark script: ``chain_job.py ROLE DIR [fail]``.

``producer`` writes DIR/orders; ``fail`` makes its overwrite die in a Python UDF, which leaves an empty folder
(Spark deletes the old files of an overwrite before it writes). ``consumer_a`` reads its columns a and b,
``consumer_b`` its column c, each writing a table of its own: with no orders they fail too (Spark cannot infer
the schema of an empty folder), as jobs downstream of a failure do.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

role, out = sys.argv[1], sys.argv[2]
fail = len(sys.argv) > 3 and sys.argv[3] == "fail"

spark = (
    SparkSession.builder.appName(role)
    .master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "1")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

if role == "producer":
    orders = spark.createDataFrame([(1, 25.0, "NL"), (2, 40.5, "DE")], "a INT, b DOUBLE, c STRING")
    if fail:
        @F.udf("double")
        def explode(x):  # noqa: ANN001, ANN202
            raise ValueError(f"bad amount {x}")

        orders = orders.withColumn("b", explode("b"))
    orders.write.mode("overwrite").parquet(f"{out}/orders")
else:
    orders = spark.read.parquet(f"{out}/orders")
    picked = orders.select("a", "b") if role == "consumer_a" else orders.select("c")
    picked.write.mode("overwrite").parquet(f"{out}/{role}")
spark.stop()
