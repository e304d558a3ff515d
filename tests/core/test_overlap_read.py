"""A merged read merges only the key ranges two or more files share: the rows of keys that
one file alone holds go straight through (``read/overlap.py``), as Paimon's reducer passes a
key's lone record through. Real tables throughout, and the ranges checked key by key against
a brute-force count of the files covering each key."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import lakecore.read.split_read as split_read
from lakecore.read.overlap import Bounded, shared_ranges
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 25)), min_size=1, max_size=7))
def test_shared_ranges_are_the_keys_two_files_cover(spans):
    files = [Bounded((lo,), (lo + width,), None) for lo, width in spans]  # type: ignore[arg-type]
    ranges = shared_ranges(files)
    covered = {k for lo, hi in ranges for k in range(lo[0], hi[0] + 1)}
    want = {k for k in range(0, 90)
            if sum(b.lo[0] <= k <= b.hi[0] for b in files) >= 2}
    assert covered == want
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # in order, apart


def _spy_merged_rows(monkeypatch) -> list[int]:
    """Rows handed to the merge, per merge call."""
    seen: list[int] = []
    real = split_read.merge_runs

    def spy(runs, *args, **kwargs):
        runs = [list(r) for r in runs]
        seen.append(sum(t.num_rows for r in runs for t in r))
        return real(runs, *args, **kwargs)

    monkeypatch.setattr(split_read, "merge_runs", spy)
    return seen


def test_only_the_shared_key_ranges_are_merged(tmp_path: Path, monkeypatch):
    """Keys 0-999, then 900-1999 upserted, then 1500-1509 deleted and 1995-2004 upserted:
    the read keeps every key's newest value and drops the deleted ones; the merge sees only
    the rows of the ranges two files share (900-999, 1500-1509, 1995-1999), twice each."""
    schema = SCHEMA.append(pa.field("op", pa.string()))
    t = make_table(str(tmp_path), schema, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true", "rowkind.field": "op"})

    def rows(ids: range, v: str, op: str = "+I") -> pa.Table:
        return pa.table({"id": list(ids), "v": [v] * len(ids), "op": [op] * len(ids)},
                        schema=schema)

    write(t, rows(range(1000), "a"))
    write(t, rows(range(900, 2000), "b"))
    write(t, rows(range(1500, 1510), "x", "-D"))
    write(t, rows(range(1995, 2005), "c"))
    merged = _spy_merged_rows(monkeypatch)
    want = {**{i: "a" for i in range(900)}, **{i: "b" for i in range(900, 1995)},
            **{i: "c" for i in range(1995, 2005)}}
    for i in range(1500, 1510):
        del want[i]
    got = read(t, "id")
    assert {r["id"]: r["v"] for r in got} == want and len(got) == len(want)
    shared = 2 * 100 + 2 * 10 + 2 * 5
    assert sum(merged) == shared


def test_a_key_twice_in_one_file_is_still_merged(tmp_path: Path, monkeypatch):
    """A foreign file holding one key twice (key 6 rewritten as a second row of key 5, the
    row count kept): the whole file goes through the merge, which keeps key 5's later row,
    even outside the ranges the files share."""
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true"})
    write(t, {"id": list(range(100)), "v": [f"a{i}" for i in range(100)]})
    write(t, {"id": list(range(90, 110)), "v": [f"b{i}" for i in range(90, 110)]})
    (split,) = t.new_read_builder().new_scan().plan().splits()
    first = min(split.files, key=lambda f: f.max_sequence_number)
    path = t.paths.data_file_path(split.partition, split.bucket, first.file_name)
    rows = pq.read_table(path)
    ids = rows["id"].to_pylist()
    ids[6] = 5
    for name in ("_KEY_id", "id"):
        at = rows.schema.get_field_index(name)
        rows = rows.set_column(at, rows.schema.field(at), pa.array(ids, pa.int64()))
    pq.write_table(rows, path)
    merged = _spy_merged_rows(monkeypatch)
    rows = read(t, "id")
    got = {r["id"]: r["v"] for r in rows}
    assert len(rows) == len(got) == 109  # key 5 once
    assert got[5] == "a6" and 6 not in got
    assert got[95] == "b95" and got[0] == "a0"
    assert sum(merged) == 100 + 10  # the whole first file, the second one's 90-99
