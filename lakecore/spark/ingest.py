"""Distributed write-only ingest: rows get their partition and Paimon bucket on
the executors, are shuffled so that one task owns each (partition, bucket) (``write_stage``),
written by lakecore inside the tasks, and committed once by the driver under one (commit
user, commit identifier). A dynamic-bucket table's rows are shuffled by assigner channel
instead and get their buckets in the write tasks (``shuffle``); one ingest of such a table at a
time (the DAGs guarantee it), or the second commit is refused."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lakecore.commit.file_store_commit import CommitResult, FileStoreCommit, partition_equals
from lakecore.commit.message import CommitMessage
from lakecore.errors import CommitOutcomeUnknownError, SchemaError
from lakecore.schema.diff import plan_merge_schema
from lakecore.spark.faults import instrument_commit
from lakecore.spark.file_source import plan_parquet_source
from lakecore.spark.messages import FileStats
from lakecore.spark.table_ref import TableRef, open_catalog
from lakecore.spark.types import source_arrow_schema, validate_arrow_source, validate_source
from lakecore.spark.write_stage import (
    Static,
    assigner_channels,
    run_write_stage,
    split_dataframe,
    split_parquet,
    write_plan,
)
from lakecore.table import FileStoreTable
from lakecore.write.dynamic_bucket import is_dynamic_bucket_table

log = logging.getLogger("lakecore.spark.ingest")
Stage = Callable[[str], AbstractContextManager[None]]


def no_stage(name: str) -> AbstractContextManager[None]:
    return nullcontext()


def default_commit_user(job: str, table: str, commit_identifier: int) -> str:
    """One commit user per (job, table, identifier): each Airflow run is its own user, so an
    out-of-order backfill is never mistaken for "already committed" ("Commit users" in
    docs/architecture.md), while a rerun of the same run finds its own snapshot and stops."""
    digest = hashlib.sha256(f"{job}\0{table}\0{commit_identifier}".encode()).hexdigest()[:20]
    return f"lakecore-spark-{job}-{digest}"


@dataclass(frozen=True)
class IngestRequest:
    """One ingest: its commit (user, identifier), overwrite mode and parallelism."""

    commit_identifier: int
    commit_user: str
    overwrite_partition: Mapping[str, str] | None = None  # static partition overwrite
    dynamic_overwrite: bool = False  # replace exactly the partitions the source touches
    parallelism: int | None = None  # Spark partitions of the write stage (None: Spark's)
    # Paimon's write.merge-schema / write.merge-schema.explicit-cast (None: the table's option)
    merge_schema: bool | None = None
    merge_schema_explicit_cast: bool | None = None

    def __post_init__(self) -> None:
        if self.overwrite_partition and self.dynamic_overwrite:
            raise SchemaError("choose a static partition overwrite or a dynamic one, not both")


@dataclass(frozen=True)
class IngestResult:
    """What one ingest wrote and committed; ``summary()`` is its JSON line."""

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

    def plan(table: FileStoreTable, ref: TableRef, static: Static
             ) -> Callable[[object], DataFrame]:
        validate_source(df.schema, table)
        if is_dynamic_bucket_table(table):  # assigned in the write tasks, by channel
            channels = assigner_channels(spark, table, request.parallelism)
            pieces = split_dataframe(df, table, ref, static, channels)
            return lambda acc: write_plan(table, ref, request.commit_user, static,
                                          channels.num_channels, acc, pieces=pieces,
                                          num_assigners=channels.num_assigners)
        if table.options.bucket <= 0:
            return lambda acc: write_plan(table, ref, request.commit_user, static,
                                          request.parallelism, acc, rows=df)
        pieces = split_dataframe(df, table, ref, static)
        return lambda acc: write_plan(table, ref, request.commit_user, static,
                                      request.parallelism, acc, pieces=pieces)

    return _ingest(spark, table, warehouse, request, catalog_options, stage, plan,
                   lambda: source_arrow_schema(df.schema), rows_from_spark=True)


def ingest_parquet(
    spark: SparkSession,
    path: str,
    table: FileStoreTable,
    warehouse: str,
    request: IngestRequest,
    catalog_options: Mapping[str, str] | None = None,
    stage: Stage = no_stage,
) -> IngestResult:
    """Ingest a Parquet file or directory; the executors read the files themselves
    (``file_source``). Tables without fixed buckets read through Spark's reader."""
    if table.options.bucket <= 0:
        return ingest_dataframe(spark, spark.read.parquet(path), table, warehouse, request,
                                catalog_options, stage)

    sources: list[Any] = []

    def source_schema() -> pa.Schema:
        if not sources:
            sources.append(plan_parquet_source(path))
        schema: pa.Schema = sources[0].schema
        return schema

    def plan(table: FileStoreTable, ref: TableRef, static: Static
             ) -> Callable[[object], DataFrame]:
        source_schema()
        source = sources[0]
        validate_arrow_source(source.schema, table)
        pieces = split_parquet(spark, source, ref, static)
        return lambda acc: write_plan(table, ref, request.commit_user, static,
                                      request.parallelism, acc, pieces=pieces)

    return _ingest(spark, table, warehouse, request, catalog_options, stage, plan,
                   source_schema, rows_from_spark=False)


def evolve_for_source(table: FileStoreTable, source: pa.Schema, warehouse: str,
                      request: IngestRequest,
                      catalog_options: Mapping[str, str] | None = None) -> FileStoreTable:
    """Paimon's ``write.merge-schema`` on the driver, before anything is written.

    Source columns the table lacks are added (nullable) and columns whose source type is
    wider are widened (``write.merge-schema.explicit-cast``: any cast Paimon allows), with one
    ALTER (``lakecore.schema.diff.plan_merge_schema``); the table is returned at its new
    schema. Without ``write.merge-schema`` (the request's flag, else the table's option) a new
    source column is a ``SchemaError`` naming it, and the table is left as it is."""
    options = table.options
    merge = options.write_merge_schema if request.merge_schema is None else request.merge_schema
    explicit = (options.write_merge_schema_explicit_cast
                if request.merge_schema_explicit_cast is None
                else request.merge_schema_explicit_cast)
    plan = plan_merge_schema(table.schema, source, table=table.identifier,
                             explicit_cast=explicit)
    if plan.empty:
        return table
    if not merge:
        if plan.added_columns:
            raise SchemaError(
                f"source column(s) {list(plan.added_columns)} are not in table "
                f"{table.identifier!r}; to add them set write.merge-schema = true (a table "
                "option, --table-option write.merge-schema=true or --merge-schema)")
        return table  # a wider source type: the write's conversion decides
    plan.check()
    catalog = open_catalog(warehouse, catalog_options)
    try:
        new = catalog.alter_table(table.identifier, plan.changes)
    finally:
        catalog.close()
    assert new is not None
    log.info("write.merge-schema: %s is now schema %d: %s", table.identifier, new.id,
             "; ".join(plan.describe()))
    return table.with_schema(new)


def _ingest(
    spark: SparkSession,
    table: FileStoreTable,
    warehouse: str,
    request: IngestRequest,
    catalog_options: Mapping[str, str] | None,
    stage: Stage,
    plan: Callable[[FileStoreTable, TableRef, Static], Callable[[object], DataFrame]],
    source_schema: Callable[[], pa.Schema],
    rows_from_spark: bool,
) -> IngestResult:
    base = IngestResult(table.identifier, request.commit_user, request.commit_identifier)
    if already_committed(table, request):
        log.info("(%s, %s) already committed: nothing to do", request.commit_user,
                 request.commit_identifier)
        return replace(base, skipped=True)
    if request.overwrite_partition:
        unknown = [k for k in request.overwrite_partition if k not in table.partition_keys]
        if unknown:
            raise SchemaError(f"--overwrite-partition names non-partition column(s) {unknown}; "
                              f"partition keys are {table.partition_keys}")
    table = evolve_for_source(table, source_schema(), warehouse, request, catalog_options)
    ref = TableRef.of(table, warehouse, catalog_options)
    static = tuple(sorted((k, str(v)) for k, v in (request.overwrite_partition or {}).items()))
    make_plan = plan(table, ref, static or None)  # validates the source: nothing written yet
    with stage("write"):
        messages, rows = run_write_stage(spark, table, ref, request.commit_user, make_plan,
                                        rows_from_spark)
    stats = FileStats.of(messages)
    log.info("wrote %d rows -> %d files, %d bytes in %d bucket(s)", rows, stats.files,
             stats.bytes, stats.buckets)
    with stage("commit"):
        result = commit_stage(table, messages, request)
    return IngestResult(table.identifier, request.commit_user, request.commit_identifier,
                        result.snapshot_ids, result.skipped, rows, stats)
