"""Batch read through the data source: the planner worker plans the splits (one per
partition and bucket, pruned by the pushed filters), packed into input partitions by Spark's
own file-scan sizing (``SplitSizing``); the executors read and merge each split (or apply its
deletion vectors) with lakecore and yield Arrow batches in exactly the schema Spark declared.

Two readers, because PySpark 4.3 fails the planning of a reader that implements
``pushFilters`` while ``spark.sql.python.filterPushdown.enabled`` is off: ``register``
records the session's setting and ``make_reader`` returns the one that fits it.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StringType, StructField, StructType

from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.read.scan import Split
from lakecore.read.split_read import ROW_KIND_COLUMN
from lakecore.spark.datasource.filters import translate_filters
from lakecore.spark.datasource.options import SourceOptions, open_table, reads_changelog
from lakecore.spark.table_ref import TableRef
from lakecore.spark.types import cast_batch, result_arrow_schema, spark_schema
from lakecore.table import FileStoreTable

# Paimon's Spark connector names the row kind column of incremental / audit-log reads so.
ROWKIND = "rowkind"
INSERT = "+I"


def is_incremental(opts: SourceOptions) -> bool:
    return "incremental-between" in opts.table_options or reads_changelog(opts)


def read_spark_schema(table: FileStoreTable, opts: SourceOptions) -> StructType:
    """The DataFrame schema: the ``columns`` projection, and for an incremental read the row
    kind first (Paimon's ``rowkind``)."""
    rb = table.new_read_builder().with_projection(
        list(opts.columns) if opts.columns is not None else None)
    schema = spark_schema(rb.read_type())
    if is_incremental(opts):
        schema = StructType([StructField(ROWKIND, StringType(), False), *schema.fields])
    return schema


@dataclass(frozen=True)
class SplitSizing:
    """Spark's rule for file scans (``FilePartition.maxSplitBytes``), captured from the session
    by ``register``: input partitions of at most ``min(max_partition_bytes, max(open_cost,
    total / parallelism))`` bytes, each file costing ``open_cost`` more."""

    max_partition_bytes: int = 128 << 20
    open_cost: int = 4 << 20
    parallelism: int = 2

    def pack(self, splits: Sequence[Split]) -> list[list[Split]]:
        """Splits grouped into input partitions (largest first, each into the first group
        with room), so a task reads several small buckets rather than one each."""
        def cost(s: Split) -> int:
            return sum(f.file_size + self.open_cost for f in s.files)

        total = sum(cost(s) for s in splits)
        limit = min(self.max_partition_bytes,
                    max(self.open_cost, total // max(1, self.parallelism)))
        groups: list[list[Split]] = []
        sizes: list[int] = []
        for s in sorted(splits, key=cost, reverse=True):
            c = cost(s)
            for i, size in enumerate(sizes):
                if size + c <= limit:
                    groups[i].append(s)
                    sizes[i] += c
                    break
            else:
                groups.append([s])
                sizes.append(c)
        return groups


class LakecoreReader(DataSourceReader):
    """Reads one table snapshot (or an incremental range); no filter pushdown (Spark filters
    every row itself)."""

    def __init__(self, opts: SourceOptions, schema: StructType,
                 sizing: SplitSizing = SplitSizing()) -> None:
        self.opts = opts
        self.schema = schema
        self.sizing = sizing
        self.target = result_arrow_schema(schema)
        self.predicate: Predicate | None = None

    def partitions(self) -> Sequence[InputPartition]:
        catalog, table = open_table(self.opts)
        try:  # planning reads metadata only; the catalog (and its lock) is done after
            rb = table.new_read_builder().with_filter(self.predicate)
            splits = rb.new_scan().plan().splits()
        finally:
            catalog.close()
        # Spark pickles this reader before it asks for the partitions: what the executors need
        # from planning travels in each partition's value.
        ref = TableRef.of(table, self.opts.warehouse, self.opts.catalog_options)
        return [InputPartition(pickle.dumps((ref, group), protocol=pickle.HIGHEST_PROTOCOL))
                for group in self.sizing.pack(splits)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # Spark's stand-in partition of an empty plan
            return
        ref, splits = pickle.loads(partition.value)
        columns = self.opts.columns
        rb = ref.load().new_read_builder().with_filter(self.predicate)
        if columns is not None:
            rb = rb.with_projection(list(columns))
        read = rb.new_read()
        for split in splits:
            for batch in read.to_arrow_batch_reader([split]):
                if batch.num_rows:
                    yield cast_batch(self._shape(batch), self.target)

    def _shape(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The row kind (``rowkind``, first) of an incremental read: its ``_ROW_KIND``
        (docs/incremental-reads.md); ``+I`` for rows read without one."""
        if not is_incremental(self.opts):
            return batch
        names = batch.schema.names
        if ROW_KIND_COLUMN in names:
            kinds = batch.column(names.index(ROW_KIND_COLUMN))
            batch = batch.drop_columns([ROW_KIND_COLUMN])
        else:
            kinds = pa.array([INSERT] * batch.num_rows, pa.string())
        return batch.add_column(0, ROWKIND, kinds)


class LakecoreFilteringReader(LakecoreReader):
    """``LakecoreReader`` with filter pushdown: the filters lakecore can evaluate exactly
    prune partitions and files on the driver and rows on the executors; the rest go back to
    Spark."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802
        catalog, table = open_table(self.opts)
        catalog.close()
        pb = PredicateBuilder(table.schema.row_type)
        handled, rest = translate_filters(filters, pb, table)
        if handled:
            self.predicate = PredicateBuilder.and_predicates(handled)
        return rest


def make_reader(opts: SourceOptions, schema: StructType, filter_pushdown: bool,
                sizing: SplitSizing = SplitSizing()) -> LakecoreReader:
    cls = LakecoreFilteringReader if filter_pushdown else LakecoreReader
    return cls(opts, schema, sizing)
