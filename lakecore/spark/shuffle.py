"""The ingest shuffle: rows reach the task that owns their (partition, bucket) as Arrow IPC
blobs, not as Spark rows.

Stage 1 (``SplitTask``, one per source partition) takes the source's Arrow batches and routes
them with lakecore's one routing (``lakecore.write.routing.route``: cast and check against the
table, so bad input fails here, before any data file exists; each row's kind, partition and
Paimon bucket), and emits one row per (partition, bucket) piece: ``(group, bucket, rows,
payload)``, where ``group`` is a stable hash of the encoded partition and the bucket, and
``payload`` the piece as an Arrow IPC stream, LZ4-compressed (the table's columns, plus the
row kinds of a primary-key table). A piece's partition columns hold one value: each travels as
one run (run-end encoded) and becomes a plain column of that value again in stage 2.

Repartitioning by ``group`` sends every piece of a (partition, bucket) to one write task, which
trusts the piece: its bucket comes with it, its partition is in its rows (``decode_piece``), and
its rows go to the writer without being routed again (``TableWrite.write_slices``). Shuffling a
few large binary values instead of millions of rows is what makes this cheap: Spark converts the
data to Arrow once (stage 1's input) and never serializes it row by row again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakecore.spark.table_ref import TableRef
from lakecore.store.file_store import FileStore
from lakecore.write.routing import KIND_COLUMN, UNASSIGNED, AssignerChannels, Slice, route

GROUP_COLUMN = "__lakecore_group"
BUCKET_COLUMN = "bucket"
PAYLOAD_COLUMN = "payload"
SPLIT_RESULT_DDL = (f"{GROUP_COLUMN} bigint, {BUCKET_COLUMN} int, rows bigint, "
                    f"{PAYLOAD_COLUMN} binary")
_SPLIT_SCHEMA = pa.schema([(GROUP_COLUMN, pa.int64()), (BUCKET_COLUMN, pa.int32()),
                           ("rows", pa.int64()), (PAYLOAD_COLUMN, pa.binary())])
SPLIT_BATCH_ROWS = 256 * 1024  # rows grouped at once, at most buckets <= 4 (split_batch_rows)
# Rows grouped at once per bucket of the table, up to SPLIT_MAX_ROWS: a piece's size is about
# the batch over (partitions x buckets), and each piece costs a fixed ~0.3 ms to encode and
# decode (its IPC stream, its shuffle row). At 16 buckets, 256k-row batches cut a 10M-row
# ingest of 10 partitions into 6,400 pieces of 1.6k rows; 1M-row batches into 1,600 of 6k.
SPLIT_ROWS_PER_BUCKET = 64 * 1024
SPLIT_MAX_ROWS = 1024 * 1024
# ... and at most this many bytes (wide rows): a batch's pieces share one binary column
SPLIT_MAX_BYTES = 256 << 20
MAX_PAYLOAD_BYTES = 8 << 20  # a piece's IPC size, so shuffle rows and Arrow batches stay small
# Pieces are LZ4-compressed (Arrow IPC buffer compression): Spark's shuffle then carries
# about 30 % fewer bytes (the ingest bench's rows) through its row conversion, serializer and
# shuffle files; measured on the 10M-row ingest bench, about 1 CPU-second less in total.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
_MAX_BINARY_BYTES = 2**31 - 1  # a ``binary`` array's data (32-bit offsets)
_OFFSET_WIDTHS: dict[pa.DataType, type[np.signedinteger[Any]]] = {
    pa.binary(): np.int32, pa.large_binary(): np.int64}


def group_key(table: FileStore, partition: tuple, bucket: int) -> int:
    """A stable 63-bit id of (partition, bucket), the same on every executor."""
    raw = table.partition_codec.encode(partition) + int(bucket).to_bytes(4, "little", signed=True)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") >> 1


def payload_buffers(payloads: pa.Array) -> list[pa.Buffer]:
    """The pieces of a payload column as slices of its data buffer (no copy); ``large_binary``
    too (Spark with ``arrow.useLargeVarTypes``)."""
    width = _OFFSET_WIDTHS.get(payloads.type)
    if width is None or payloads.null_count:
        return [pa.py_buffer(b) for b in payloads.to_pylist()]
    _, offsets, data = payloads.buffers()
    at = np.frombuffer(offsets, width)[payloads.offset:payloads.offset + len(payloads) + 1]
    return [data.slice(int(a), int(b - a)) for a, b in zip(at[:-1], at[1:])]


def decode_piece(table: FileStore, bucket: int, blob: bytes | pa.Buffer,
                 group: int | None = None) -> Slice:
    """A piece as stage 1 routed it: its bucket is given, its partition is the values of its
    rows' partition columns (one partition per piece), its row kinds travel with it. An
    ``UNASSIGNED`` piece (dynamic buckets) belongs to assigner channel ``group``."""
    source = blob if isinstance(blob, pa.Buffer) else pa.py_buffer(blob)
    rows = _expand_constants(pa.ipc.open_stream(source).read_all())
    kinds = None
    if KIND_COLUMN in rows.column_names:
        kinds = rows.column(KIND_COLUMN).combine_chunks()
        rows = rows.drop_columns([KIND_COLUMN])
    partition = tuple(rows.column(k)[0].as_py() for k in table.partition_keys)
    assign_id = group if bucket == UNASSIGNED else None
    return Slice(partition, bucket, rows, kinds, assign_id)


def _first_chunk(column: pa.ChunkedArray) -> pa.Array:
    return next(c for c in column.chunks if len(c))


def _constant(column: pa.ChunkedArray) -> pa.RunEndEncodedArray:
    """A column of one repeated value (a piece's partition column) as one run."""
    first = _first_chunk(column).slice(0, 1)
    return pa.RunEndEncodedArray.from_arrays(pa.array([len(column)], pa.int32()), first)


def _expand_constants(rows: pa.Table) -> pa.Table:
    """The piece's run-end encoded (partition) columns as plain columns of their value (the
    IPC writer may have cut the run into one per record batch: all hold the same value)."""
    for i, f in enumerate(rows.schema):
        if pa.types.is_run_end_encoded(f.type):
            value = _first_chunk(rows.column(i)).values[0]
            rows = rows.set_column(i, pa.field(f.name, f.type.value_type, f.nullable),
                                   pa.repeat(value, rows.num_rows))
    return rows


def bounded(data: pa.Table) -> Iterator[pa.Table]:
    """``data`` in slices of at most ``SPLIT_MAX_BYTES`` (one slice when it is smaller)."""
    size = data.nbytes
    if size <= SPLIT_MAX_BYTES or data.num_rows <= 1:
        yield data
        return
    step = max(1, data.num_rows * SPLIT_MAX_BYTES // size)
    for start in range(0, data.num_rows, step):
        yield data.slice(start, step)


def split_batch_rows(table: FileStore) -> int:
    """Rows stage 1 groups at once for ``table``: ``SPLIT_ROWS_PER_BUCKET`` per bucket, within
    [``SPLIT_BATCH_ROWS``, ``SPLIT_MAX_ROWS``] (a table without fixed buckets: the least)."""
    per_bucket = SPLIT_ROWS_PER_BUCKET * max(table.options.bucket, 1)
    return min(SPLIT_MAX_ROWS, max(SPLIT_BATCH_ROWS, per_bucket))


def split_rows(table: FileStore, data: pa.Table,
               static_partition: Mapping[str, Any] | None,
               channels: AssignerChannels | None = None) -> pa.RecordBatch:
    """Route ``data`` and cut it into (partition, bucket) pieces, or (partition, assigner
    channel) pieces with ``channels``: one output row per piece (see the module docstring).
    The pieces' IPC streams are written one after another into one buffer, which becomes the
    payload column as it is (no copy per piece)."""
    groups, buckets, counts, pieces = [], [], [], []
    partition_keys = table.partition_keys
    for s in route(table, data, static_partition, channels=channels):
        key = (s.assign_id if s.assign_id is not None
               else group_key(table, s.partition, s.bucket))
        step = max(1, s.rows.num_rows * MAX_PAYLOAD_BYTES // max(s.rows.nbytes, 1))
        rows = s.rows if s.kinds is None else s.rows.append_column(KIND_COLUMN, s.kinds)
        for start in range(0, rows.num_rows, step):
            piece = rows.slice(start, step)
            for k in partition_keys:  # one value: sent once, not once per row
                i = piece.schema.get_field_index(k)
                column = _constant(piece.column(i))
                piece = piece.set_column(
                    i, pa.field(k, column.type, piece.schema.field(i).nullable), column)
            groups.append(key)
            buckets.append(s.bucket)
            counts.append(piece.num_rows)
            pieces.append(piece)
    return pa.RecordBatch.from_arrays(
        [pa.array(groups, pa.int64()), pa.array(buckets, pa.int32()),
         pa.array(counts, pa.int64()), _payloads(pieces)], schema=_SPLIT_SCHEMA)


def _payloads(pieces: list[pa.Table]) -> pa.Array:
    """The pieces as one ``binary`` array, one LZ4-compressed IPC stream per piece."""
    sink = pa.BufferOutputStream()
    offsets = [0]
    for piece in pieces:
        with pa.ipc.new_stream(sink, piece.schema, options=_IPC_OPTIONS) as w:
            w.write_table(piece)
        offsets.append(sink.tell())
    if offsets[-1] > _MAX_BINARY_BYTES:
        raise ValueError(f"one stage-1 batch holds {offsets[-1]:,} bytes of pieces, past the "
                         "2 GiB of a binary column; lower SPLIT_MAX_BYTES for rows this wide")
    data = sink.getvalue()
    return pa.Array.from_buffers(pa.binary(), len(pieces),
                                 [None, pa.py_buffer(np.asarray(offsets, np.int32)), data])


@dataclass(frozen=True)
class SplitTask:
    """``mapInArrow`` body of stage 1 over a DataFrame's batches (see the module docstring)."""

    ref: TableRef
    static_partition: tuple[tuple[str, str], ...] | None
    channels: AssignerChannels | None = None  # dynamic buckets: the assigner layout

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = self.ref.load()
        static = dict(self.static_partition) if self.static_partition else None
        pending: list[pa.RecordBatch] = []
        size = 0
        limit = split_batch_rows(table)

        def split(gathered: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for part in bounded(pa.Table.from_batches(gathered)):
                yield split_rows(table, part, static, self.channels)

        for batch in batches:
            if batch.num_rows:
                pending.append(batch)
                size += batch.num_rows
            if size >= limit:
                yield from split(pending)
                pending, size = [], 0
        if pending:
            yield from split(pending)
