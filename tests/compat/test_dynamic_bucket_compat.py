"""Dynamic-bucket tables (``bucket = -1``) shared with pypaimon 2.1 both ways: the HASH index
each writer leaves is complete and correct for the other (existing keys stay in their bucket,
no "no complete HASH index" refusal, no key in two buckets), and both read the same rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from tests.compat.pypaimon_runner import canonical, paimon_script, requires_paimon
from tests.core.helpers import make_table, read, write
from tests.core.test_dynamic_bucket import index_files, keys_by_bucket

pytestmark = [pytest.mark.compat, requires_paimon]

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
T = "db.t"


def rows(dt: str, ids: range | list[int], v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def model_of(*tables: pa.Table) -> list[dict]:
    merged: dict[tuple, dict] = {}
    for t in tables:
        for r in t.to_pylist():
            merged[(r["dt"], r["id"])] = r
    return [merged[k] for k in sorted(merged)]


def assert_one_bucket_per_key(table_buckets: dict[tuple[str, int], set[int]]) -> None:
    seen: dict[tuple[str, int], int] = {}
    for (dt, b), ids in table_buckets.items():
        for i in ids:
            assert (dt, i) not in seen, f"key {(dt, i)} in buckets {seen[(dt, i)]} and {b}"
            seen[(dt, i)] = b


@pytest.mark.parametrize("in_data_dir", [False, True], ids=["index-dir", "bucket-dir"])
def test_pypaimon_dynamic_table_extended_by_lakecore(tmp_path: Path, in_data_dir: bool) -> None:
    """pypaimon creates a primary-key table with the default bucket (-1) and writes; lakecore
    writes updates and new keys; pypaimon reads the same rows and keeps writing. With
    ``index-file-in-data-file-dir`` the HASH files live in the bucket directories."""
    wh = str(tmp_path / "wh")
    opts = {"dynamic-bucket.target-row-num": "10"}
    if in_data_dir:
        opts["index-file-in-data-file-dir"] = "true"
    p1 = rows("a", range(25), "p1")
    p2 = rows("b", range(8), "p1")
    paimon_script([
        {"op": "create", "warehouse": wh, "table": T, "schema": SCHEMA,
         "partition_keys": ["dt"], "primary_keys": ["dt", "id"], "options": opts},
        {"op": "write", "warehouse": wh, "table": T, "data": [p1, p2]},
    ])
    table = CatalogFactory.create({"warehouse": wh}).get_table(T)
    assert table.options.bucket == -1
    assert read(table, ["dt", "id"]) == model_of(p1, p2)
    before = keys_by_bucket(table)
    assert {b for (dt, b) in before if dt == "a"} == {0, 1, 2}

    # lakecore: updates of existing keys and new keys in both partitions
    l1 = pa.concat_tables([rows("a", range(0, 25, 3), "lc"), rows("a", range(25, 32), "lc"),
                           rows("b", [1, 2, 100], "lc")])
    write(table, l1)
    after = keys_by_bucket(table)
    assert_one_bucket_per_key(after)
    owner = {(dt, i): b for (dt, b), ids in after.items() for i in ids}
    for (dt, b), ids in before.items():
        assert all(owner[(dt, i)] == b for i in ids)  # no existing key moved
    # one hash per key: the updated keys' hashes were found in pypaimon's index
    idx = index_files(table)
    assert sum(m.row_count for (dt, _), m in idx.items() if dt == "a") == 32
    where = {p.parent.name for p in Path(table.table_path).rglob("index-*")
             if not p.name.startswith("index-manifest")}
    assert where == ({"bucket-0", "bucket-1", "bucket-2", "bucket-3"} if in_data_dir
                     else {"index"}), where

    # pypaimon reads lakecore's commit, and writes on top of it (its assigner loads our index)
    p3 = pa.concat_tables([rows("a", [5, 26, 40], "p3"), rows("b", [100, 101], "p3")])
    read1, _, read2 = paimon_script([
        {"op": "read", "warehouse": wh, "table": T},
        {"op": "write", "warehouse": wh, "table": T, "data": [p3]},
        {"op": "read", "warehouse": wh, "table": T},
    ])
    assert canonical(read1, ["dt", "id"]) == model_of(p1, p2, l1)
    assert canonical(read2, ["dt", "id"]) == model_of(p1, p2, l1, p3)
    table = CatalogFactory.create({"warehouse": wh}).get_table(T)
    assert read(table, ["dt", "id"]) == model_of(p1, p2, l1, p3)
    final = keys_by_bucket(table)
    assert_one_bucket_per_key(final)
    owner2 = {(dt, i): b for (dt, b), ids in final.items() for i in ids}
    assert all(owner2[k] == b for k, b in owner.items())


def test_lakecore_dynamic_table_read_and_extended_by_pypaimon(tmp_path: Path) -> None:
    """lakecore creates a bucket=-1 table (the default) and commits several times across
    partitions; pypaimon reads it and writes updates and new keys; lakecore reads those."""
    wh = str(tmp_path / "wh")
    table = make_table(wh, SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                       options={"dynamic-bucket.target-row-num": "6"}, name=T)
    c1 = pa.concat_tables([rows("a", range(14), "c1"), rows("b", range(3), "c1")])
    c2 = pa.concat_tables([rows("a", range(10, 20), "c2"), rows("c", range(7), "c2")])
    c3 = rows("b", range(2, 9), "c3")
    for c in (c1, c2, c3):
        write(table, c)
    lc_buckets = keys_by_bucket(table)
    assert_one_bucket_per_key(lc_buckets)
    assert {b for (dt, b) in lc_buckets if dt == "a"} == {0, 1, 2, 3}
    assert sum(m.row_count for (dt, _), m in index_files(table).items() if dt == "a") == 20

    p1 = pa.concat_tables([rows("a", [0, 13, 19, 50, 51], "p1"), rows("c", [0, 70], "p1")])
    read1, plan, _, read2 = paimon_script([
        {"op": "read", "warehouse": wh, "table": T},
        {"op": "plan", "warehouse": wh, "table": T},
        {"op": "write", "warehouse": wh, "table": T, "data": [p1]},
        {"op": "read", "warehouse": wh, "table": T},
    ])
    assert canonical(read1, ["dt", "id"]) == model_of(c1, c2, c3)
    assert {(s["partition"][0], s["bucket"]) for s in plan} == set(lc_buckets)
    assert canonical(read2, ["dt", "id"]) == model_of(c1, c2, c3, p1)
    table = CatalogFactory.create({"warehouse": wh}).get_table(T)
    assert read(table, ["dt", "id"]) == model_of(c1, c2, c3, p1)
    final = keys_by_bucket(table)
    assert_one_bucket_per_key(final)
    owner = {(dt, i): b for (dt, b), ids in final.items() for i in ids}
    for (dt, b), ids in lc_buckets.items():
        assert all(owner[(dt, i)] == b for i in ids)
    # lakecore keeps writing on pypaimon's index
    write(table, rows("a", [50, 52], "l2"))
    assert_one_bucket_per_key(keys_by_bucket(table))
    assert len([r for r in read(table) if r["dt"] == "a"]) == 23
