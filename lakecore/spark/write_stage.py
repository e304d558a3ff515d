"""The ingest's Spark part: source batches (``SplitTask``) or Parquet files
(``FileSplitTask``) -> stage 1 pieces -> shuffle by (partition, bucket) -> ``WriteTask``
(stage 2) -> CommitMessages on the driver.

Failures: stage 1 writes no data file, so when it rejects the input the job simply fails (the
error is re-raised as lakecore's, not as a Java trace). A stage-2 task that fails deletes its
own files and reports the error as a row; the driver then deletes every other task's files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import CommitMessage
from lakecore.spark import ARROW_BYTES_CONF, NO_ARROW_BYTE_CAP
from lakecore.spark.file_source import UNIT_DDL, FileSplitTask, ParquetSource, read_units
from lakecore.spark.messages import (
    decode_all,
    message_accumulator,
    spark_failure,
    task_failure,
)
from lakecore.spark.shuffle import GROUP_COLUMN, SPLIT_RESULT_DDL, SplitTask
from lakecore.spark.table_ref import TableRef
from lakecore.spark.tasks import WRITE_RESULT_DDL, WriteTask
from lakecore.table import FileStoreTable
from lakecore.write.bucket_assigner import num_assigners_for
from lakecore.write.routing import AssignerChannels

log = logging.getLogger("lakecore.spark.ingest")
PlanMaker = Callable[[object], DataFrame]
# What the ingest sets while it runs, where the session leaves a setting alone (unset, or at
# the value named here; ``register`` sets the byte cap to Spark's "no cap"): bigger batches
# into stage 1 (fewer round trips), and, when stage 1 reads files itself (its input rows are a
# few file units), a byte cap so a batch of shuffled pieces stays small: at 4 MiB the JVM
# streams a write task's pieces to Python while it reads the next shuffle blocks, where with
# one batch per task (it was 256 MiB) each side waited for the other (measured on the 10M-row
# ingest bench: the write stage 3.2 -> 2.1 s, 8 % less CPU). When stage 1 is fed the source's
# rows by Spark there is no cap: Spark sizes a capped batch after every row it adds, which
# cost more than the streaming saved (10M-row ingest_dataframe: 10.9 s with 4 MiB, 8.0 s
# without).
_RECORDS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
_ARROW_RECORDS = ("10000", "100000")  # (Spark's default, the ingest's)
_PIECE_BYTES = str(4 << 20)


@contextmanager
def arrow_batches(spark: SparkSession, rows_from_spark: bool) -> Iterator[None]:
    """The ingest's Arrow batch settings (above) where the session leaves them alone;
    restored afterwards. ``rows_from_spark``: stage 1 is fed the source's rows by Spark."""
    wanted = {_RECORDS_CONF: _ARROW_RECORDS,
              ARROW_BYTES_CONF: (NO_ARROW_BYTE_CAP,
                                 NO_ARROW_BYTE_CAP if rows_from_spark else _PIECE_BYTES)}
    changed: dict[str, str | None] = {}
    for key, (default, ours) in wanted.items():
        current = spark.conf.get(key, None)
        if current is None or current == default:
            spark.conf.set(key, ours)
            changed[key] = current
    try:
        yield
    finally:
        for key, value in changed.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


Static = tuple[tuple[str, str], ...] | None


def split_dataframe(df: DataFrame, table: FileStoreTable, ref: TableRef, static: Static,
                    channels: AssignerChannels | None = None) -> DataFrame:
    """Stage 1 over a DataFrame: its Arrow batches cut into (partition, bucket) pieces, or
    (partition, assigner channel) pieces for a dynamic-bucket table."""
    return df.select(*table.schema.row_type.names).mapInArrow(
        SplitTask(ref, static, channels), SPLIT_RESULT_DDL)


def assigner_channels(spark: SparkSession, table: FileStoreTable,
                      parallelism: int | None) -> AssignerChannels:
    """A dynamic-bucket table's assigner layout: one channel per write task
    (``dynamic-bucket.assigner-parallelism``, else the job's parallelism, else Spark's
    default), ``dynamic-bucket.initial-buckets`` of them sharing each partition."""
    opts = table.options
    channels = (opts.dynamic_bucket_assigner_parallelism or parallelism
                or spark.sparkContext.defaultParallelism)
    return AssignerChannels(channels,
                            num_assigners_for(channels, opts.dynamic_bucket_initial_buckets))


def split_parquet(spark: SparkSession, source: ParquetSource, ref: TableRef, static: Static
                  ) -> DataFrame:
    """Stage 1 over Parquet files: each task reads a file (or a run of its row groups) with
    pyarrow and cuts it."""
    sc = spark.sparkContext
    units = read_units(source, sc.defaultParallelism)
    seeds = spark.createDataFrame(sc.parallelize(units, len(units)), UNIT_DDL)
    return seeds.mapInArrow(FileSplitTask(ref, static, source.uri, source.base),
                            SPLIT_RESULT_DDL)


def write_plan(table: FileStoreTable, ref: TableRef, commit_user: str, static: Static,
               parallelism: int | None, accumulator: object, *, pieces: DataFrame | None = None,
               rows: DataFrame | None = None, num_assigners: int = 1) -> DataFrame:
    """The DataFrame whose ``collect()`` writes everything (one result row per write task):
    stage-1 ``pieces`` shuffled by (partition, bucket), or, for a table without fixed buckets
    (nothing to own), the source ``rows`` written where they are. Dynamic-bucket pieces are
    shuffled by assigner channel; ``num_assigners`` is their layout's."""
    if pieces is None:
        assert rows is not None
        data = rows.select(*table.schema.row_type.names)
        if parallelism:
            data = data.repartition(parallelism)
        task = WriteTask(ref, commit_user, static, accumulator, blobs=False)
        return data.mapInArrow(task, WRITE_RESULT_DDL)
    by = F.col(GROUP_COLUMN)
    pieces = pieces.repartition(parallelism, by) if parallelism else pieces.repartition(by)
    return pieces.mapInArrow(WriteTask(ref, commit_user, static, accumulator,
                                       num_assigners=num_assigners), WRITE_RESULT_DDL)


def run_write_stage(
    spark: SparkSession, table: FileStoreTable, ref: TableRef, commit_user: str,
    make_plan: PlanMaker, rows_from_spark: bool,
) -> tuple[list[CommitMessage], int]:
    """Every task's messages and the rows written; on failure, no file of this job is left
    that a finished task reported. ``make_plan(accumulator)`` builds the ``write_plan``;
    ``rows_from_spark``: its stage 1 is fed the source's rows by Spark (``arrow_batches``)."""
    acc = message_accumulator(spark.sparkContext)
    plan = make_plan(acc)
    try:
        with arrow_batches(spark, rows_from_spark):
            rows = plan.collect()
    except Exception as e:
        orphans = decode_all(acc.value)
        if orphans:
            log.error("write stage failed; deleting the files of %d finished task message(s)",
                      len(orphans))
            FileStoreCommit(table, commit_user).abort(orphans)
        raise spark_failure("write", e) from e
    messages = decode_all(r["messages"] for r in rows if r["messages"] is not None)
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        log.error("%d write task(s) failed; deleting the files of the other %d message(s)",
                  len(failed), len(messages))
        FileStoreCommit(table, commit_user).abort(messages)
        raise task_failure("write", [(r["error"], bool(r["validation"])) for r in failed])
    return messages, sum(r["rows"] for r in rows)
