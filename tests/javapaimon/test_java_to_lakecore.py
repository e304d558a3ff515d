"""lakecore reads, compacts and maintains tables Java Paimon wrote, and Java keeps using them.

Each test lets Java Paimon 1.4.2 (the oracle JVM, one per module) create and write a table,
compact it with its own compactions, expire and tag it. lakecore then reads it (the rows Java
reads from the same snapshot), compacts it (the universal pick and a full compaction) or runs its
maintenance, and both read the same rows afterwards; finally Java writes once more and both read
again. What lakecore cannot handle must be refused with a typed lakecore error that names the
feature, leaving every file of the table as it was.

Differences found are kept as strict xfails whose reason gives both outputs and the Paimon class
behind Java's.
"""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.errors import (
    LakecoreError,
    MaintenanceError,
    OptionError,
    SchemaError,
    UnsupportedFeatureError,
)
from lakecore.maintenance.retention import ExpireConfig
from tests.core.helpers import write
from tests.javapaimon.client import (
    KV,
    PKV,
    JavaPaimon,
    at,
    from_rows,
    paimon_fields,
    to_rows,
)

Row = tuple[Any, ...]
Change = tuple[str, Row]



# ------------------------------------------------------------------ helpers



def lc_table(wh: Path, name: str = "db.t", **options: str) -> Any:
    """The table as a fresh lakecore catalog opens it (nothing cached across Java's commits)."""
    table = CatalogFactory.create({"warehouse": str(wh)}).get_table(name)
    return table.copy(options) if options else table


def lc_arrow(table: Any) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def _norm(value: Any, t: pa.DataType) -> Any:
    """A hashable, order-free form: MAP entries sorted (a map has no order; Paimon's Avro reader
    hands a map's entries back in hash order, not the file's), lists and rows as tuples."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return tuple(sorted(((_norm(k, t.key_type), _norm(v, t.item_type)) for k, v in value),
                            key=repr))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return tuple(_norm(v, t.value_type) for v in value)
    if pa.types.is_struct(t):
        return tuple(_norm(value[f.name], f.type) for f in t)
    return value


def canon(table: pa.Table) -> list[Row]:
    types = [f.type for f in table.schema]
    out = [tuple(_norm(v, ty) for v, ty in zip(r.values(), types, strict=True))
           for r in table.to_pylist()]
    return sorted(out, key=repr)


def java_rows(jp: JavaPaimon, wh: Path, schema: pa.Schema, table: str = "db.t",
              **kw: Any) -> list[Row]:
    return canon(from_rows(jp.call("read", **at(wh, table), **kw), schema))


def same_rows(jp: JavaPaimon, wh: Path, **kw: Any) -> list[Row]:
    """lakecore's and Java's read of the table (``snapshot_id=`` / ``tag=`` for time travel)
    are equal; returns them."""
    options = {}
    if "snapshot_id" in kw:
        options["scan.snapshot-id"] = str(kw["snapshot_id"])
    if "tag" in kw:
        options["scan.tag-name"] = kw["tag"]
    ours = lc_arrow(lc_table(wh, **options))
    theirs = java_rows(jp, wh, ours.schema, **kw)
    assert canon(ours) == theirs
    return theirs


def lc_write(table: Any, rows: list[dict[str, Any]]) -> None:
    """One lakecore batch commit of ``rows`` (dicts in the table's read type)."""
    write(table, pa.Table.from_pylist(rows, schema=table.new_read_builder().read_type()))


def compact_both_ways(jp: JavaPaimon, wh: Path) -> list[Row]:
    """lakecore's universal pick, then its full compaction; after each, both read the rows
    they read before. Returns them."""
    before = same_rows(jp, wh)
    lc_table(wh).compact(full=False)
    assert same_rows(jp, wh) == before
    report = lc_table(wh).compact(full=True)
    assert report.snapshot_ids, report.skipped_reason
    assert same_rows(jp, wh) == before
    assert jp.call("snapshots", **at(wh))["snapshots"][-1]["kind"] == "COMPACT"
    return before


def levels(jp: JavaPaimon, wh: Path) -> list[tuple[Any, ...]]:
    return sorted((tuple(f["partition"]), f["bucket"], f["level"], f.get("deleted_rows", 0))
                  for f in jp.call("files", **at(wh))["files"])


def tree(wh: Path) -> dict[str, tuple[int, int]]:
    """Every file under the warehouse with its size and modification time."""
    return {str(p.relative_to(wh)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(wh.rglob("*")) if p.is_file()}


def java_changes(answer: dict[str, Any], schema: pa.Schema) -> list[Change]:
    data = canon_unsorted(from_rows(answer, schema))
    return sorted(zip(answer["row_kinds"], data, strict=True), key=repr)


def canon_unsorted(table: pa.Table) -> list[Row]:
    types = [f.type for f in table.schema]
    return [tuple(_norm(v, ty) for v, ty in zip(r.values(), types, strict=True))
            for r in table.to_pylist()]


def lc_changes(wh: Path, start: int, end: int) -> tuple[list[Change], pa.Schema]:
    """lakecore's incremental read (``incremental-between``): a changelog producer's records
    with their ``_ROW_KIND``."""
    got = lc_arrow(lc_table(wh, **{"incremental-between": f"{start},{end}"}))
    kinds = got.column("_ROW_KIND").to_pylist()
    data = got.drop_columns(["_ROW_KIND"])
    return sorted(zip(kinds, canon_unsorted(data), strict=True), key=repr), data.schema


def same_changes(jp: JavaPaimon, wh: Path, start: int, end: int) -> list[Change]:
    ours, schema = lc_changes(wh, start, end)
    theirs = java_changes(jp.call("read_incremental", **at(wh), start=start, end=end,
                                  mode="changelog"), schema)
    assert ours == theirs
    return theirs


def refused_or(action: Callable[[], Any], wh: Path, feature: str,
               otherwise: Callable[[Any], None], error: type[LakecoreError] | None = None,
               ) -> None:
    """Either lakecore refuses ``action`` with a lakecore error (exactly ``error`` if given)
    naming ``feature`` and leaves every file as it was, or the action works and
    ``otherwise(result)`` holds."""
    before = tree(wh)
    try:
        result = action()
    except LakecoreError as e:
        assert error is None or type(e) is error, f"{type(e).__name__}: {e}"
        assert feature in str(e), f"{type(e).__name__} does not name {feature!r}: {e}"
        assert tree(wh) == before
        return
    otherwise(result)


# ------------------------------------------------------------------ 1. deletion vectors

@pytest.mark.parametrize("bitmap64", ["false", "true"])
def test_dv_write_only_ingest_compacted_by_java(
        java_paimon: JavaPaimon, tmp_path: Path, bitmap64: str) -> None:
    """write-only ingest, Java's full compaction, upserts and deletes turned into deletion
    vectors by Java's universal compaction, one more level-0 commit; lakecore reads (level 0
    skipped, as Paimon's batchScanSkipLevel0), compacts both ways, Java compacts on top of
    lakecore's files and vectors."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2", "deletion-vectors.enabled": "true", "write-only": "true",
                     "deletion-vectors.bitmap64": bitmap64})
    jp.call("write", **t, rows=[[i, "x" if i % 3 else "y", f"v{i}"] for i in range(24)])
    assert same_rows(jp, wh) == []
    jp.call("compact", **t, full=True)
    jp.call("write", **t, rows=[[1, "x", "u1"], [3, "y", None], [4, "x", "u4"], [30, "x", "n"]],
            row_kinds=["+U", "-D", "+U", "+I"])
    jp.call("compact", **t, full=False)
    assert any(d for *_, d in levels(jp, wh))  # Java's vectors
    jp.call("write", **t, rows=[[5, "x", "late"], [6, "y", None]], row_kinds=["+U", "-D"])
    assert any(lv == 0 for _, _, lv, _ in levels(jp, wh))
    rows = same_rows(jp, wh)
    assert len(rows) == 24 and (5, "x", "v5") in rows  # the level-0 commit is not visible yet

    lc_table(wh).compact(full=False)  # lifts level 0, marks what it supersedes
    rows = same_rows(jp, wh)
    assert (5, "x", "late") in rows and (6, "y", "v6") not in rows and len(rows) == 23
    assert compact_both_ways(jp, wh) == rows

    jp.call("write", **t, rows=[[7, "x", "j7"], [40, "y", "j40"]], row_kinds=["+U", "+I"])
    jp.call("compact", **t, full=False)
    after = same_rows(jp, wh)
    assert (7, "x", "j7") in after and (40, "y", "j40") in after and len(after) == 24


def test_dv_stream_writer_with_inline_maintenance(java_paimon: JavaPaimon,
                                                  tmp_path: Path) -> None:
    """A stream writer (commit identifiers, waiting for its lookup compaction as Flink does)
    maintains deletion vectors at every commit; Java's full compaction drops them again.
    lakecore reads and compacts; then a new Java stream writer (same commit user, the next
    identifier) writes once more."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "1", "deletion-vectors.enabled": "true"})
    w = {**t, "stream": True, "commit_user": "ingest"}
    jp.call("write", **w, rows=[[i, p, f"a{i}"] for i in range(6) for p in "xy"])
    jp.call("write", **w, rows=[[1, "y", "b1"], [2, "y", None]], row_kinds=["+U", "-D"])
    assert any(d for *_, d in levels(jp, wh))
    jp.call("close", **t)
    jp.call("compact", **t, full=True)  # partition y: its vectors are dropped again
    # a new writer of the same user goes on with the user's next identifier
    last = jp.call("write", **w, rows=[[1, "x", "b1"], [3, "x", None]], row_kinds=["+U", "-D"],
                   commit_identifier=3)
    assert last["committed"] == 1
    assert any(d for *_, d in levels(jp, wh))  # partition x: a vector again
    jp.call("close", **t)
    rows = same_rows(jp, wh)
    assert len(rows) == 10 and (1, "y", "b1") in rows and (1, "x", "b1") in rows

    assert compact_both_ways(jp, wh) == rows
    again = jp.call("write", **w, rows=[[4, "y", "j4"], [9, "y", "j9"]], commit_identifier=4)
    assert again["committed"] == 1
    jp.call("close", **t)
    assert len(same_rows(jp, wh)) == 11


# ------------------------------------------------------------------ 2. changelog producers

@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_changelog_files_java_made(java_paimon: JavaPaimon, tmp_path: Path,
                                   producer: str) -> None:
    """Stream writes with commit identifiers; lookup: each commit waits for its lookup
    compaction; full-compaction: Java's full compaction after each commit makes the changelog.
    lakecore's incremental read between any two of those snapshots is Java's changelog read,
    +I/-U/+U/-D; then lakecore's own compaction makes the changelog, and Java reads it too."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "changelog-producer": producer})
    w = {**t, "stream": True, "commit_user": "job"}
    marks = [0]
    for rows, kinds in [([[1, "a"], [2, "b"], [3, "c"]], None),
                        ([[1, "a2"], [4, "d"]], None),
                        ([[2, "b"], [3, "c3"], [4, "d"]], ["-D", "+U", "+U"])]:
        marks.append(jp.call("write", **w, rows=rows, row_kinds=kinds)["snapshot_id"])
        if producer == "full-compaction":
            marks[-1] = jp.call("compact", **t, full=True)["snapshot_id"]
    jp.call("close", **t)
    snaps = {s["id"]: s for s in jp.call("snapshots", **t)["snapshots"]}
    assert all(snaps[m]["kind"] == "COMPACT" and snaps[m]["changelog_record_count"]
               for m in marks[1:])
    assert same_changes(jp, wh, marks[1], marks[2]) == [
        ("+I", (4, "d")), ("+U", (1, "a2")), ("-U", (1, "a"))]
    # a -U/+U pair with an unchanged value is still a pair without row-deduplicate
    assert same_changes(jp, wh, marks[2], marks[3]) == [
        ("+U", (3, "c3")), ("+U", (4, "d")), ("-D", (2, "b")), ("-U", (3, "c")),
        ("-U", (4, "d"))]
    assert len(same_changes(jp, wh, 0, marks[3])) == 11
    assert same_rows(jp, wh) == [(1, "a2"), (3, "c3"), (4, "d")]

    # lakecore writes (level 0, write-only) and its compaction produces the changelog
    start = lc_table(wh).snapshot_manager.latest_id()
    lc_write(lc_table(wh, **{"write-only": "true"}),
             [{"id": 4, "v": "d4"}, {"id": 5, "v": "e"}])
    lc_table(wh).compact(full=producer == "full-compaction")
    end = lc_table(wh).snapshot_manager.latest_id()
    assert same_changes(jp, wh, start, end) == [
        ("+I", (5, "e")), ("+U", (4, "d4")), ("-U", (4, "d"))]
    lc_write(lc_table(wh, **{"write-only": "true"}), [{"id": 1, "v": "a3"}])
    lc_table(wh).compact(full=True)
    assert same_changes(jp, wh, end, lc_table(wh).snapshot_manager.latest_id()) == [
        ("+U", (1, "a3")), ("-U", (1, "a2"))]

    # Java writes once more (the next identifier of the same user)
    start = lc_table(wh).snapshot_manager.latest_id()
    jp.call("write", **w, rows=[[5, "e"], [6, "f"]], row_kinds=["-D", "+I"],
            commit_identifier=4)
    jp.call("close", **t)
    if producer == "full-compaction":
        jp.call("compact", **t, full=True)
    end = lc_table(wh).snapshot_manager.latest_id()
    assert same_changes(jp, wh, start, end) == [("+I", (6, "f")), ("-D", (5, "e"))]
    assert same_rows(jp, wh) == [(1, "a3"), (3, "c3"), (4, "d4"), (6, "f")]


# ------------------------------------------------------------------ 3. merge engines

AGG = [
    {"name": "id", "type": "BIGINT NOT NULL"},
    {"name": "cnt", "type": "BIGINT"},
    {"name": "amt", "type": "DECIMAL(10, 2)"},
    {"name": "m", "type": "INT"},
    {"name": "lv", "type": "STRING"},
    {"name": "la", "type": "STRING"},
]
AGG_OPTIONS = {
    # remove-record-on-delete: a -D removes the row; every aggregator must retract -U
    "true": {"fields.m.aggregate-function": "product",
             "fields.la.aggregate-function": "last_non_null_value"},
    # otherwise a -D retracts too; max and listagg cannot, ignore-retract skips them
    "false": {"fields.m.aggregate-function": "max", "fields.m.ignore-retract": "true",
              "fields.la.aggregate-function": "listagg", "fields.la.ignore-retract": "true"},
}


@pytest.mark.parametrize("remove_on_delete", ["true", "false"])
def test_aggregation_with_retractions(java_paimon: JavaPaimon, tmp_path: Path,
                                      remove_on_delete: str) -> None:
    """-U/+U pairs and -D records into sum (BIGINT, DECIMAL), product or max, last_value,
    last_non_null_value or listagg; Java compacts part of it, lakecore the rest."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=AGG, primary_keys=["id"], options={
        "bucket": "2", "merge-engine": "aggregation",
        "fields.cnt.aggregate-function": "sum", "fields.amt.aggregate-function": "sum",
        "fields.lv.aggregate-function": "last_value",
        "aggregation.remove-record-on-delete": remove_on_delete, **AGG_OPTIONS[remove_on_delete]})
    jp.call("write", **t, rows=[[i, 1, "1.50", i + 1, f"a{i}", f"x{i}"] for i in range(8)])
    jp.call("write", **t, rows=[
        [1, 1, "1.50", 2, "a1", "x1"], [1, 5, "2.25", 9, "b1", "y1"],
        [2, 1, "1.50", 3, "a2", "x2"], [3, 1, "0.50", None, None, None]],
        row_kinds=["-U", "+U", "-D", "+I"])
    jp.call("compact", **t, full=False)
    jp.call("write", **t, rows=[[4, 2, "0.25", 2, "c4", "z"], [5, 1, "1.50", 6, "a5", "x5"]],
            row_kinds=["+I", "-D"])
    rows = same_rows(jp, wh)
    by_id = {r[0]: r for r in rows}
    if remove_on_delete == "true":
        assert 2 not in by_id and 5 not in by_id
        # the writer merges its commit's -U/+U first (a -U retracted from no value leaves the
        # product null, the +U makes it 9), the compaction then multiplies: 2 * 9
        assert by_id[1] == (1, 5, decimal.Decimal("2.25"), 18, "b1", "y1")
    else:
        assert by_id[2] == (2, 0, decimal.Decimal("0.00"), 3, None, "x2")
        assert by_id[1] == (1, 5, decimal.Decimal("2.25"), 9, "b1", "x1,y1")
    assert compact_both_ways(jp, wh) == rows

    jp.call("write", **t, rows=[[6, 3, "3.00", 10, "z6", "q"], [7, 1, "1.50", 8, "a7", "x7"]],
            row_kinds=["+U", "-U"])
    after = {r[0]: r for r in same_rows(jp, wh)}
    assert after[7][1:3] == (0, decimal.Decimal("0.00")) and after[6][1] == 4


LISTAGG = [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "la", "type": "STRING"},
           {"name": "ld", "type": "STRING"}]


def test_listagg_empty_strings_and_distinct(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """listagg as Java's FieldListaggAgg (1.4.2): null and empty inputs add nothing (an empty
    accumulator takes the next input); with ``fields.<f>.distinct`` the first value stays
    whole and each later value adds only its non-empty parts (split at the delimiter) not yet
    held. Java writes one commit per step (write-only: level 0, merged on read), lakecore
    reads what Java reads, compacts it, and writes the next values itself."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=LISTAGG, primary_keys=["id"], options={
        "bucket": "1", "merge-engine": "aggregation", "write-only": "true",
        "fields.la.aggregate-function": "listagg", "fields.ld.aggregate-function": "listagg",
        "fields.ld.distinct": "true", "fields.ld.list-agg-delimiter": ";"})
    steps = [("a", "a;b;a", "", "x"), ("", "b", None, ""), ("b", "c;a;;d", "", ";;"),
             (None, "a", "", " "), ("c", "d;e", "", "x; y")]
    for la1, ld1, la2, ld2 in steps:
        jp.call("write", **t, rows=[[1, la1, ld1], [2, la2, ld2]])
    expected = [(1, "a,b,c", "a;b;a;c;d;e"), (2, "", "x; ; y")]
    assert same_rows(jp, wh) == expected
    assert lc_table(wh).compact(full=True).snapshot_ids
    assert same_rows(jp, wh) == expected
    lc_write(lc_table(wh), [{"id": 1, "la": "", "ld": "e;f;a"}, {"id": 2, "la": "z", "ld": "y"}])
    lc_table(wh).compact(full=True)
    assert same_rows(jp, wh) == [(1, "a,b,c", "a;b;a;c;d;e;f"), (2, "z", "x; ; y;y")]


@pytest.mark.parametrize("write_only", ["true", "false"])
def test_first_row(java_paimon: JavaPaimon, tmp_path: Path, write_only: str) -> None:
    """first-row keeps each key's first record. write-only: level-0 files stay invisible to
    batch reads (Paimon's batchScanSkipLevel0 for first-row) until a compaction; otherwise the
    writer's lookup compaction lifts them at every commit."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "merge-engine": "first-row", "write-only": write_only})
    jp.call("write", **t, rows=[[i, f"a{i}"] for i in range(5)])
    jp.call("write", **t, rows=[[i, f"b{i}"] for i in range(3, 8)])
    expected = [(i, f"a{i}" if i < 5 else f"b{i}") for i in range(8)]
    if write_only == "true":
        assert same_rows(jp, wh) == []
        jp.call("compact", **t, full=False)
        jp.call("write", **t, rows=[[i, f"c{i}"] for i in range(6, 10)])  # level 0 again
        expected += [(8, "c8"), (9, "c9")]
        assert same_rows(jp, wh) == sorted(expected[:8], key=repr)
        lc_table(wh).compact(full=True)
    assert same_rows(jp, wh) == sorted(expected, key=repr)
    lc_table(wh).compact(full=True)
    assert same_rows(jp, wh) == sorted(expected, key=repr)
    jp.call("write", **t, rows=[[i, f"d{i}"] for i in range(8, 12)])
    if write_only == "true":
        jp.call("compact", **t, full=False)
    first = dict(expected)
    expected = sorted({**{i: f"d{i}" for i in range(8, 12)}, **first}.items(), key=repr)
    assert same_rows(jp, wh) == expected


def test_first_row_universal_compaction_of_java_level0(java_paimon: JavaPaimon,
                                                        tmp_path: Path) -> None:
    """Java's level-0 file of a first-row table, lifted by lakecore's universal pick to level
    4 under Java's level 5: the keys level 5 holds (6, 7) are dropped, as Java's
    FirstRowMergeFunctionWrapper does, so Java's raw read of the files (MergeTreeSplitGenerator)
    shows each key once."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "merge-engine": "first-row", "write-only": "true"})
    jp.call("write", **t, rows=[[i, f"a{i}"] for i in range(5)])
    jp.call("write", **t, rows=[[i, f"b{i}"] for i in range(3, 8)])
    jp.call("compact", **t, full=False)
    jp.call("write", **t, rows=[[i, f"c{i}"] for i in range(6, 10)])
    assert lc_table(wh).compact(full=False).snapshot_ids
    assert [lv for *_, lv, _ in levels(jp, wh)] == [4, 5]
    expected = sorted([(i, f"a{i}") for i in range(5)] + [(i, f"b{i}") for i in range(5, 8)]
                      + [(8, "c8"), (9, "c9")], key=repr)
    assert same_rows(jp, wh) == expected


# ------------------------------------------------------------------ 4. formats and types

NESTED = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("dec", pa.decimal128(12, 3)), ("d", pa.date32()), ("ts", pa.timestamp("us")),
    ("ts3", pa.timestamp("ms")), ("ltz", pa.timestamp("us", tz="UTC")), ("bin", pa.binary()),
    ("i8", pa.int8()), ("i16", pa.int16()), ("f", pa.float32()),
    ("arr", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.int64())),
    ("r", pa.struct([("a", pa.int32()),
                     ("n", pa.struct([("x", pa.float64()), ("y", pa.list_(pa.int32()))]))])),
    ("ar", pa.list_(pa.struct([("k", pa.string()), ("v", pa.decimal128(5, 2))]))),
])


def nested_row(i: int, gen: int) -> dict[str, Any]:
    return {
        "id": i, "dec": decimal.Decimal(f"{i}.{gen:03d}"),
        "d": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "ts": dt.datetime(2024, 1, 1, 12, 0, 0, i * 1000 + gen),
        "ts3": dt.datetime(2024, 2, 1, 0, 0, i, 123000),
        "ltz": dt.datetime(2024, 3, 1, 1, 2, 3, 456789, tzinfo=dt.UTC),
        "bin": bytes([i, gen, 255]), "i8": i - 3, "i16": -i * 100, "f": 1.5,
        "arr": [f"s{i}", None, f"g{gen}"],
        "m": [("k", i), ("z", None)] if i % 2 else [],
        "r": {"a": i, "n": {"x": i / 2, "y": [gen, None]}} if i != 4 else None,
        "ar": [{"k": "p", "v": decimal.Decimal("1.25")}, {"k": None, "v": None}],
    }


def nested_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return to_rows(pa.Table.from_pylist(rows, schema=NESTED))


@pytest.mark.parametrize("fmt", ["orc", "avro", "mixed"])
def test_orc_avro_and_mixed_data_files_with_nested_types(
        java_paimon: JavaPaimon, tmp_path: Path, fmt: str) -> None:
    """Java writes ORC or Avro data files (mixed: ORC, then Avro, then Parquet after ALTERs of
    file.format) with DECIMAL, DATE, TIMESTAMP(3/6), TIMESTAMP_LTZ, BYTES, ARRAY, MAP, ROW,
    a nested ROW and ROWs in an ARRAY. lakecore reads them by extension and compacts them into
    Parquet; Java reads those and writes its own format again."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    formats = ["orc", "avro", "parquet"] if fmt == "mixed" else [fmt] * 3
    jp.call("create", **t, fields=paimon_fields(NESTED), primary_keys=["id"],
            options={"bucket": "2", "file.format": formats[0]})
    for n, (fmt_now, batch, kinds) in enumerate([
            (formats[0], [nested_row(i, 1) for i in range(8)], None),
            (formats[1], [nested_row(i, 2) for i in range(0, 8, 3)], None),
            (formats[2], [nested_row(1, 3), nested_row(5, 3)], ["+U", "-D"])]):
        if n and fmt_now != formats[n - 1]:
            jp.call("alter", **t, changes=[{"set_option": {"key": "file.format",
                                                           "value": fmt_now}}])
        jp.call("write", **t, rows=nested_rows(batch), row_kinds=kinds)
    suffixes = {p.suffix for p in wh.rglob("data-*")}
    assert suffixes == ({".orc", ".avro", ".parquet"} if fmt == "mixed" else {f".{fmt}"})
    rows = compact_both_ways(jp, wh)
    assert len(rows) == 7 and rows[0][0] == 0
    jp.call("write", **t, rows=nested_rows([nested_row(9, 4), nested_row(2, 4)]))
    after = same_rows(jp, wh)
    assert len(after) == 8 and (2, decimal.Decimal("2.004")) in {r[:2] for r in after}


# ------------------------------------------------------------------ 5. dynamic buckets

def test_dynamic_buckets_updates_land_in_javas_buckets(java_paimon: JavaPaimon,
                                                       tmp_path: Path) -> None:
    """bucket=-1 with dynamic-bucket.target-row-num 3: Java's HashBucketAssigner spreads 40
    keys over 10+ buckets per partition; lakecore's upserts of those keys must find their
    bucket in Java's HASH index (Java merges per bucket: a key in two buckets would be read
    twice), its new keys get buckets Java then keeps using."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "-1", "dynamic-bucket.target-row-num": "3"})

    def part(i: int) -> str:
        return "x" if i % 4 else "y"

    jp.call("write", **t, rows=[[i, part(i), f"a{i}"] for i in range(40)])
    jp.call("write", **t, rows=[[i, part(i), f"b{i}"] for i in range(0, 40, 5)])
    jp.call("compact", **t, full=False)
    buckets = {(p, b) for p, b, *_ in levels(jp, wh)}
    assert len({b for p, b in buckets if p == ("x",)}) >= 10
    assert len(same_rows(jp, wh)) == 40

    lc_write(lc_table(wh), [{"id": i, "p": part(i), "v": f"lc{i}"} for i in range(0, 46, 3)])
    rows = same_rows(jp, wh)
    assert len(rows) == 42 and len({(r[0], r[1]) for r in rows}) == 42
    assert {r for r in rows if r[0] % 3 == 0} == {(i, part(i), f"lc{i}") for i in range(0, 46, 3)}
    assert compact_both_ways(jp, wh) == rows
    jp.call("write", **t, rows=[[i, part(i), f"j{i}"] for i in range(0, 50, 7)])
    after = same_rows(jp, wh)
    assert len(after) == 43 and {(49, "x", "j49"), (42, "x", "j42")} <= set(after)


# ------------------------------------------------------------------ 6. expiry and tags

def _expire_all_but_latest(table: Any) -> Any:
    return table.expire_snapshots(dry_run=False, config=ExpireConfig(
        retain_min=1, retain_max=1, time_retained=dt.timedelta(0)))


def _remove_every_orphan(table: Any) -> Any:
    # every unreferenced file counts, however new: a cut-off five minutes ahead, age 0
    return table.remove_orphan_files(
        older_than=dt.timedelta(0), now=dt.datetime.now() + dt.timedelta(minutes=5),
        dry_run=False)


def _tagged_changelog_table(jp: JavaPaimon, wh: Path) -> None:
    """Dynamic buckets (HASH index files), lookup changelog, two tags, Java's own expiry."""
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "-1", "dynamic-bucket.target-row-num": "4",
                     "changelog-producer": "lookup"})
    jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"g0.{i}"] for i in range(12)])
    for g in range(1, 6):
        jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"g{g}.{i}"]
                                    for i in range(g, g + 6)] + [[g, "x" if g % 2 else "y", None]],
                row_kinds=["+I"] * 6 + ["-D"])
        if g == 1:
            jp.call("create_tag", **t, name="t1")
        if g == 3:
            jp.call("compact", **t, full=True)
            jp.call("create_tag", **t, name="t3")
    assert jp.call("expire_snapshots", **t, retain_max=3, retain_min=1)["expired"] == 10


def test_java_tags_and_expiry_survive_lakecore_maintenance(java_paimon: JavaPaimon,
                                                           tmp_path: Path) -> None:
    """Java expired all but three snapshots; its tags pin two expired ones. lakecore lists the
    tags, reads every tag and retained snapshot as Java does, compacts, expires everything but
    the latest snapshot and removes every orphan: Java still reads every tag as before, and
    writes on."""
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    _tagged_changelog_table(jp, wh)
    listing = jp.call("snapshots", **t)
    table = lc_table(wh)
    assert {tag.name: tag.snapshot_id for tag in table.list_tags()} == listing["tag_snapshots"]
    tagged = {name: same_rows(jp, wh, tag=name) for name in listing["tags"]}
    assert len(tagged["t1"]) == 11 and len(tagged["t3"]) == 9
    retained = [s["id"] for s in listing["snapshots"]]
    for sid in retained:
        same_rows(jp, wh, snapshot_id=sid)
    same_changes(jp, wh, retained[0], retained[-1])

    latest = compact_both_ways(jp, wh)
    assert _expire_all_but_latest(lc_table(wh)).snapshots_removed == len(retained)
    _remove_every_orphan(lc_table(wh))
    assert [s["id"] for s in jp.call("snapshots", **t)["snapshots"]] == [retained[-1] + 1]
    for name, rows in tagged.items():
        assert java_rows(jp, wh, lc_arrow(lc_table(wh)).schema, tag=name) == rows
        assert same_rows(jp, wh, tag=name) == rows
    assert same_rows(jp, wh) == latest

    jp.call("write", **t, rows=[[100, "x", "new"], [1, "x", "upd"]])  # 1 was deleted
    assert len(same_rows(jp, wh)) == len(latest) + 2
    jp.call("delete_tag", **t, name="t1")  # Java cleans up after lakecore's expiry
    assert jp.call("expire_snapshots", **t, retain_max=1, retain_min=1)["expired"] >= 1
    assert same_rows(jp, wh, tag="t3") == tagged["t3"]
    assert len(same_rows(jp, wh)) == len(latest) + 2


def test_lakecore_expiry_deletes_what_java_expiry_deletes(java_paimon: JavaPaimon,
                                                          tmp_path: Path) -> None:
    """Java expired a tagged snapshot with a changelog (its changelog manifest list is gone,
    the tag still names it); lakecore's expiry and Java's of a copy then leave the same files
    (ExpireSnapshotsImpl, FileDeletionBase.manifestSkippingSet)."""
    jp = java_paimon
    ours, theirs = tmp_path / "lc", tmp_path / "java"
    _tagged_changelog_table(jp, ours)
    shutil.copytree(ours, theirs)
    assert jp.call("expire_snapshots", **at(theirs), retain_max=1, retain_min=1)["expired"] == 2
    report = _expire_all_but_latest(lc_table(ours))
    assert report.snapshots_removed == 2

    def files(wh: Path) -> set[str]:
        return {k for k in tree(wh) if "_lakecore" not in k}

    assert files(ours) == files(theirs), report.plan.notes


# ------------------------------------------------------------------ 7. branches

def test_branches_keep_their_files_through_lakecore_maintenance(java_paimon: JavaPaimon,
                                                                tmp_path: Path) -> None:
    """Java branches off a tag (the branch shares the main branch's files and manifests) and
    makes an empty branch; both get writes. lakecore compacts the main branch and expires all
    but its latest snapshot (the tag keeps what the branch needs); orphan removal is refused
    (a MaintenanceError naming the branches) and changes nothing. Java reads both branches as
    before and writes to them again."""
    jp, wh = java_paimon, tmp_path
    t, b1, e = at(wh), at(wh, "db.t$branch_b1"), at(wh, "db.t$branch_e")
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2"})
    jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"a{i}"] for i in range(10)])
    jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"b{i}"] for i in range(0, 10, 3)])
    jp.call("create_tag", **t, name="t2")
    jp.call("create_branch", **t, name="b1", tag="t2")
    jp.call("create_branch", **t, name="e")
    jp.call("write", **b1, rows=[[i, "x" if i % 2 else "y", f"br{i}"] for i in range(5, 14)])
    jp.call("write", **e, rows=[[100, "x", "e100"]])
    jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"c{i}"] for i in range(0, 10, 2)],
            row_kinds=["-D", "+U", "+U", "+U", "+U"])
    schema = lc_arrow(lc_table(wh)).schema
    branch_rows = {name: java_rows(jp, wh, schema, f"db.t$branch_{name}") for name in ("b1", "e")}
    assert len(branch_rows["b1"]) == 14 and branch_rows["e"] == [(100, "x", "e100")]

    main = compact_both_ways(jp, wh)
    assert _expire_all_but_latest(lc_table(wh)).snapshots_removed >= 3
    before = tree(wh)
    with pytest.raises(MaintenanceError, match="has branches"):
        _remove_every_orphan(lc_table(wh))
    assert tree(wh) == before
    for name, rows in branch_rows.items():
        assert java_rows(jp, wh, schema, f"db.t$branch_{name}") == rows
    assert same_rows(jp, wh) == main
    assert same_rows(jp, wh, tag="t2") == java_rows(jp, wh, schema, "db.t$branch_b1",
                                                    snapshot_id=2)

    jp.call("write", **b1, rows=[[1, "x", "br-late"]])
    jp.call("write", **e, rows=[[101, "y", "e101"]])
    assert (1, "x", "br-late") in java_rows(jp, wh, schema, "db.t$branch_b1")
    assert len(java_rows(jp, wh, schema, "db.t$branch_e")) == 2
    assert same_rows(jp, wh) == main


# ------------------------------------------------------------------ 8. features: match or refuse

NOW = int(time.time())  # record-level expiry: "old" is two hours before the module started


@dataclass(frozen=True)
class Feature:
    """A table option or type Java accepts. For each of lakecore's read, full compaction and
    write, lakecore must either do what Java does (the rows Java reads afterwards equal those
    of a twin copy Java compacted or wrote the same rows into) or refuse: a ``error`` (any
    lakecore error when None) whose message names ``feature``, every file left as it was."""

    fields: list[dict[str, str]]
    options: dict[str, str]
    commits: list[list[list[Any]]]  # Java's commits before lakecore starts
    upserts: list[list[Any]]  # the write step
    feature: str
    error: type[LakecoreError] | None = None
    partition_keys: tuple[str, ...] = ()
    java_writes: bool = True  # False: the driver cannot write it, lakecore must refuse
    prepare: Callable[[JavaPaimon, Path], None] | None = None


def _fallback_branch(jp: JavaPaimon, wh: Path) -> None:
    jp.call("create_branch", **at(wh), name="fb")
    jp.call("write", **at(wh, "db.t$branch_fb"), rows=[[1, "x", "fbx"], [2, "y", "fby"]])
    jp.call("alter", **at(wh), changes=[{"set_option": {"key": "scan.fallback-branch",
                                                        "value": "fb"}}])
    assert jp.call("read", **at(wh))["rows"] == [[1, "x", "main"], [2, "y", "fby"]]


KVN = KV + [{"name": "n", "type": "BIGINT"}]
FEATURES = {
    "partial-update sequence group": Feature(
        KVN, {"merge-engine": "partial-update", "fields.n.sequence-group": "v"},
        [[[1, "a", 1], [2, "b", 2]], [[1, None, 3], [2, "c", 1]]], [[1, "z", 2], [2, "y", 9]],
        "sequence-group", OptionError),
    "descending sequence field": Feature(
        KVN, {"sequence.field": "n", "sequence.field.sort-order": "descending"},
        [[[1, "a", 2], [2, "b", 1]], [[1, "c", 1], [2, "d", 2]]], [[1, "e", 0], [2, "f", 5]],
        "sequence.field.sort-order", OptionError),
    "collect aggregate function": Feature(
        [KV[0], {"name": "v", "type": "ARRAY<STRING>"}],
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"},
        [[[1, ["a"]]], [[1, ["b"]]]], [[1, ["c"]]], "'collect'", OptionError),
    # Java's KEY_DYNAMIC bucket mode (a global key index); the driver cannot write it
    "cross-partition upsert": Feature(
        PKV, {"bucket": "-1"}, [], [[1, "x", "a"]], "cross-partition upsert",
        UnsupportedFeatureError, partition_keys=("p",), java_writes=False),
    "VARIANT column": Feature(
        [KV[0], {"name": "v", "type": "VARIANT"}], {}, [], [[1, None]], "VARIANT", SchemaError,
        java_writes=False),
    "data-file.thin-mode": Feature(  # no _KEY_ columns in the data files
        KVN, {"data-file.thin-mode": "true"}, [[[1, "a", 1], [2, "b", 2]], [[1, "c", 3]]],
        [[2, "d", 4], [3, "e", 5]], "thin-mode"),
    "bucket-function.type=mod": Feature(
        KV, {"bucket": "3", "bucket-function.type": "mod"}, [[[i, f"a{i}"] for i in range(12)]],
        [[i, f"u{i}"] for i in range(12)], "bucket-function.type", UnsupportedFeatureError),
    "record-level expiry": Feature(
        [KV[0], KV[1], {"name": "ts", "type": "INT"}],
        {"record-level.expire-time": "1 h", "record-level.time-field": "ts"},
        [[[i, f"a{i}", NOW - 7200 if i % 2 else NOW] for i in range(6)],
         [[i, f"b{i}", NOW - 7200 if i % 2 else NOW] for i in range(3)]],
        [[6, "c6", NOW]], "record-level.expire-time", UnsupportedFeatureError),
    "ignore-update-before": Feature(
        [KV[0], {"name": "n", "type": "BIGINT"}, {"name": "rk", "type": "STRING"}],
        {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
         "ignore-update-before": "true", "rowkind.field": "rk"},
        [[[1, 10, "+I"], [2, 5, "+I"]]], [[1, 10, "-U"], [1, 3, "+U"], [2, 5, "-D"]],
        "ignore-update-before", UnsupportedFeatureError),
    "data-file.external-paths": Feature(
        KV, {"data-file.external-paths": "<external>",
             "data-file.external-paths.strategy": "round-robin"},
        [[[i, f"a{i}"] for i in range(4)]], [[5, "e"]], "data-file.external-paths",
        UnsupportedFeatureError),
    "manifest.format=orc": Feature(
        KV, {"manifest.format": "orc"}, [[[i, f"a{i}"] for i in range(4)]], [[5, "e"]],
        "manifest.format", UnsupportedFeatureError),
    "scan.fallback-branch": Feature(
        PKV, {}, [[[1, "x", "main"]]], [[3, "y", "m3"]], "scan.fallback-branch",
        UnsupportedFeatureError, partition_keys=("p",), prepare=_fallback_branch),
}


def _java_read(jp: JavaPaimon, wh: Path) -> list[Any]:
    return jp.call("read", **at(wh))["rows"]


def _feature_params() -> list[Any]:
    return [pytest.param(v, id=k) if isinstance(v, Feature)
            else pytest.param(*v.values, marks=v.marks, id=k) for k, v in FEATURES.items()]


@pytest.mark.parametrize("c", _feature_params())
def test_java_features_lakecore_matches_or_refuses(java_paimon: JavaPaimon, tmp_path: Path,
                                                   c: Feature) -> None:
    jp, wh = java_paimon, tmp_path / "wh"
    options = {"bucket": "1", **c.options}
    if options.get("data-file.external-paths") == "<external>":
        (tmp_path / "elsewhere").mkdir()
        options["data-file.external-paths"] = (tmp_path / "elsewhere").as_uri()
    jp.call("create", **at(wh), fields=c.fields, primary_keys=["id"],
            partition_keys=list(c.partition_keys), options=options)
    for rows in c.commits:
        jp.call("write", **at(wh), rows=rows)
    if c.prepare is not None:
        c.prepare(jp, wh)

    def refused_or_same(step: str, action: Callable[[], Any], java: Callable[[Path], Any],
                        ) -> None:
        twin = tmp_path / step
        shutil.copytree(wh, twin)
        java(twin)
        expected = _java_read(jp, twin)
        refused_or(action, wh, c.feature, lambda _: _same(_java_read(jp, wh), expected, step),
                   error=c.error)

    # read: lakecore's rows are Java's
    refused_or(lambda: lc_arrow(lc_table(wh)), wh, c.feature,
               lambda got: _same(canon(got), java_rows(jp, wh, got.schema), "read"),
               error=c.error)
    # a full compaction: Java then reads what it reads after its own full compaction
    refused_or_same("compact", lambda: lc_table(wh).compact(full=True),
                    lambda twin: jp.call("compact", **at(twin), full=True))
    # a write: Java then reads what it reads after writing the same rows itself
    upserts = c.upserts
    if not c.java_writes:
        before = tree(wh)
        with pytest.raises(LakecoreError) as e:
            _lc_write_positional(wh, upserts)
        assert c.error is None or type(e.value) is c.error, e.value
        assert c.feature in str(e.value)
        assert tree(wh) == before
        return
    refused_or_same("write", lambda: _lc_write_positional(wh, upserts),
                    lambda twin: jp.call("write", **at(twin), rows=upserts))


def _same(got: Any, expected: Any, step: str) -> None:
    assert got == expected, step


def _lc_write_positional(wh: Path, rows: list[list[Any]]) -> None:
    table = lc_table(wh)
    names = table.new_read_builder().read_type().names
    lc_write(table, [dict(zip(names, r, strict=True)) for r in rows])


# a dedicated reproduction of the deletion-vector index difference, outside the stream test
def test_java_writes_after_lakecore_rewrote_an_empty_dv_index(java_paimon: JavaPaimon,
                                                              tmp_path: Path) -> None:
    jp, wh = java_paimon, tmp_path
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "1", "deletion-vectors.enabled": "true"})
    jp.call("write", **t, rows=[[i, p, f"a{i}"] for i in range(4) for p in "xy"])
    jp.call("write", **t, rows=[[1, "y", "b"], [2, "y", None]], row_kinds=["+U", "-D"])
    jp.call("compact", **t, full=True)  # y: an index file with no vectors left
    jp.call("write", **t, rows=[[1, "x", "b"]])  # x: a vector
    assert lc_table(wh).compact(full=True).snapshot_ids  # x rewritten: a new index manifest
    rows = same_rows(jp, wh)
    jp.call("write", **t, rows=[[3, "y", "j"]])
    assert same_rows(jp, wh) == sorted(set(rows) - {(3, "y", "a3")} | {(3, "y", "j")}, key=repr)
