"""The ingest shuffle's pieces: stage 1 packs every (partition, bucket) piece's IPC stream into
one payload column; stage 2 reads each piece back as a zero-copy slice of it. What arrives
must be exactly what the routing cut, piece by piece, with its bucket, partition and kinds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakecore.spark import shuffle
from lakecore.spark.shuffle import decode_piece, payload_buffers, split_rows
from lakecore.write.routing import route
from tests.core.helpers import make_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("s", pa.string()), ("op", pa.string())])


def _ipc(data: pa.Table) -> bytes:
    """A piece's IPC stream, LZ4-compressed, written on its own."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema,
                           options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(data)
    return sink.getvalue().to_pybytes()


def _table(tmp_path):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                      options={"bucket": "3", "rowkind.field": "op"})


def _data(rows: int) -> pa.Table:
    rng = np.random.default_rng(11)
    return pa.table({"id": pa.array(rng.integers(0, 500, rows), pa.int64()),
                     "dt": pa.array(np.where(rng.random(rows) < 0.5, "a", "b")),
                     "s": pa.array([f"v{i}" if i % 5 else None for i in range(rows)]),
                     "op": pa.array(np.where(rng.random(rows) < 0.2, "-D", "+I"))},
                    schema=SCHEMA)


def test_pieces_arrive_as_the_routing_cut_them(tmp_path):
    table = _table(tmp_path)
    data = _data(4_000)
    batch = split_rows(table, data, None)
    slices = route(table, data, None)
    assert batch.column("rows").to_pylist() == [s.rows.num_rows for s in slices]
    assert batch.column("bucket").to_pylist() == [s.bucket for s in slices]
    payloads = batch.column(shuffle.PAYLOAD_COLUMN)
    # each piece is an IPC stream of its rows and kinds, the partition column as one run
    for s, blob in zip(slices, payloads.to_pylist()):
        sent = pa.ipc.open_stream(blob).read_all()
        dt = sent.column("dt").chunk(0)
        assert pa.types.is_run_end_encoded(dt.type) and dt.run_ends.to_pylist() == [len(dt)]
        assert dt.values.to_pylist() == [s.partition[0]]
        assert sent.drop_columns(["dt"]).equals(
            s.rows.drop_columns(["dt"]).append_column("__lakecore_kind", s.kinds))
        assert len(blob) < len(_ipc(s.rows.append_column("__lakecore_kind", s.kinds)))
    groups = batch.column(shuffle.GROUP_COLUMN).to_pylist()
    for s, group, buf in zip(slices, groups, payload_buffers(payloads)):
        got = decode_piece(table, s.bucket, buf, group)
        assert got.partition == s.partition and got.bucket == s.bucket
        assert got.rows.equals(s.rows) and got.kinds.equals(s.kinds)
        assert got.rows.schema == s.rows.schema  # nullability too: dt is NOT NULL
        assert decode_piece(table, s.bucket, bytes(buf), group).rows.equals(s.rows)


def test_payload_buffers_of_a_sliced_column():
    blobs = [b"first", b"", b"third piece", b"4"]
    column = pa.array(blobs, pa.binary())
    assert [bytes(b) for b in payload_buffers(column)] == blobs
    assert [bytes(b) for b in payload_buffers(column.slice(1, 3))] == blobs[1:]
    large = pa.array(blobs, pa.large_binary())
    assert [bytes(b) for b in payload_buffers(large.slice(2))] == blobs[2:]
    with_null = pa.array([b"x", None], pa.binary())
    assert [bytes(b) for b in payload_buffers(with_null.slice(0, 1))] == [b"x"]


def test_large_pieces_are_cut_below_the_payload_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(shuffle, "MAX_PAYLOAD_BYTES", 4096)
    table = _table(tmp_path)
    data = _data(4_000)
    batch = split_rows(table, data, None)
    assert batch.num_rows > len(route(table, data, None))
    assert sum(batch.column("rows").to_pylist()) == data.num_rows
    back = [decode_piece(table, b, buf) for b, buf in
            zip(batch.column("bucket").to_pylist(), payload_buffers(batch.column("payload")))]
    assert sorted(pa.concat_tables([p.rows for p in back])["s"].drop_null().to_pylist()) == \
        sorted(data["s"].drop_null().to_pylist())


def test_a_piece_of_several_chunks_keeps_its_partition(tmp_path):
    """Rows of one partition and bucket that arrive in several chunks (Spark's batches) go as
    one piece, its IPC stream one record batch per chunk, the partition column one run in
    each; the piece comes back whole, every row with its partition value."""
    table = make_table(str(tmp_path), SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                       options={"bucket": "1", "rowkind.field": "op"})
    parts = [pa.table({"id": pa.array(range(a, b), pa.int64()), "dt": ["a"] * (b - a),
                       "s": [f"v{i}" for i in range(a, b)], "op": ["+I"] * (b - a)},
                      schema=SCHEMA) for a, b in ((0, 5), (5, 5), (5, 12))]
    data = pa.concat_tables(parts)
    batch = split_rows(table, data, None)
    (buf,) = payload_buffers(batch.column("payload"))
    sent = pa.ipc.open_stream(buf).read_all()
    assert sent.column("dt").num_chunks >= 2
    got = decode_piece(table, 0, buf)
    assert got.partition == ("a",) and got.rows.column("dt").to_pylist() == ["a"] * 12
    assert got.rows.column("id").to_pylist() == list(range(12))


def test_stage_one_groups_more_rows_at_once_for_more_buckets(tmp_path):
    """Pieces stay about the same size as buckets grow: a batch of 64k rows per bucket,
    within [256k, 1M] rows (a table without fixed buckets: 256k)."""
    sizes = {}
    for buckets in (1, 4, 8, 16, 64, -1):
        t = make_table(str(tmp_path / f"b{buckets}"), SCHEMA, primary_keys=["dt", "id"],
                       partition_keys=["dt"], options={"bucket": str(buckets)})
        sizes[buckets] = shuffle.split_batch_rows(t)
    assert sizes == {1: 256 * 1024, 4: 256 * 1024, 8: 512 * 1024, 16: 1024 * 1024,
                     64: 1024 * 1024, -1: 256 * 1024}


def test_wide_batches_are_split_by_bytes_and_keep_every_row(monkeypatch):
    """A batch past ``SPLIT_MAX_BYTES`` is split into slices under it, in row order; one
    under it passes whole."""
    data = _data(10_000)
    assert list(shuffle.bounded(data)) == [data]
    monkeypatch.setattr(shuffle, "SPLIT_MAX_BYTES", data.nbytes // 7)
    parts = list(shuffle.bounded(data))
    assert len(parts) >= 7
    assert all(p.num_rows <= data.num_rows // 7 + 1 for p in parts)  # about 1/7 of the bytes
    assert pa.concat_tables(parts).equals(data)
