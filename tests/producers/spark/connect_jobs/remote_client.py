"""A thin Spark Connect client of a shared server: its own input and output, its own name and tag."""

import sys

from pyspark.sql import SparkSession

url, name, tag, folder = sys.argv[1:5]
spark = SparkSession.builder.remote(url).appName(name).getOrCreate()
spark.addTag(tag)
spark.range(20).selectExpr("id", "id % 3 AS k").write.mode("overwrite").parquet(f"{folder}/in")
(spark.read.parquet(f"{folder}/in").groupBy("k").count().withColumnRenamed("count", "n")
 .write.mode("overwrite").parquet(f"{folder}/out"))
print(name, "wrote", spark.read.parquet(f"{folder}/out").count(), flush=True)
spark.stop()
