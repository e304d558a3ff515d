"""Reading a table into a Spark DataFrame: the driver plans splits (one per partition and
bucket, pruned by the filter), the executors read and merge them with lakecore."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, StructField, StructType

from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.spark.table_ref import TableRef, open_catalog
from lakecore.spark.tasks import SPLIT_COLUMN, ReadTask
from lakecore.spark.types import result_arrow_schema, spark_schema

Filter = Predicate | Callable[[PredicateBuilder], Predicate]


def read_table(
    spark: SparkSession,
    warehouse: str,
    identifier: str,
    snapshot_id: int | None = None,
    filter: Filter | None = None,  # noqa: A002 - the name users know from pypaimon
    catalog_options: Mapping[str, str] | None = None,
    projection: Sequence[str] | None = None,
) -> DataFrame:
    """The table (or snapshot ``snapshot_id`` of it) as a DataFrame.

    ``filter`` is a lakecore ``Predicate`` or a function building one from a
    ``PredicateBuilder`` (``lambda pb: pb.equal("dt", "2026-11-01")``); it prunes partitions
    and files on the driver and rows on the executors.
    """
    catalog = open_catalog(warehouse, catalog_options)
    try:  # planning reads metadata only; the catalog (and any lock connection) is done after
        table = catalog.get_table(identifier)
        if snapshot_id is not None:
            table = table.copy({"scan.snapshot-id": str(snapshot_id)})
        rb = table.new_read_builder()
        predicate = filter(rb.new_predicate_builder()) if callable(filter) else filter
        rb = rb.with_filter(predicate)
        if projection is not None:
            rb = rb.with_projection(list(projection))
        schema = spark_schema(rb.read_type())
        splits = rb.new_scan().plan().splits()
    finally:
        catalog.close()
    if not splits:
        return spark.createDataFrame([], schema)
    ref = TableRef.of(table, warehouse, catalog_options)
    task = ReadTask(ref, tuple(projection) if projection is not None else None, predicate,
                    result_arrow_schema(schema))
    blobs = [(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL),) for s in splits]
    rdd = spark.sparkContext.parallelize(blobs, len(blobs))
    seeds = spark.createDataFrame(rdd, StructType([StructField(SPLIT_COLUMN, BinaryType())]))
    return seeds.mapInArrow(task, schema)
