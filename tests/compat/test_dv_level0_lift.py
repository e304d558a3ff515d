"""Deletion-vector compaction lifts a level-0 file as it is (no rewrite) only when it provably
holds no retraction, and a table that had no vectors is repaired when a file kept at a level
>= 1 holds a retraction pypaimon 2.1 did not count. pypaimon reads every result raw, with
lakecore's vectors applied, so a -D row left at a level >= 1 would show up there as a row."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema, SchemaChange
from lakecore.format.manifest import FileSource
from lakecore.read.scan import TableScan
from tests.compat.pypaimon_runner import paimon_read, paimon_script, requires_paimon

pytestmark = [pytest.mark.compat, requires_paimon]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()),
                    ("v", pa.int64()), ("rk", pa.string())])
KEYS = ["id", "dt"]
DV = {"bucket": "1", "deletion-vectors.enabled": "true", "rowkind.field": "rk",
      "write-only": "true"}


def batch(ids, v, rk="+I"):
    n = len(ids)
    return pa.table({"id": list(ids), "dt": ["a"] * n, "v": [v] * n, "rk": [rk] * n},
                    schema=SCHEMA)


def apply(model, t):
    for r in t.to_pylist():
        if r["rk"] in ("-D", "-U"):
            model.pop(r["id"], None)
        else:
            model[r["id"]] = r["v"]
    return model


def _sorted(pairs):
    return sorted(pairs, key=lambda p: (p[0], str(p[1])))  # a stray -D row has v None


def expected(model):
    return _sorted(model.items())


def lc_rows(t):
    rb = t.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return _sorted((r["id"], r["v"]) for r in got.to_pylist())


def pp_rows(wh):
    return _sorted((r["id"], r["v"]) for r in paimon_read(wh, "db.t").to_pylist())


def table(wh, options=None):
    cat = CatalogFactory.create({"warehouse": wh})
    if options is not None:
        cat.create_database("db", ignore_if_exists=True)
        cat.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=KEYS, options=options))
    return cat.get_table("db.t")


def commit(t, b):
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    try:
        w.write_arrow(b)
        wb.new_commit().commit(w.prepare_commit())
    finally:
        w.close()


def bucket_files(wh):
    return set(os.listdir(os.path.join(wh, "db.db", "t", "dt=a", "bucket-0")))


def live(t):
    """(file name, level, source) of the files a read sees."""
    return {(f.file_name, f.level, f.file_source)
            for s in TableScan(t).plan().splits() for f in s.files}


def test_level0_of_inserts_and_updates_is_lifted_as_is_and_both_readers_agree(
        tmp_path: Path) -> None:
    wh = str(tmp_path)
    t = table(wh, DV)
    b1 = batch(range(3000), 1)
    commit(t, b1)
    t.compact()
    # +U for existing keys and +I for new ones in one file: its _VALUE_KIND statistics span
    # 0..2, so the column itself shows there is no -U/-D
    b2 = pa.concat_tables([batch(range(0, 3000, 100), 2, "+U"), batch([5000, 5001], 3)])
    before = bucket_files(wh)
    commit(t, b2)
    (written,) = bucket_files(wh) - before
    t.compact()
    model = apply(apply({}, b1), b2)
    # the file the writer wrote now sits at a level >= 1 unchanged: lifted, not rewritten
    assert any(name == written and level > 0 and source is FileSource.APPEND
               for name, level, source in live(t)), live(t)
    assert bucket_files(wh) - before == {written}  # compaction wrote no data file
    assert pp_rows(wh) == lc_rows(t) == expected(model)


def test_level0_holding_a_delete_is_rewritten_not_lifted(tmp_path: Path) -> None:
    wh = str(tmp_path)
    t = table(wh, DV)
    b1 = batch(range(3000), 1)
    commit(t, b1)
    t.compact()
    b2 = pa.concat_tables([batch([10, 20], None, "-D"), batch([7], 9)])
    before = bucket_files(wh)
    commit(t, b2)
    (written,) = bucket_files(wh) - before
    t.compact()
    assert written not in {name for name, _, _ in live(t)}
    model = apply(apply({}, b1), b2)
    assert pp_rows(wh) == lc_rows(t) == expected(model)


def test_vectors_turned_on_repair_a_pypaimon_delete_kept_at_a_level_above_zero(
        tmp_path: Path) -> None:
    """Without vectors, lookup compaction lifts pypaimon's -D file (recorded with no deletes)
    to a level >= 1 unchanged, where merging on read applies it. Once vectors are on, readers
    read those levels raw: the first compaction must find the retraction and merge it away."""
    wh = str(tmp_path)
    opts = {"bucket": "1", "rowkind.field": "rk", "write-only": "true",
            "changelog-producer": "lookup"}
    b1 = batch(range(3000), 1)
    gone = batch([10, 2500], None, "-D")
    paimon_script([
        {"op": "create", "warehouse": wh, "table": "db.t", "schema": SCHEMA,
         "partition_keys": ["dt"], "primary_keys": KEYS, "options": opts},
        {"op": "write", "warehouse": wh, "table": "db.t", "data": b1},
    ])
    table(wh).compact(full=True)
    paimon_script([{"op": "write", "warehouse": wh, "table": "db.t", "data": gone}])
    t = table(wh)
    t.compact()
    model = apply(apply({}, b1), gone)
    upper = [f for s in TableScan(t).plan().splits() for f in s.files if f.level > 0]
    assert len({f.level for f in upper}) == 2  # the -D file was lifted as it is
    assert all(f.delete_row_count == 0 for f in upper)  # as pypaimon recorded it
    assert lc_rows(t) == expected(model)
    CatalogFactory.create({"warehouse": wh}).alter_table(
        "db.t", [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    t = table(wh)
    t.compact()
    assert pp_rows(wh) == lc_rows(t) == expected(model)
