"""Batch write through the data source: Paimon's two-phase commit on Spark's writer API.

Each task's ``write`` feeds its Arrow batches to one lakecore writer in ``write-only`` mode
and returns the serialized ``CommitMessage``s; the driver's ``commit`` commits them once
(APPEND, or OVERWRITE), and ``abort`` deletes every file the finished tasks reported (a
failing task deletes its own first; a task killed because another failed may leave files
that no snapshot references, for orphan removal, as the ingest job's lost tasks do).

* **Idempotence**: with ``commit.user`` and ``commit.identifier``, a write whose pair is
  already committed writes nothing and commits nothing (checked when Spark plans the write
  and again at commit). Without them each write is its own user and commits once.
* **Overwrite**: Spark hands the writer a bare boolean. ``overwrite.partition`` names a static
  partition to replace; otherwise the table option ``dynamic-partition-overwrite`` (default
  true, as in Paimon's Spark writer) replaces exactly the partitions the rows touch, and false
  replaces the whole table (an unpartitioned table is always replaced whole).
* **Several tasks on one bucket**: Spark gives the writer no shuffle by key, so any task may
  write any bucket. Each writer continues the bucket's sequence numbers from the snapshot it
  read, so the rows of this write follow everything committed before it; rows of one key
  *within* one write have no order (as a DataFrame has none; ``sequence.field`` gives one).
* **Dynamic-bucket primary-key tables** (``bucket = -1``) are refused: a new key must be
  assigned by exactly one writer, which needs rows shuffled by key to assigner channels.
  ``lakecore.spark.ingest.ingest_dataframe`` (the ingest job) does that shuffle.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakecore.commit.file_store_commit import FileStoreCommit, partition_equals
from lakecore.commit.message import CommitMessage, deserialize_messages, serialize_messages
from lakecore.errors import CommitOutcomeUnknownError, OptionError, UnsupportedFeatureError
from lakecore.format.snapshot import BATCH_COMMIT_IDENTIFIER
from lakecore.spark.datasource.options import OVERWRITE_PARTITION, SourceOptions, open_table
from lakecore.spark.table_ref import TableRef
from lakecore.spark.tasks import WRITE_BATCH_ROWS
from lakecore.spark.types import validate_source
from lakecore.table import FileStoreTable
from lakecore.write.dynamic_bucket import is_dynamic_bucket_table
from lakecore.write.table_write import TableWrite


@dataclass
class LakecoreCommitMessage(WriterCommitMessage):
    """One task's serialized ``CommitMessage``s (None: it wrote nothing) and its row count."""

    messages: bytes | None
    rows: int


def write_task(iterator: Iterator[pa.RecordBatch], open_writer: Callable[[], TableWrite]
               ) -> tuple[list[CommitMessage], int]:
    """One task's rows through one write-only writer (opened at the first row, fed in slices
    of ``WRITE_BATCH_ROWS``): its commit messages and row count. On a failure the task's own
    files are deleted (the driver's abort deletes the other tasks')."""
    writer: TableWrite | None = None
    pending: list[pa.RecordBatch] = []
    pending_rows = rows = 0
    try:
        for batch in iterator:
            if not batch.num_rows:
                continue
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= WRITE_BATCH_ROWS:
                writer = writer or open_writer()
                writer.write_arrow(pa.Table.from_batches(pending))
                rows += pending_rows
                pending, pending_rows = [], 0
        if pending:
            writer = writer or open_writer()
            writer.write_arrow(pa.Table.from_batches(pending))
            rows += pending_rows
        messages = writer.prepare_commit() if writer is not None else []
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.close()
    return messages, rows


def decode(messages: Sequence[WriterCommitMessage | None]) -> list[CommitMessage]:
    return [m for w in messages if isinstance(w, LakecoreCommitMessage) and w.messages
            for m in deserialize_messages(w.messages)]


class LakecoreWriter(DataSourceArrowWriter):
    """``df.write.format("lakecore")``: built when Spark plans the write, pickled to the tasks
    (``write``) and to the driver-side commit (``commit`` / ``abort``)."""

    def __init__(self, opts: SourceOptions, schema: StructType, overwrite: bool) -> None:
        if opts.overwrite_partition and not overwrite:
            raise OptionError(OVERWRITE_PARTITION, "needs .mode('overwrite')")
        self.opts = opts
        self.overwrite = overwrite
        self.commit_user = opts.commit_user or f"lakecore-spark-write-{uuid.uuid4().hex}"
        self.identifier = (opts.commit_identifier if opts.commit_identifier is not None
                           else BATCH_COMMIT_IDENTIFIER)
        catalog, table = open_table(opts)
        catalog.close()
        if is_dynamic_bucket_table(table):
            raise UnsupportedFeatureError(
                f"table {table.identifier!r} has dynamic buckets (bucket = -1): each new key "
                "must be assigned by one writer, and Spark's data source writer gets no "
                "shuffle by key; write it with lakecore.spark.ingest.ingest_dataframe or the "
                "ingest job (lakecore/spark/jobs/ingest.py), which shuffle rows to assigner "
                "channels")
        if opts.overwrite_partition:
            unknown = [k for k, _ in opts.overwrite_partition if k not in table.partition_keys]
            if unknown:
                raise OptionError(OVERWRITE_PARTITION,
                                  f"names non-partition column(s) {unknown}; partition keys "
                                  f"are {table.partition_keys}")
        validate_source(schema, table)  # missing / extra / uncastable columns, before writing
        self.ref = TableRef.of(table, opts.warehouse, opts.catalog_options)
        self.skip = (opts.commit_user is not None
                     and not FileStoreCommit(table, self.commit_user)
                     .filter_committed([self.identifier]))

    # -- tasks ---------------------------------------------------------------------------
    def _open(self) -> TableWrite:
        table = self.ref.load().copy({"write-only": "true"})
        w = table.new_stream_write_builder().with_commit_user(self.commit_user).new_write()
        if self.opts.overwrite_partition:
            w.with_static_partition(dict(self.opts.overwrite_partition))
        return w

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakecoreCommitMessage:
        if self.skip:  # already committed: consume the input, write nothing
            for _ in iterator:
                pass
            return LakecoreCommitMessage(None, 0)
        messages, rows = write_task(iterator, self._open)
        blob = serialize_messages(messages) if messages else None
        return LakecoreCommitMessage(blob, rows)

    # -- driver --------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = decode(messages)
        catalog, table = open_table(self.opts)
        try:
            commit_messages(table, done, self.commit_user, self.identifier, self.overwrite,
                            self.opts)
        finally:
            catalog.close()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = decode(messages)
        if done:
            FileStoreCommit(self.ref.load(), self.commit_user).abort(done)


def _overwrite_filter(table: FileStoreTable, messages: Sequence[CommitMessage],
                      opts: SourceOptions) -> Any:
    """Which partitions an overwrite replaces (None: all of them)."""
    if opts.overwrite_partition:
        return partition_equals(dict(opts.overwrite_partition), table.partition_keys)
    if not table.partition_keys or not table.options.dynamic_partition_overwrite:
        return None
    touched = {tuple(m.partition) for m in messages}
    return touched.__contains__


def commit_messages(table: FileStoreTable, messages: list[CommitMessage], commit_user: str,
                    identifier: int, overwrite: bool, opts: SourceOptions) -> None:
    """The one commit; files are deleted when it certainly did not land or when the
    (user, identifier) pair turns out committed already."""
    commit = FileStoreCommit(table, commit_user)
    if not commit.filter_committed([identifier]):
        commit.abort(messages)  # a rerun of a committed write: nothing to add
        return
    try:
        if overwrite:
            result = commit.overwrite(messages, _overwrite_filter(table, messages, opts),
                                      identifier)
        else:
            result = commit.commit(messages, identifier)
    except CommitOutcomeUnknownError:
        raise  # the snapshot may reference the files: leave them, a rerun settles it
    except BaseException:
        if commit.filter_committed([identifier]):
            commit.abort(messages)
        raise
    if result.skipped:
        commit.abort(messages)
