"""What runs on the executors after the shuffle: the write task, the compaction task and the
read task (stage 1 of ingest is ``shuffle.SplitTask``). Each is a small picklable value whose
``__call__`` Spark invokes; they see Arrow batches (or a few pickled plans), never Python
rows."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import deserialize_messages, serialize_messages
from lakecore.compact.job import run_task
from lakecore.errors import LakecoreValidationError
from lakecore.read.predicate import Predicate
from lakecore.spark.faults import pause_point
from lakecore.spark.shuffle import (
    BUCKET_COLUMN,
    GROUP_COLUMN,
    PAYLOAD_COLUMN,
    decode_piece,
    payload_buffers,
)
from lakecore.spark.table_ref import TableRef
from lakecore.spark.types import cast_batch
from lakecore.store.file_store import FileStore
from lakecore.write.routing import Slice, join_slices
from lakecore.write.table_write import TableWrite

WRITE_RESULT_DDL = (
    "messages binary, rows bigint, files int, bytes bigint, error string, validation boolean")
SPLIT_COLUMN = "split"
# Rows handed to lakecore's writer at once (it works better on big batches than on Spark's).
WRITE_BATCH_ROWS = 256 * 1024
_RESULT_SCHEMA = pa.schema([("messages", pa.binary()), ("rows", pa.int64()),
                            ("files", pa.int32()), ("bytes", pa.int64()),
                            ("error", pa.string()), ("validation", pa.bool_())])


def task_error(error: Exception) -> tuple[str, bool]:
    """(one-line description, whether it is bad input) of a task's exception."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}", isinstance(error, LakecoreValidationError)


def _result_batch(blob: bytes | None, rows: int, files: int, size: int,
                  error: tuple[str, bool] | None = None) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"messages": [blob], "rows": [rows], "files": [files], "bytes": [size],
         "error": [error[0] if error else None], "validation": [error[1] if error else None]},
        schema=_RESULT_SCHEMA,
    )


def _drain(batches: Iterable[Any]) -> None:
    """Consume the rest of a failed task's input, so the task ends like any other."""
    try:
        for _ in batches:
            pass
    except Exception:  # the input itself is broken: the reported error is the first one
        pass


@dataclass(frozen=True)
class WriteTask:
    """``mapInArrow`` body: every row of this Spark partition goes through one lakecore
    writer in write-only mode; the task emits one row with its serialized CommitMessages.
    Input is the shuffle's IPC pieces (``blobs``: routed by stage 1, written as they are,
    ``TableWrite.write_slices``) or, for tables without fixed buckets, the source's own
    batches (routed here, ``TableWrite.write_arrow``).

    A failing task deletes its own files and reports the error as a row instead of failing
    the Spark job: every other task then finishes normally and reports its files, so the
    driver can delete all of them (a failed Spark job cancels running tasks, whose files
    nobody would report)."""

    ref: TableRef
    commit_user: str
    static_partition: tuple[tuple[str, str], ...] | None
    accumulator: Any  # pyspark Accumulator of serialized message lists
    blobs: bool = True
    num_assigners: int = 1  # dynamic buckets: assigners sharing a partition (shuffle.py)

    def _open(self) -> TableWrite:
        table = self.ref.load().copy({"write-only": "true"})
        w = table.new_stream_write_builder().with_commit_user(self.commit_user).new_write()
        if self.static_partition:
            w.with_static_partition(dict(self.static_partition))
        w.with_num_assigners(self.num_assigners)
        return w

    def _inputs(self, batches: Iterable[pa.RecordBatch]) -> Iterator[Slice | pa.Table]:
        table: FileStore | None = None
        for batch in batches:
            if not batch.num_rows:
                continue
            if not self.blobs:
                yield pa.Table.from_batches([batch])
                continue
            table = table or self.ref.load()
            for group, bucket, blob in zip(batch.column(GROUP_COLUMN).to_pylist(),
                                           batch.column(BUCKET_COLUMN).to_pylist(),
                                           payload_buffers(batch.column(PAYLOAD_COLUMN))):
                yield decode_piece(table, bucket, blob, group)

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer: TableWrite | None = None
        pending: list[Any] = []  # Slices (blobs) or source tables
        pending_rows = rows = 0
        try:
            for data in self._inputs(batches):
                pending.append(data)
                pending_rows += _num_rows(data)
                if pending_rows >= WRITE_BATCH_ROWS:
                    writer = writer or self._open()
                    rows += _flush(writer, pending)
                    pending, pending_rows = [], 0
            if pending:
                writer = writer or self._open()
                rows += _flush(writer, pending)
            messages = writer.prepare_commit() if writer is not None else []
        except Exception as e:
            if writer is not None:
                writer.abort()
            _drain(batches)
            yield _result_batch(None, rows, 0, 0, task_error(e))
            return
        if not messages:
            return
        blob = serialize_messages(messages)
        self.accumulator.add([blob])
        pause_point("write")
        files = [f for m in messages for f in m.new_files]
        yield _result_batch(blob, rows, len(files), sum(f.file_size for f in files))


def _num_rows(data: Slice | pa.Table) -> int:
    return data.rows.num_rows if isinstance(data, Slice) else data.num_rows


def _flush(writer: TableWrite, pending: list[Any]) -> int:
    """Write what is pending at once: stage 1's slices joined per (partition, bucket), or the
    source tables concatenated and routed."""
    if isinstance(pending[0], Slice):
        writer.write_slices(join_slices(pending))
    else:
        writer.write_arrow(pa.concat_tables(pending) if len(pending) > 1 else pending[0])
    return sum(_num_rows(p) for p in pending)


@dataclass(frozen=True)
class CompactTask:
    """``mapPartitions`` body over pickled compaction tasks (``BucketTask``, or a postpone
    table's ``PostponeTask``): run each on this executor; yield (serialized CommitMessages,
    None) per task, or (None, error) and stop, after deleting what this task wrote (as
    ``WriteTask``)."""

    ref: TableRef
    full: bool
    accumulator: Any

    def __call__(self, tasks: Iterable[Any]) -> Iterator[tuple[bytes | None, tuple | None]]:
        table = self.ref.load()
        done: list[bytes] = []
        try:
            for task in tasks:
                messages = [m for m in run_task(table, task, self.full) if not m.is_empty()]
                if messages:
                    done.append(serialize_messages(messages))
        except Exception as e:
            _delete_written(table, done)
            yield None, task_error(e)
            return
        if done:
            self.accumulator.add(done)
        for blob in done:
            yield blob, None


def _delete_written(table: Any, blobs: list[bytes]) -> None:
    FileStoreCommit(table, "abort").abort([m for b in blobs for m in deserialize_messages(b)])


@dataclass(frozen=True)
class ReadTask:
    """``mapInArrow`` body over pickled splits: read and merge each split with lakecore and
    stream its batches in the Arrow schema Spark expects."""

    ref: TableRef
    projection: tuple[str, ...] | None
    predicate: Predicate | None
    target: pa.Schema

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rb = self.ref.load().new_read_builder().with_filter(self.predicate)
        if self.projection is not None:
            rb = rb.with_projection(list(self.projection))
        read = rb.new_read()
        for batch in batches:
            for blob in batch.column(SPLIT_COLUMN).to_pylist():
                reader = read.to_arrow_batch_reader([pickle.loads(blob)])
                for out in reader:
                    if out.num_rows:
                        yield cast_batch(out, self.target)
