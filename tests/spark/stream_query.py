"""A streaming query for the exactly-once tests: Parquet files (one per micro-batch), or a
lakecore table read with a consumer, into a lakecore table through
``writeStream.format("lakecore")``. Run as a subprocess, so the test can SIGKILL the whole
query (driver JVM and Python workers) at a pause point and restart it from the same checkpoint.

``python -m tests.spark.stream_query WAREHOUSE TABLE SOURCE CHECKPOINT``: ``SOURCE`` is a
directory of Parquet files, or ``lakecore:<db.table>:<consumer-id>``.
"""

from __future__ import annotations

import os
import sys

from tests.spark.spark_conf import SESSION_CONF

SOURCE_DDL = "id BIGINT, v STRING"


def main(warehouse: str, table: str, source: str, checkpoint: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lakecore.spark import register

    builder = SparkSession.builder.master("local[1]").appName("lakecore-stream-test")
    for k, v in SESSION_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    if source.startswith("lakecore:"):
        _, name, consumer = source.split(":")
        df = (spark.readStream.format("lakecore").option("warehouse", warehouse)
              .option("consumer-id", consumer).load(name))
    else:
        df = spark.readStream.schema(SOURCE_DDL).option("maxFilesPerTrigger", 1).parquet(source)
    query = (df.writeStream.format("lakecore").option("warehouse", warehouse)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(table))
    query.awaitTermination()
    print("done", query.id, flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
