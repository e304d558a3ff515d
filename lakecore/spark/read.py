"""Reading a table into a Spark DataFrame. The driver plans the snapshot's splits (pruned by
the filter) and divides them (``native_plan``): files that need no merge are read by Spark's own
Parquet reader, deletion vectors applied natively; the rest is read and merged by lakecore on
the executors. ``plan_read`` returns that plan as a value; ``read_table`` executes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakecore.errors import OptionError
from lakecore.options.registry import INCREMENTAL_BETWEEN
from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.spark.native_plan import NativeReadPlan, plan_native_read
from lakecore.spark.table_ref import TableRef, open_catalog
from lakecore.spark.types import spark_schema
from lakecore.table import FileStoreTable

Filter = Predicate | Callable[[PredicateBuilder], Predicate]


@dataclass(frozen=True)
class TableRead:
    """A planned read: the table (at the snapshot's schema), the executors' handle, the
    DataFrame schema and the native / merge plan."""

    table: FileStoreTable
    ref: TableRef
    schema: StructType
    plan: NativeReadPlan


def plan_read(
    warehouse: str,
    identifier: str,
    snapshot_id: int | None = None,
    filter: Filter | None = None,  # noqa: A002 - the name users know from pypaimon
    catalog_options: Mapping[str, str] | None = None,
    projection: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    native: bool = True,
) -> TableRead:
    """Plan a read on the driver (metadata only). ``options`` are table options for this read
    (time travel: ``scan.snapshot-id``, ``scan.tag-name``, ``scan.timestamp-millis``, ...);
    incremental reads belong to the data source (``incremental-between``)."""
    dynamic = dict(options or {})
    if INCREMENTAL_BETWEEN.key in dynamic:
        raise OptionError(INCREMENTAL_BETWEEN.key, (
            "incremental reads carry row kinds: read them with "
            "spark.read.format('lakecore').option('incremental-between', ...)"))
    if snapshot_id is not None:
        dynamic["scan.snapshot-id"] = str(snapshot_id)
    catalog = open_catalog(warehouse, catalog_options)
    try:  # planning reads metadata only; the catalog (and any lock connection) is done after
        table = catalog.get_table(identifier)
        if dynamic:
            table = table.copy(dynamic)
        rb = table.new_read_builder()
        predicate = filter(rb.new_predicate_builder()) if callable(filter) else filter
        rb = rb.with_filter(predicate)
        if projection is not None:
            rb = rb.with_projection(list(projection))
        schema = spark_schema(rb.read_type())
        scan = rb.new_scan().plan()
    finally:
        catalog.close()
    columns = list(projection) if projection is not None else table.schema.row_type.names
    plan = plan_native_read(table, scan.splits(), columns, predicate, native, scan.snapshot_id)
    return TableRead(table, TableRef.of(table, warehouse, catalog_options), schema, plan)


def read_table(
    spark: SparkSession,
    warehouse: str,
    identifier: str,
    snapshot_id: int | None = None,
    filter: Filter | None = None,  # noqa: A002 - the name users know from pypaimon
    catalog_options: Mapping[str, str] | None = None,
    projection: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    native: bool = True,
) -> DataFrame:
    """The table (or snapshot ``snapshot_id`` of it, or the snapshot ``options`` travel to)
    as a DataFrame in the data source's schema.

    ``filter`` is a lakecore ``Predicate`` or a function building one from a
    ``PredicateBuilder`` (``lambda pb: pb.equal("dt", "2026-11-01")``); it prunes partitions
    and files on the driver and rows in the read. Files that need no merge are read by Spark's
    own Parquet reader; ``native=False`` reads every split with lakecore on the executors.
    """
    from lakecore.spark.native_read import execute

    planned = plan_read(warehouse, identifier, snapshot_id, filter, catalog_options,
                        projection, options, native)
    return execute(spark, planned.table, planned.ref, planned.plan, planned.schema)
