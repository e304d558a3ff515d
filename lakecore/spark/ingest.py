"""Distributed write-only ingest (DESIGN.md §3): rows get Paimon's bucket on the executors,
are repartitioned so one task owns each (partition, bucket), written by lakecore inside the
tasks, and committed once by the driver under one (commit user, commit identifier)."""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import ArrowUDFType, arrow_udf
from pyspark.sql.types import IntegerType

from lakecore.commit.file_store_commit import CommitResult, FileStoreCommit, partition_equals
from lakecore.errors import CommitOutcomeUnknownError, SchemaError
from lakecore.spark.bucket_expr import supports_native, with_native_bucket
from lakecore.spark.faults import instrument_commit
from lakecore.spark.messages import FileStats, decode_all, message_accumulator, task_failure
from lakecore.spark.table_ref import TableRef
from lakecore.spark.tasks import BUCKET_COLUMN, WRITE_RESULT_DDL, WriteTask, bucket_function
from lakecore.spark.types import validate_source
from lakecore.table import FileStoreTable
from lakecore.write.commit_message import CommitMessage

log = logging.getLogger("lakecore.spark.ingest")
ARROW_BATCH_KEY = "spark.sql.execution.arrow.maxRecordsPerBatch"
SPARK_DEFAULT_ARROW_BATCH = "10000"
WRITE_ARROW_BATCH_ROWS = 100_000
Stage = Callable[[str], AbstractContextManager[None]]


def no_stage(name: str) -> AbstractContextManager[None]:
    return nullcontext()


def default_commit_user(job: str, table: str, commit_identifier: int) -> str:
    """One commit user per (job, table, identifier): each Airflow run is its own user, so an
    out-of-order backfill is never mistaken for "already committed" (DESIGN.md §3 trap),
    while a rerun of the same run finds its own snapshot and stops."""
    digest = hashlib.sha256(f"{job}\0{table}\0{commit_identifier}".encode()).hexdigest()[:20]
    return f"lakecore-spark-{job}-{digest}"


@dataclass(frozen=True)
class IngestRequest:
    commit_identifier: int
    commit_user: str
    overwrite_partition: Mapping[str, str] | None = None  # static partition overwrite
    dynamic_overwrite: bool = False  # replace exactly the partitions the source touches
    parallelism: int | None = None  # Spark partitions of the write stage (None: Spark's)

    def __post_init__(self) -> None:
        if self.overwrite_partition and self.dynamic_overwrite:
            raise SchemaError("choose a static partition overwrite or a dynamic one, not both")


@dataclass(frozen=True)
class IngestResult:
    table: str
    commit_user: str
    commit_identifier: int
    snapshot_ids: tuple[int, ...] = ()
    skipped: bool = False  # (user, identifier) was already committed: nothing written
    rows: int = 0  # source rows written
    stats: FileStats = field(default_factory=FileStats)

    def summary(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "commit_user": self.commit_user,
            "commit_identifier": self.commit_identifier,
            "snapshot_ids": list(self.snapshot_ids),
            "skipped": self.skipped,
            "rows": self.rows,
            "files": self.stats.files,
            "bytes": self.stats.bytes,
            "partitions": self.stats.partitions,
            "buckets": self.stats.buckets,
        }


def already_committed(table: FileStoreTable, request: IngestRequest) -> bool:
    commit = FileStoreCommit(table, request.commit_user)
    return not commit.filter_committed([request.commit_identifier])


def bucketed(df: DataFrame, table: FileStoreTable, parallelism: int | None) -> DataFrame:
    """``df`` with Paimon's bucket of each row (a Spark SQL expression for integer and date
    keys, an Arrow UDF otherwise), hash-partitioned by (partition, bucket) so that one task
    owns each (partition, bucket); tables without fixed buckets write as they are."""
    partition_cols = [F.col(k) for k in table.partition_keys]
    n = table.options.bucket
    if n <= 0:
        if parallelism is None:
            return df
        return df.repartition(parallelism, *partition_cols) if partition_cols else df.repartition(
            parallelism)
    keys = list(table.schema.bucket_keys)
    types = [table.schema.row_type.field(k).type for k in keys]
    if supports_native(df.schema, keys, types):
        df = with_native_bucket(df, keys, types, n, BUCKET_COLUMN)
    else:
        with warnings.catch_warnings():  # pyspark prefers type hints; ours is built, not typed
            warnings.simplefilter("ignore", UserWarning)
            fn = arrow_udf(bucket_function(keys, types, n), IntegerType(), ArrowUDFType.SCALAR)
        df = df.withColumn(BUCKET_COLUMN, fn(*[F.col(k) for k in keys]))
    by = [*partition_cols, F.col(BUCKET_COLUMN)]
    return df.repartition(parallelism, *by) if parallelism else df.repartition(*by)


@contextmanager
def _arrow_batches(spark: SparkSession, rows: int) -> Iterator[None]:
    """Bigger Arrow batches to the write tasks (fewer round trips), unless the session has a
    batch size of its own; restored afterwards."""
    current = spark.conf.get(ARROW_BATCH_KEY)
    if current != SPARK_DEFAULT_ARROW_BATCH:
        yield
        return
    spark.conf.set(ARROW_BATCH_KEY, str(rows))
    try:
        yield
    finally:
        spark.conf.set(ARROW_BATCH_KEY, current)


def write_stage(
    spark: SparkSession, df: DataFrame, table: FileStoreTable, ref: TableRef,
    request: IngestRequest,
) -> tuple[list[CommitMessage], int]:
    """Run the write tasks; return every task's messages and the rows written. On failure the
    files of the tasks that did finish are deleted before the error propagates."""
    acc = message_accumulator(spark.sparkContext)
    static = tuple(sorted((k, str(v)) for k, v in (request.overwrite_partition or {}).items()))
    task = WriteTask(ref, request.commit_user, static or None, acc)
    out = bucketed(df.select(*table.schema.row_type.names), table, request.parallelism)
    try:
        with _arrow_batches(spark, WRITE_ARROW_BATCH_ROWS):
            rows = out.mapInArrow(task, WRITE_RESULT_DDL).collect()
    except BaseException:
        orphans = decode_all(acc.value)
        log.error("write stage failed; deleting the files of %d finished task message(s)",
                  len(orphans))
        FileStoreCommit(table, request.commit_user).abort(orphans)
        raise
    messages = decode_all(r["messages"] for r in rows if r["messages"] is not None)
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        log.error("%d write task(s) failed; deleting the files of the other %d message(s)",
                  len(failed), len(messages))
        FileStoreCommit(table, request.commit_user).abort(messages)
        raise task_failure("write", [(r["error"], bool(r["validation"])) for r in failed])
    return messages, sum(r["rows"] for r in rows)


def commit_stage(
    table: FileStoreTable, messages: list[CommitMessage], request: IngestRequest
) -> CommitResult:
    """The single commit. Files are deleted when the commit certainly did not land."""
    commit = FileStoreCommit(instrument_commit(table), request.commit_user)
    ident = request.commit_identifier
    try:
        if request.overwrite_partition:
            spec = dict(request.overwrite_partition)
            result = commit.overwrite(messages, partition_equals(spec, table.partition_keys),
                                      ident)
        elif request.dynamic_overwrite:
            touched = {tuple(m.partition) for m in messages}
            if not touched:
                return CommitResult(())
            result = commit.overwrite(messages, touched.__contains__, ident)
        else:
            result = commit.commit(messages, ident)
    except CommitOutcomeUnknownError:
        raise  # the snapshot may reference the files: leave them, a rerun settles it
    except BaseException:
        if not commit.filter_committed([ident]):
            raise  # it landed after all; the files are live
        log.error("commit failed; deleting the %d message(s) of this job", len(messages))
        commit.abort(messages)
        raise
    if result.skipped:  # a concurrent run of the same (user, identifier) won
        commit.abort(messages)
    return result


def ingest_dataframe(
    spark: SparkSession,
    df: DataFrame,
    table: FileStoreTable,
    warehouse: str,
    request: IngestRequest,
    catalog_options: Mapping[str, str] | None = None,
    stage: Stage = no_stage,
) -> IngestResult:
    """Validate ``df`` against ``table``, write it on the executors, commit once.
    ``stage(name)`` wraps the write and the commit (the jobs log and time them)."""
    base = IngestResult(table.identifier, request.commit_user, request.commit_identifier)
    if already_committed(table, request):
        log.info("(%s, %s) already committed: nothing to do", request.commit_user,
                 request.commit_identifier)
        return replace(base, skipped=True)
    validate_source(df.schema, table)
    if request.overwrite_partition:
        unknown = [k for k in request.overwrite_partition if k not in table.partition_keys]
        if unknown:
            raise SchemaError(f"--overwrite-partition names non-partition column(s) {unknown}; "
                              f"partition keys are {table.partition_keys}")
    ref = TableRef.of(table, warehouse, catalog_options)
    with stage("write"):
        messages, rows = write_stage(spark, df, table, ref, request)
    stats = FileStats.of(messages)
    log.info("wrote %d rows -> %d files, %d bytes in %d bucket(s)", rows, stats.files,
             stats.bytes, stats.buckets)
    with stage("commit"):
        result = commit_stage(table, messages, request)
    return IngestResult(table.identifier, request.commit_user, request.commit_identifier,
                        result.snapshot_ids, result.skipped, rows, stats)
