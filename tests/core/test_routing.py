"""Routing rows to (partition, bucket) slices: every row once, in its Paimon bucket; a
primary-key table's slices sorted by key with the rows of one key in input order (the order
that decides which of them is newest); an append table's rows in input order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakecore.format.bucket import bucket_ids
from lakecore.write.routing import route
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])


def _data(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, rows // 3, rows)  # every key about three times
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "dt": pa.array(np.where(rng.random(rows) < 0.5, "d1", "d2")),
                     "v": pa.array(np.arange(rows), pa.int64())}, schema=SCHEMA)


def _check_buckets(table, data: pa.Table, slices) -> None:
    """Every row once, in the bucket Paimon's hash gives its key."""
    assert sum(s.rows.num_rows for s in slices) == data.num_rows
    assert sorted(pa.concat_tables([s.rows for s in slices])["v"].to_pylist()) == \
        data["v"].to_pylist()
    for s in slices:
        key_type = table.schema.row_type.field("id").type
        assert set(bucket_ids([s.rows["id"]], [key_type], 4).tolist()) == {s.bucket}
        assert set(s.rows["dt"].to_pylist()) == {s.partition[0]}


def test_primary_key_slices_sorted_by_key_rows_of_a_key_in_input_order(tmp_path):
    table = make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"],
                       partition_keys=["dt"], options={"bucket": "4"})
    data = _data(20_000)
    slices = route(table, data)
    _check_buckets(table, data, slices)
    assert [(s.partition, s.bucket) for s in slices] == sorted((s.partition, s.bucket)
                                                               for s in slices)
    assert len(slices) == 8
    for s in slices:
        ids, v = s.rows["id"].to_numpy(), s.rows["v"].to_numpy()
        assert np.all(ids[1:] >= ids[:-1])
        same = ids[1:] == ids[:-1]
        assert np.all(v[1:][same] > v[:-1][same])  # a key's rows: input order
        assert s.kinds is not None and len(s.kinds) == len(ids)


def test_append_table_slices_keep_input_order(tmp_path):
    table = make_table(str(tmp_path), SCHEMA, partition_keys=["dt"],
                       options={"bucket": "4", "bucket-key": "id"})
    data = _data(5_000)
    slices = route(table, data)
    _check_buckets(table, data, slices)
    for s in slices:
        v = s.rows["v"].to_numpy()
        assert np.all(v[1:] > v[:-1])
        assert s.kinds is None


def test_last_row_of_a_key_wins_in_every_bucket(tmp_path):
    """What the key order is for: each key's newest row (the last of the write) is the one
    read back, in every bucket."""
    table = make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"],
                       partition_keys=["dt"], options={"bucket": "4"})
    data = _data(20_000, seed=5)
    write(table, data)
    latest = {}
    for row in data.to_pylist():
        latest[row["id"], row["dt"]] = row["v"]
    got = {(r["id"], r["dt"]): r["v"] for r in read(table)}
    assert got == latest
