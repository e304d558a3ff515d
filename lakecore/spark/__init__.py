"""lakecore on Spark: the only package that imports pyspark.

* ``read_table(spark, warehouse, "db.t", ...)``: a table as a DataFrame (executors read).
* ``ingest.ingest_dataframe`` / ``ingest.ingest_parquet`` / ``compact.compact_table`` /
  ``maintain.maintain_table``: the jobs' bodies, usable from a session of your own.
* ``lakecore.spark.jobs.{ingest,compact,maintain}``: spark-submit entry points.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_table"]


def __getattr__(name: str) -> Any:
    # Lazy on purpose: ``python -m lakecore.spark.package`` (the Makefile's zip) imports this
    # package on any Python, pyspark or not, and executors need none of the driver modules.
    if name == "read_table":
        from lakecore.spark.read import read_table

        return read_table
    raise AttributeError(name)
