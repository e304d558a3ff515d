"""The ingest shuffle: rows reach the task that owns their (partition, bucket) as Arrow IPC
blobs, not as Spark rows.

Stage 1 (``SplitTask``, one per source partition) takes the source's Arrow batches, casts and
checks them against the table (so bad input fails here, before any data file exists), computes
each row's partition and Paimon bucket with lakecore's own functions, and emits one row per
(partition, bucket) piece: ``(group, rows, payload)``, where ``group`` is a stable hash of the
encoded partition and the bucket, and ``payload`` the piece as an Arrow IPC stream.

Repartitioning by ``group`` sends every piece of a (partition, bucket) to one write task.
Shuffling a few large binary values instead of millions of rows is what makes this cheap: Spark
converts the data to Arrow once (stage 1's input) and never serializes it row by row again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakecore.errors import SchemaError
from lakecore.format.bucket import bucket_ids
from lakecore.spark.table_ref import TableRef
from lakecore.table import FileStoreTable
from lakecore.utils.arrow import group_by_columns
from lakecore.write.conform import conform, row_kinds

GROUP_COLUMN = "__lakecore_group"
PAYLOAD_COLUMN = "payload"
SPLIT_RESULT_DDL = f"{GROUP_COLUMN} bigint, rows bigint, {PAYLOAD_COLUMN} binary"
_SPLIT_SCHEMA = pa.schema([(GROUP_COLUMN, pa.int64()), ("rows", pa.int64()),
                           (PAYLOAD_COLUMN, pa.binary())])
_BUCKET = "__lakecore_bucket"
SPLIT_BATCH_ROWS = 256 * 1024  # rows grouped at once
MAX_PAYLOAD_BYTES = 8 << 20  # a piece's IPC size, so shuffle rows and Arrow batches stay small


def group_key(table: FileStoreTable, partition: tuple, bucket: int) -> int:
    """A stable 63-bit id of (partition, bucket), the same on every executor."""
    raw = table.partition_codec.encode(partition) + int(bucket).to_bytes(4, "little", signed=True)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") >> 1


def encode_piece(data: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    return sink.getvalue().to_pybytes()


def decode_piece(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def check_rows(table: FileStoreTable, data: pa.Table) -> pa.Table:
    """The rows cast to the table's schema; every check the writer would make, made now."""
    schema = table.schema
    rows = conform(data, schema.row_type, list(schema.primary_keys))
    if schema.primary_keys:
        row_kinds(rows, table.options.rowkind_field)
    return rows


def _check_partition(table: FileStoreTable, partition: tuple,
                     static_partition: dict[str, str] | None) -> None:
    table.paths.partition_path(partition)  # rejects values that cannot be a path
    keys = table.partition_keys
    for k, v in (static_partition or {}).items():
        got = partition[keys.index(k)]
        if str(got) != str(v):
            raise SchemaError(f"row with {k}={got!r} does not belong to the overwritten "
                              f"partition {static_partition}")


def split_rows(table: FileStoreTable, data: pa.Table,
               static_partition: dict[str, str] | None) -> pa.RecordBatch:
    """Check ``data`` against the table and cut it into (partition, bucket) pieces: one
    output row per piece (see the module docstring)."""
    rows = check_rows(table, data)
    n = table.options.bucket
    if n > 0:
        keys = list(table.schema.bucket_keys)
        types = [table.schema.row_type.field(k).type for k in keys]
        ids = bucket_ids([rows.column(k) for k in keys], types, n)
    else:
        ids = np.zeros(rows.num_rows, np.int32)
    rows = rows.append_column(_BUCKET, pa.array(ids, pa.int32()))
    groups, counts, payloads = [], [], []
    for values, part in group_by_columns(rows, [*table.partition_keys, _BUCKET]):
        partition, bucket = tuple(values[:-1]), int(values[-1])
        _check_partition(table, partition, static_partition)
        key = group_key(table, partition, bucket)
        part = part.drop_columns([_BUCKET])
        step = max(1, part.num_rows * MAX_PAYLOAD_BYTES // max(part.nbytes, 1))
        for start in range(0, part.num_rows, step):
            piece = part.slice(start, step)
            groups.append(key)
            counts.append(piece.num_rows)
            payloads.append(encode_piece(piece))
    return pa.RecordBatch.from_arrays(
        [pa.array(groups, pa.int64()), pa.array(counts, pa.int64()),
         pa.array(payloads, pa.binary())], schema=_SPLIT_SCHEMA)


@dataclass(frozen=True)
class SplitTask:
    """``mapInArrow`` body of stage 1 over a DataFrame's batches (see the module docstring)."""

    ref: TableRef
    static_partition: tuple[tuple[str, str], ...] | None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = self.ref.load()
        static = dict(self.static_partition) if self.static_partition else None
        pending: list[pa.RecordBatch] = []
        size = 0
        for batch in batches:
            if batch.num_rows:
                pending.append(batch)
                size += batch.num_rows
            if size >= SPLIT_BATCH_ROWS:
                yield split_rows(table, pa.Table.from_batches(pending), static)
                pending, size = [], 0
        if pending:
            yield split_rows(table, pa.Table.from_batches(pending), static)
