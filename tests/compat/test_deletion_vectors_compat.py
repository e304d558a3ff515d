"""Deletion-vector tables shared with pypaimon 2.1: pypaimon writes (it cannot compact, so its
own reader sees nothing of its level-0 files), lakecore compacts and marks vectors, pypaimon
then reads exactly the rows with lakecore's vectors applied and keeps writing; and tables
lakecore creates, writes and compacts read the same in pypaimon."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.format.index_manifest import DELETION_VECTORS_INDEX
from tests.compat.pypaimon_runner import canonical, paimon_read, paimon_script, requires_paimon
from tests.core.helpers import write as lc_write

pytestmark = [pytest.mark.compat, requires_paimon]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()),
                    ("v", pa.int64()), ("s", pa.string()), ("rk", pa.string())])
KEYS = ["id", "dt"]
BASE = {"bucket": "2", "deletion-vectors.enabled": "true", "rowkind.field": "rk"}


def batch(ids, dt, v, s=None, rk="+I"):
    n = len(ids)
    return pa.table({"id": list(ids), "dt": [dt] * n, "v": [v] * n, "s": [s] * n,
                     "rk": [rk] * n}, schema=SCHEMA)


def model_apply(model, t, engine="deduplicate"):
    for r in t.to_pylist():
        k = (r["id"], r["dt"])
        if r["rk"] == "-D":
            model.pop(k, None)
            continue
        old = model.get(k)
        if old is None or engine == "deduplicate":
            model[k] = dict(r)
        elif engine == "partial-update":
            model[k] = {c: (r[c] if r[c] is not None else old[c]) for c in r}
        else:  # aggregation: sum of v, last non-null s
            model[k] = {**r, "v": (old["v"] or 0) + (r["v"] or 0),
                        "s": r["s"] if r["s"] is not None else old["s"]}
    return model


def rows(model):
    return sorted(((k[0], k[1], r["v"], r["s"]) for k, r in model.items()))


def lc_rows(t):
    rb = t.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted((r["id"], r["dt"], r["v"], r["s"]) for r in got.to_pylist())


def pp_rows(wh):
    got = paimon_read(wh, "db.t")
    return sorted((r["id"], r["dt"], r["v"], r["s"]) for r in got.to_pylist())


def lc_table(wh):
    return CatalogFactory.create({"warehouse": wh}).get_table("db.t")


def vector_count(t):
    entries = t.index_entries(t.snapshot_manager.latest(), DELETION_VECTORS_INDEX)
    return sum(len(e.index_file.dv_ranges or {}) for e in entries)


def _paimon_writes(wh, options, batches):
    steps = [{"op": "create", "warehouse": wh, "table": "db.t", "schema": SCHEMA,
              "partition_keys": ["dt"], "primary_keys": KEYS, "options": options}]
    steps += [{"op": "write", "warehouse": wh, "table": "db.t", "data": b} for b in batches]
    steps.append({"op": "read", "warehouse": wh, "table": "db.t"})
    return paimon_script(steps)[-1]


@pytest.mark.parametrize("changelog", ["none", "lookup"])
def test_pypaimon_writes_lakecore_compacts_pypaimon_reads_and_writes_on(
        tmp_path: Path, changelog: str) -> None:
    wh = str(tmp_path)
    opts = {**BASE, "changelog-producer": changelog}
    # a base much larger than the later commits, so compaction lifts them without a full merge
    b1 = batch(range(3000), "a", 1, "x" * 40)
    b2 = batch(range(0, 3000, 100), "a", 2, "y")
    model = model_apply(model_apply({}, b1), b2)
    seen = _paimon_writes(wh, opts, [b1, b2])
    assert seen.num_rows == 0  # pypaimon cannot compact: level 0 stays invisible to it
    t = lc_table(wh)
    t.compact()
    assert pp_rows(wh) == lc_rows(t) == rows(model)
    # pypaimon keeps writing: updates, new keys and a delete; lakecore compacts again and marks
    b3 = batch(range(5, 3000, 200), "a", 3, "z")
    b4 = batch([200, 201], "a", 4, "n")
    b5 = batch([7], "a", None, None, "-D")
    for b in (b3, b4, b5):
        model = model_apply(model, b)
    paimon_script([{"op": "write", "warehouse": wh, "table": "db.t", "data": [b3, b4, b5]}])
    assert pp_rows(wh) == rows(model_apply(model_apply({}, b1), b2))  # still not compacted
    t = lc_table(wh)
    t.compact()
    assert vector_count(t) > 0  # old rows were marked, not rewritten
    assert pp_rows(wh) == lc_rows(t) == rows(model)


@pytest.mark.parametrize("engine,extra", [
    ("partial-update", {}),
    ("aggregation", {"fields.v.aggregate-function": "sum",
                     "fields.s.aggregate-function": "last_non_null_value"}),
])
def test_merging_engines_pypaimon_writes_lakecore_compacts(tmp_path: Path, engine: str,
                                                             extra: dict) -> None:
    wh = str(tmp_path)
    opts = {"bucket": "2", "deletion-vectors.enabled": "true", "merge-engine": engine,
            **extra}
    b1 = batch(range(3000), "a", 1, "x" * 40)
    b2 = batch(range(0, 3000, 70), "a", 5, None)
    b3 = batch(range(0, 3000, 140), "a", None, "w")
    _paimon_writes(wh, opts, [b1])
    lc_table(wh).compact()
    model = model_apply({}, b1, engine)
    for b in (b2, b3):
        paimon_script([{"op": "write", "warehouse": wh, "table": "db.t", "data": [b]}])
        model = model_apply(model, b, engine)
        t = lc_table(wh)
        t.compact()
        assert pp_rows(wh) == lc_rows(t) == rows(model)
    assert vector_count(lc_table(wh)) > 0


def test_lakecore_creates_writes_compacts_pypaimon_reads(tmp_path: Path) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=KEYS,
        options={**BASE, "write-only": "false"}))
    t = cat.get_table("db.t")
    model: dict = {}
    batches = [batch(range(3000), "a", 1, "x" * 40), batch(range(3000), "b", 1, "x" * 40),
               batch(range(0, 3000, 90), "a", 2, "y"),
               batch(range(3, 3000, 310), "b", 2, None, "-D"),
               batch(range(0, 3000, 130), "b", 3, "z")]
    for b in batches:  # inline compaction: every commit lifts level 0 and marks vectors
        lc_write(t, b)
        model = model_apply(model, b)
    assert vector_count(t) > 0
    assert pp_rows(wh) == lc_rows(t) == rows(model)
    t.compact(full=True)
    assert vector_count(t) == 0
    assert pp_rows(wh) == lc_rows(t) == rows(model)
    # pypaimon writes on; lakecore's dedicated compaction makes it visible to both
    more = batch(range(0, 3000, 170), "a", 9, "p")
    model = model_apply(model, more)
    paimon_script([{"op": "write", "warehouse": wh, "table": "db.t", "data": [more]}])
    t = lc_table(wh)
    t.compact()
    assert pp_rows(wh) == lc_rows(t) == rows(model)
    assert canonical(paimon_read(wh, "db.t"), KEYS, exclude=["rk"]) == canonical(
        t.new_read_builder().new_read().to_arrow(t.new_read_builder().new_scan().plan().splits()),
        KEYS, exclude=["rk"])


def test_a_lone_pypaimon_delete_file_is_applied_not_lifted_as_rows(tmp_path: Path) -> None:
    """pypaimon 2.1 records no retractions for a level-0 file of -D rows: lifting that file
    as it is would leave -D rows at level >= 1, read raw as live rows."""
    wh = str(tmp_path)
    b1 = batch(range(3000), "a", 1, "x" * 40)
    _paimon_writes(wh, BASE, [b1])
    lc_table(wh).compact()
    gone = batch([10, 2500], "a", None, None, "-D")
    paimon_script([{"op": "write", "warehouse": wh, "table": "db.t", "data": [gone]}])
    t = lc_table(wh)
    t.compact()
    model = model_apply(model_apply({}, b1), gone)
    assert vector_count(t) > 0
    assert pp_rows(wh) == lc_rows(t) == rows(model)


def test_turning_vectors_on_pypaimon_reads_no_duplicates_after_first_compaction(
        tmp_path: Path) -> None:
    from lakecore import SchemaChange

    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", ignore_if_exists=True)
    # lookup compaction lifts level 0 just under the max level: overlapping runs at levels >= 1
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=KEYS,
        options={"bucket": "2", "rowkind.field": "rk", "write-only": "true",
                 "changelog-producer": "lookup"}))
    t = cat.get_table("db.t")
    model: dict = {}
    # updates only: no retraction that would make pypaimon merge the split anyway
    steps = [(batch(range(500), "a", 1, "x"), True), (batch(range(0, 500, 5), "a", 2), False)]
    for b, full in steps:
        lc_write(t, b)
        t.compact(full=full)
        model = model_apply(model, b)
    assert lc_rows(t) == rows(model)
    cat.alter_table("db.t", [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    t = lc_table(wh)
    t.compact()
    assert pp_rows(wh) == lc_rows(t) == rows(model)


def test_index_files_rolled_at_target_size_read_by_pypaimon(tmp_path: Path) -> None:
    """deletion-vectors.index-file.target-size: a bucket's vectors roll into several index
    files (here one per vector); pypaimon reads the table through all of them, and the next
    compaction replaces every file of the bucket (no stale vector survives)."""
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=KEYS,
        options={**BASE, "bucket": "1", "write-only": "false",
                 "num-sorted-run.compaction-trigger": "10",
                 "deletion-vectors.index-file.target-size": "1 b"}))
    t = cat.get_table("db.t")
    model: dict = {}
    for b in (batch(range(2000), "a", 1, "x"), batch(range(0, 2000, 7), "a", 2, "y"),
              batch(range(0, 2000, 11), "a", 3, "z"),
              batch(range(5, 2000, 13), "a", 4, None, "-D")):
        lc_write(t, b)
        model = model_apply(model, b)
    entries = t.index_entries(t.snapshot_manager.latest(), DELETION_VECTORS_INDEX)
    assert len(entries) >= 2 and all(len(e.index_file.dv_ranges or {}) == 1 for e in entries)
    assert pp_rows(wh) == lc_rows(t) == rows(model)
    more = batch(range(1, 2000, 5), "a", 5, "w")
    lc_write(t, more)
    model = model_apply(model, more)
    t = lc_table(wh)
    live = {f.file_name for s in t.new_read_builder().new_scan().plan().splits() for f in s.files}
    after = t.index_entries(t.snapshot_manager.latest(), DELETION_VECTORS_INDEX)
    held = [n for e in after for n in (e.index_file.dv_ranges or {})]
    assert len(held) == len(set(held)) and set(held) <= live  # one vector per live file
    assert pp_rows(wh) == lc_rows(t) == rows(model)
