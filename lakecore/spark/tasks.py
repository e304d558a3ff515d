"""What runs on the executors: the bucket function, the write task, the compaction task and
the read task. Each is a small picklable value whose ``__call__`` Spark invokes; they see
Arrow batches (or a few pickled plans), never Python rows."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import LakecoreValidationError, SchemaError
from lakecore.format.bucket import bucket_ids
from lakecore.read.predicate import Predicate
from lakecore.spark.faults import pause_point
from lakecore.spark.table_ref import TableRef
from lakecore.types import DataType, to_arrow
from lakecore.write.commit_message import serialize_messages
from lakecore.write.table_write import TableWrite

BUCKET_COLUMN = "__lakecore_bucket"
WRITE_RESULT_DDL = (
    "messages binary, rows bigint, files int, bytes bigint, error string, validation boolean")
SPLIT_COLUMN = "split"
# Spark hands Python ~10k-row batches; lakecore's writer works better on bigger ones.
WRITE_BATCH_ROWS = 256 * 1024


def _cast_key(name: str, col: pa.Array, t: DataType) -> pa.Array:
    target = to_arrow(t)
    if col.type == target:
        return col
    try:
        return col.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaError(f"column {name!r}: cannot cast {col.type} to the table's type {t} ({e})"
                          ) from e


def bucket_function(
    key_names: Sequence[str], key_types: Sequence[DataType], num_buckets: int
) -> Callable[..., pa.Array]:
    """An Arrow scalar function: bucket-key columns -> Paimon's bucket of each row (int32).
    Keys are cast to the table's types first, exactly as the writer will cast them."""
    names, types = list(key_names), list(key_types)

    def paimon_bucket(*cols: pa.Array) -> pa.Array:
        keys = [_cast_key(n, c, t) for n, c, t in zip(names, cols, types)]
        return pa.array(bucket_ids(keys, types, num_buckets), pa.int32())

    return paimon_bucket


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

    A failing task deletes its own files and reports the error as a row instead of failing
    the Spark job: every other task then finishes normally and reports its files, so the
    driver can delete all of them (a failed Spark job cancels running tasks, whose files
    nobody would report)."""

    ref: TableRef
    commit_user: str
    static_partition: tuple[tuple[str, str], ...] | None
    accumulator: Any  # pyspark Accumulator of serialized message lists

    def _open(self) -> TableWrite:
        table = self.ref.load().copy({"write-only": "true"})
        w = table.new_stream_write_builder().with_commit_user(self.commit_user).new_write()
        if self.static_partition:
            w.with_static_partition(dict(self.static_partition))
        return w

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer: TableWrite | None = None
        pending: list[pa.RecordBatch] = []
        pending_rows = rows = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= WRITE_BATCH_ROWS:
                    writer = writer or self._open()
                    rows += self._flush(writer, pending)
                    pending, pending_rows = [], 0
            if pending:
                writer = writer or self._open()
                rows += self._flush(writer, pending)
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

    @staticmethod
    def _flush(writer: TableWrite, batches: list[pa.RecordBatch]) -> int:
        data = pa.Table.from_batches(batches)
        if BUCKET_COLUMN in data.column_names:
            _check_buckets(writer, data)
            data = data.drop_columns([BUCKET_COLUMN])
        writer.write_arrow(data)
        return data.num_rows


def _check_buckets(writer: TableWrite, data: pa.Table) -> None:
    """The shuffle's bucket must be the writer's: one task per bucket depends on it."""
    schema = writer.table.schema
    names = list(schema.bucket_keys)
    types = [schema.row_type.field(k).type for k in names]
    keys = [_cast_key(n, data.column(n).combine_chunks(), t) for n, t in zip(names, types)]
    valid = pc.and_kleene(*[pc.is_valid(k) for k in keys]) if len(keys) > 1 else pc.is_valid(
        keys[0])
    ids = pa.array(bucket_ids(keys, types, writer.options.bucket), pa.int32())
    shuffled = data.column(BUCKET_COLUMN).combine_chunks()
    bad = pc.sum(pc.and_(valid, pc.not_equal(ids, shuffled))).as_py()
    if bad:
        raise RuntimeError(f"{bad} row(s) were shuffled to another bucket than Paimon's: "
                           "the Spark bucket expression disagrees with lakecore")


@dataclass(frozen=True)
class CompactTask:
    """``mapPartitions`` body over pickled compaction ``BucketTask``s: rewrite each bucket on
    this executor; yield (serialized CommitMessages, None) per bucket, or (None, error) and
    stop, after deleting what this task wrote (as ``WriteTask``)."""

    ref: TableRef
    full: bool
    accumulator: Any

    def __call__(self, tasks: Iterable[Any]) -> Iterator[tuple[bytes | None, tuple | None]]:
        from lakecore.compact.job import run_bucket_task

        table = self.ref.load()
        done: list[bytes] = []
        try:
            for task in tasks:
                message = run_bucket_task(table, task, self.full)
                if message is not None and not message.is_empty():
                    done.append(serialize_messages([message]))
        except Exception as e:
            _delete_written(table, done)
            yield None, task_error(e)
            return
        if done:
            self.accumulator.add(done)
        for blob in done:
            yield blob, None


def _delete_written(table: Any, blobs: list[bytes]) -> None:
    from lakecore.commit.file_store_commit import FileStoreCommit
    from lakecore.write.commit_message import deserialize_messages

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
        from lakecore.spark.types import cast_batch

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
