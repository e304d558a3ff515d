"""Executing a ``NativeReadPlan``: one Spark Parquet scan per native group, each file's columns
mapped to the read's, deletion vectors applied in the scan by a filter on each row's file size
and row index (``deletion_filter``; else a broadcast anti-join on (file, row index)),
the splits to merge read by lakecore on the executors (``tasks.ReadTask``), all of it one
union in exactly the Spark schema of the ``lakecore`` data source.

Spark's file sources make every column nullable; a column the table declares NOT NULL (its
primary key, say) is wrapped in ``coalesce`` with a constant so the union keeps the table's
nullability. Paimon writers never put a null into such a column, so the constant is never
taken (a file that broke the rule would show it instead of failing as lakecore's read does).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812
from pyspark.sql.types import BinaryType, StructField, StructType

from lakecore.io.formats import ORC
from lakecore.read.deletion_vectors import read_vectors
from lakecore.schema.types import to_arrow
from lakecore.spark import jvm
from lakecore.spark.deletion_filter import keep_filter
from lakecore.spark.native_plan import NativeGroup, NativeReadPlan
from lakecore.spark.spark_filters import to_column
from lakecore.spark.table_ref import TableRef
from lakecore.spark.tasks import SPLIT_COLUMN, ReadTask
from lakecore.spark.types import result_arrow_schema, spark_schema
from lakecore.table import FileStoreTable

FILE = "__lakecore_file"
ROW = "__lakecore_row"
# deleted positions up to this many are broadcast to every task (about 40 bytes each in the
# JVM's hashed relation); more are left to Spark's own choice of join
BROADCAST_MAX_ROWS = 4_000_000
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
# Spark's reader option (DataSource.GLOB_PATHS_KEY) that takes each path as it is: a data
# file's path is a name, never a pattern; globbed, a warehouse under a directory named with
# "[", "{", "*" or "?" would match nothing (PATH_NOT_FOUND)
GLOB_PATHS = "__globPaths__"


def execute(spark: SparkSession, table: FileStoreTable, ref: TableRef, plan: NativeReadPlan,
            schema: StructType) -> DataFrame:
    """The plan's rows as a DataFrame of ``schema`` (the read's columns, in order)."""
    read_schema = spark_schema(table.new_read_builder()
                               .with_projection(list(plan.read_columns)).read_type())
    parts = [_native(spark, table, g, read_schema, plan) for g in plan.groups]
    if plan.merge_splits:
        parts.append(_merged(spark, ref, plan, schema))
    if not parts:
        return spark.createDataFrame([], schema)
    out = reduce(DataFrame.union, parts)
    assert out.schema == schema, (out.schema, schema)
    return out


def _native(spark: SparkSession, table: FileStoreTable, group: NativeGroup,
            read_schema: StructType, plan: NativeReadPlan) -> DataFrame:
    """One Spark scan of the group's files, in a few py4j calls however many files and
    columns it has (``jvm``): the paths go as one string, the columns as SQL text."""
    file_schema = table.schema_of(group.schema_id)
    by_name = {f.name: f for f in file_schema.fields}
    scan_schema = spark_schema(pa.schema([
        pa.field(n, to_arrow(by_name[n].type), True) for n in group.file_columns]))
    paths = [spark_path(p) for p in group.paths]
    with _listing_on_driver(spark, paths):
        df = jvm.read_files(spark, "orc" if group.format == ORC else "parquet", scan_schema,
                            paths, {"mergeSchema": "false", GLOB_PATHS: "false"})
    if group.deletion_files:
        df = _without_deleted(spark, table, df, group)
    fields = {f.name: f for f in read_schema.fields}
    columns = [_column_sql(c.name, c.file_name, c.cast, fields[c.name]) for c in group.columns]
    if plan.predicate is None:  # the read's columns are the group's
        return jvm.select_sql(df, spark, columns)
    df = jvm.select_sql(df, spark, columns).where(to_column(plan.predicate))
    return jvm.select_sql(df, spark, [jvm.quoted(c) for c in plan.columns])


def _column_sql(name: str, file_name: str | None, cast: bool, field: StructField) -> str:
    """One read column as SQL: the file's column (cast to the read type where it widened),
    a null for a column added since; a NOT NULL column wrapped in ``coalesce`` with a constant
    (module docstring)."""
    t = field.dataType
    if file_name is None:
        expr = f"CAST(NULL AS {jvm.sql_type(t)})"
    else:
        expr = jvm.quoted(file_name)
        if cast:
            expr = f"CAST({expr} AS {jvm.sql_type(t)})"
    if not field.nullable:
        expr = f"coalesce({expr}, {_constant(t)})"
    return f"{expr} AS {jvm.quoted(name)}"


def _without_deleted(spark: SparkSession, table: FileStoreTable, df: DataFrame,
                     group: NativeGroup) -> DataFrame:
    """``df`` minus the rows the deletion vectors mark. The vectors are read on the driver;
    each row is tested against its file's vector inside the scan (``deletion_filter``) where
    the scan's files allow it, else the deleted (file name, row index) pairs are (up to
    ``BROADCAST_MAX_ROWS``) broadcast and anti-joined with Spark's hidden ``_metadata``
    columns."""
    positions = read_vectors(table, group.deletion_files)
    names = [n for n, p in positions.items() if len(p)]
    if not names:
        return df
    keep = keep_filter(spark, df, group.files, positions)
    if keep is not None:
        return df.where(keep)
    deleted = pa.table({
        FILE: pa.chunked_array([pa.array([n] * len(positions[n]), pa.string()) for n in names]),
        ROW: pa.chunked_array([pa.array(positions[n].astype("int64")) for n in names]),
    })
    gone = spark.createDataFrame(deleted)
    if deleted.num_rows <= BROADCAST_MAX_ROWS:  # else Spark picks the join (a shuffle, say)
        gone = F.broadcast(gone)
    with_pos = df.select("*", F.col("_metadata.file_name").alias(FILE),
                         F.col("_metadata.row_index").alias(ROW))
    return with_pos.join(gone, [FILE, ROW], "left_anti").drop(FILE, ROW)


def _merged(spark: SparkSession, ref: TableRef, plan: NativeReadPlan,
            schema: StructType) -> DataFrame:
    """The splits to merge, read by lakecore on the executors: packed into tasks by Spark's
    own file-scan sizing (``SplitSizing``, as the data source packs them)."""
    from lakecore.spark import split_sizing

    task = ReadTask(ref, plan.columns, plan.predicate, result_arrow_schema(schema))
    groups = [[pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL) for s in group]
              for group in split_sizing(spark).pack(plan.merge_splits)]
    # one element per slice: each task reads exactly one packed group
    rdd = spark.sparkContext.parallelize(groups, len(groups)).flatMap(_one_per_row)
    seeds = spark.createDataFrame(rdd, StructType([StructField(SPLIT_COLUMN, BinaryType())]))
    return seeds.mapInArrow(task, schema)


def _one_per_row(group: list[bytes]) -> list[tuple[bytes]]:
    return [(blob,) for blob in group]


def _constant(t: T.DataType) -> str:
    """Some constant of type ``t``, in SQL (the ``coalesce`` of a NOT NULL column)."""
    if isinstance(t, T.BooleanType):
        return "FALSE"
    if isinstance(t, T.DecimalType):  # a literal of the type's scale: the cast cannot fail
        zero = "0BD" if t.scale == 0 else "0." + "0" * t.scale + "BD"
        return f"CAST({zero} AS {jvm.sql_type(t)})"
    if isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
                      T.DoubleType)):
        return f"CAST(0 AS {jvm.sql_type(t)})"
    if isinstance(t, T.StringType):
        return "''"
    if isinstance(t, T.BinaryType):
        return "X''"
    if isinstance(t, T.DateType):
        return "DATE'1970-01-01'"
    if isinstance(t, T.TimestampNTZType):  # typed literals: a cast from a string may fail
        return "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
    if isinstance(t, T.TimestampType):
        return "TIMESTAMP_LTZ'1970-01-01 00:00:00Z'"
    if isinstance(t, T.ArrayType):
        return f"CAST(array() AS {jvm.sql_type(t)})"
    if isinstance(t, T.MapType):
        return f"CAST(map() AS {jvm.sql_type(t)})"
    assert isinstance(t, T.StructType)  # every field its own constant
    fields = ", ".join(f"{_string(f.name)}, {_constant(f.dataType)}" for f in t.fields)
    return f"CAST(named_struct({fields}) AS {jvm.sql_type(t)})"


def _string(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@contextmanager
def _listing_on_driver(spark: SparkSession, paths: list[str]) -> Iterator[None]:
    """Spark looks up the status of every path it is given, with a Spark job once there are
    more than ``spark.sql.sources.parallelPartitionDiscovery.threshold`` (32) of them: 1-2 s
    on a loaded 2-core machine, where the driver needs microseconds per local file. For local
    files the threshold is raised while the scan is made; an object store's files (a request
    each) keep Spark's parallel lookup."""
    if len(paths) <= 32 or not all(p.startswith("file:") for p in paths):
        yield
        return
    before = str(spark.conf.get(LISTING_THRESHOLD) or "32")
    spark.conf.set(LISTING_THRESHOLD, str(max(int(before), len(paths) + 1)))
    try:
        yield
    finally:
        spark.conf.set(LISTING_THRESHOLD, before)


def spark_path(path: str) -> str:
    """A data file's path for Spark: a local one as a ``file:`` URI (a bare path would be
    resolved against the cluster's default file system); a URI as it is (Spark must reach its
    scheme: an ``s3://`` warehouse needs Hadoop's S3 file system mapped to ``s3``)."""
    return path if "://" in path else "file://" + path
