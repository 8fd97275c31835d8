"""A thin Spark Connect client whose server PySpark starts in this process: remote("local[2]")."""

import sys

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = (SparkSession.builder.remote("local[2]").appName("connect-local")
         .config("spark.connect.grpc.binding.address", "127.0.0.1").getOrCreate())
spark.range(5).selectExpr("id", "id * 2 AS twice").write.mode("overwrite").parquet(f"{out}/numbers")
spark.read.parquet(f"{out}/numbers").selectExpr("twice + 1 AS odd").write.mode("overwrite").parquet(f"{out}/odd")
print("connect-local: wrote", spark.read.parquet(f"{out}/odd").count(), flush=True)
spark.stop()
