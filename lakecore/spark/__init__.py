"""lakecore on Spark: the only package that imports pyspark.

* ``register(spark)``: the ``lakecore`` data source (``spark.read.format("lakecore")``,
  ``df.write.format("lakecore")``, streams; ``lakecore.spark.datasource``).
* ``register_tables(spark, warehouse)``: every table as a temporary view for ``spark.sql``.
* ``read_table(spark, warehouse, "db.t", ...)``: a table as a DataFrame: Spark's own Parquet
  scans of the files that need no merge, lakecore's merge on the executors for the rest.
* ``ingest.ingest_dataframe`` / ``ingest.ingest_parquet`` / ``compact.compact_table`` /
  ``maintain.maintain_table``: the jobs' bodies, usable from a session of your own.
* ``lakecore.spark.jobs.{ingest,compact,maintain}``: spark-submit entry points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakecore.spark.datasource.batch_read import SplitSizing

__all__ = ["read_table", "register", "register_tables"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# Spark 4.1+ caps each Arrow batch it hands a Python worker by bytes as well as rows
# (SPARK-51316; PySpark 4.3's default 64 MiB), and to keep to the cap it sizes the batch after
# every row it adds: 55 % of the JVM's time in a ``df.write.format("lakecore")`` (JFR
# profile, 10M rows; docs/spark-datasource.md, "Batch write"). Int.MaxValue is Spark's "no cap",
# the one value for which it skips the sizing: batches are then bounded by
# ``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000 rows) alone.
ARROW_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"
NO_ARROW_BYTE_CAP = "2147483647"


def register(spark: Any, filter_pushdown: bool = True, arrow_byte_cap: bool = False) -> None:
    """Register the ``lakecore`` data source in ``spark``'s session.

    Spark plans Python data sources in workers without a session, so what they need from it
    is captured now: the ``spark.lakecore.*`` conf (``warehouse``, catalog options) and the
    file-split sizing (``spark.sql.files.maxPartitionBytes`` / ``openCostInBytes``, default
    parallelism), by which splits are packed into input partitions. With ``filter_pushdown``
    (the default) this also sets ``spark.sql.python.filterPushdown.enabled`` (PySpark 4.3
    fails planning a reader that pushes filters while it is off); with False the conf is left
    alone and Spark applies every filter itself. Register again after changing either.

    Without ``arrow_byte_cap`` (the default), a session that leaves
    ``spark.sql.execution.arrow.maxBytesPerBatch`` unset gets Spark's "no cap" for it
    (``ARROW_BYTES_CONF``): Spark then stops sizing every row it hands a Python writer, which
    made ``df.write.format("lakecore")`` 1.4-1.7x faster (the batches stay 10,000 rows). The
    conf is session-wide: a session whose own Python UDFs take very wide rows may want Spark's
    byte cap, so pass True (or set the conf yourself) and the conf is left alone.
    """
    from lakecore.spark.datasource.source import registered_class

    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    if not arrow_byte_cap and spark.conf.get(ARROW_BYTES_CONF, None) is None:
        spark.conf.set(ARROW_BYTES_CONF, NO_ARROW_BYTE_CAP)
    conf = {k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.lakecore.")}
    spark.dataSource.register(registered_class(conf, filter_pushdown, split_sizing(spark)))


def split_sizing(spark: Any) -> SplitSizing:
    """Spark's file-scan sizing of ``spark``'s session (``spark.sql.files.maxPartitionBytes``,
    ``openCostInBytes``, default parallelism), by which lakecore packs splits into tasks."""
    from lakecore.spark.datasource.batch_read import SplitSizing

    return SplitSizing(
        _bytes(spark.conf.get("spark.sql.files.maxPartitionBytes", "128m")),
        _bytes(spark.conf.get("spark.sql.files.openCostInBytes", "4m")),
        spark.sparkContext.defaultParallelism)


def _bytes(text: str) -> int:
    """A Spark byte size (``134217728``, ``128m``, ``4MB``) in bytes."""
    from lakecore.options.parse import parse_memory_size

    return int(parse_memory_size(text))


def __getattr__(name: str) -> Any:
    # Lazy on purpose: ``python -m lakecore.spark.package`` (the Makefile's zip) imports this
    # package on any Python, pyspark or not, and executors need none of the driver modules.
    if name == "read_table":
        from lakecore.spark.read import read_table

        return read_table
    if name == "register_tables":
        from lakecore.spark.datasource.sql import register_tables

        return register_tables
    raise AttributeError(name)
