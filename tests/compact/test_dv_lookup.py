"""The lookup of a deletion-vector compaction for every kind of key: a single integer key
(binary search), a single string key and a composite key (hash lookups). Superseded rows are
marked in the untouched higher-level file's vector, one position per updated key, and reads
give the newest values."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.read.deletion_vectors import read_vectors
from lakecore.read.scan import TableScan
from tests.core.helpers import make_table, read, write

DV = {"bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true"}

KEY_KINDS = {
    "int": (pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.int64())]),
            ["k"], lambda i: {"k": i}),
    "string": (pa.schema([pa.field("k", pa.string(), nullable=False), ("v", pa.int64())]),
               ["k"], lambda i: {"k": f"key-{i:05d}"}),
    "composite": (pa.schema([pa.field("a", pa.string(), nullable=False),
                             pa.field("b", pa.int64(), nullable=False), ("v", pa.int64())]),
                  ["a", "b"], lambda i: {"a": f"g{i % 7}", "b": i}),
}


def batch(schema, key, ids, v):
    return pa.Table.from_pylist([{**key(i), "v": v} for i in ids], schema=schema)


def files(t):
    return {f.file_name: f for s in TableScan(t).plan().splits() for f in s.files}


def vectors(t):
    out = {}
    for s in TableScan(t).plan().splits():
        out.update(read_vectors(t, dict(s.deletion_files)))
    return out


@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
def test_updated_keys_are_marked_in_the_untouched_file(tmp_path, kind):
    schema, keys, key = KEY_KINDS[kind]
    t = make_table(str(tmp_path), schema, keys, options=DV)
    write(t, batch(schema, key, range(2000), 1))
    t.compact()
    (base,) = files(t)
    updated = list(range(3, 2000, 37))  # 54 keys spread over the whole file
    fresh = [5000, 5001]
    write(t, batch(schema, key, updated + fresh, 2))
    t.compact()
    assert base in files(t)  # not rewritten: its superseded rows are marked instead
    marked = vectors(t)[base]
    assert len(marked) == len(updated)
    model = {tuple(key(i).values()): 1 for i in range(2000)}
    model.update({tuple(key(i).values()): 2 for i in updated + fresh})
    got = {tuple(r[k] for k in keys): r["v"] for r in read(t)}
    assert len(read(t)) == len(model)
    assert got == model
    # a second update of the same keys marks their rows in the file holding them now
    write(t, batch(schema, key, updated[:10], 3))
    t.compact()
    model.update({tuple(key(i).values()): 3 for i in updated[:10]})
    assert {tuple(r[k] for k in keys): r["v"] for r in read(t)} == model
    assert len(read(t)) == len(model)
