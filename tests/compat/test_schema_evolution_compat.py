"""Schema evolution across engines, both directions.

* pypaimon evolves a table (add, rename, widen INT -> BIGINT, drop and re-add a name) between
  its writes; lakecore reads every snapshot as pypaimon does (time travel included), writes
  and compacts on top; pypaimon then reads lakecore's result identically.
* lakecore evolves the same way; pypaimon reads it identically, writes on top with the new
  schema, and lakecore reads that.
* the same ALTERs give the same ``schema-1`` file in both engines, and the changes Paimon
  refuses (key and partition columns, NOT NULL additions, immutable options) lakecore refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema, SchemaChange
from lakecore.errors import LakecoreValidationError
from lakecore.table import FileStoreTable
from tests.compat.pypaimon_runner import alter_step, canonical, paimon_script, requires_paimon
from tests.core.helpers import write

pytestmark = [pytest.mark.compat, requires_paimon]
SC = SchemaChange

SCHEMA0 = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                     ("a", pa.int32()), ("b", pa.string()), ("d", pa.float64())])
SCHEMA1 = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                     ("a", pa.int64()), ("label", pa.string()), ("d", pa.float64()),
                     ("c", pa.float64())])
SCHEMA2 = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                     ("a", pa.int64()), ("label", pa.string()), ("c", pa.float64()),
                     ("d", pa.string())])
ALTER1 = [SC.add_column("c", "DOUBLE"), SC.rename_column("b", "label"),
          SC.update_column_type("a", "BIGINT")]
ALTER2 = [SC.drop_column("d"), SC.add_column("d", "STRING")]
DAYS = ("2026-01-01", "2026-01-02")
BIG = 3_000_000_000
PK_OPTIONS = {"bucket": "2", "write-only": "true"}
TABLES = {"db.pk": (["id", "dt"], PK_OPTIONS), "db.ap": ([], {})}


def batch0() -> pa.Table:
    ids = list(range(40))
    return pa.table({"id": ids, "dt": [DAYS[i % 2] for i in ids],
                     "a": [i - 20 for i in ids], "b": [f"b{i}" for i in ids],
                     "d": [i * 0.5 for i in ids]}, schema=SCHEMA0)


def batch1() -> pa.Table:
    ids = list(range(0, 20, 2))
    return pa.table({"id": ids, "dt": [DAYS[i % 2] for i in ids],
                     "a": [BIG + i for i in ids], "label": [f"L{i}" for i in ids],
                     "d": [-1.0] * len(ids), "c": [i / 4 for i in ids]}, schema=SCHEMA1)


def batch2(start: int, tag: str) -> pa.Table:
    ids = list(range(start, start + 20))
    return pa.table({"id": ids, "dt": [DAYS[i % 2] for i in ids], "a": [-i for i in ids],
                     "label": [f"{tag}{i}" for i in ids], "c": [None] * len(ids),
                     "d": [f"{tag}-d{i}" for i in ids]}, schema=SCHEMA2)


def lc_read(t: FileStoreTable, snapshot_id: int | None = None,
            filter_: Any = None) -> pa.Table:
    if snapshot_id is not None:
        t = t.copy({"scan.snapshot-id": str(snapshot_id)})
    rb = t.new_read_builder()
    if filter_ is not None:
        rb = rb.with_filter(filter_(rb.new_predicate_builder()))
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    return canonical(table, ["id", "dt"] if "dt" in table.column_names else ["id"])


def reads(wh: str, name: str, snapshot_ids: list[int]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"op": "read", "warehouse": wh, "table": name,
                                    "snapshot_id": None}]
    steps += [{"op": "read", "warehouse": wh, "table": name, "snapshot_id": s}
              for s in snapshot_ids]
    steps.append({"op": "read", "warehouse": wh, "table": name, "snapshot_id": None,
                  "filter": [["a", "less_than", 0]]})
    return steps


def test_pypaimon_evolves_lakecore_reads_writes_compacts(tmp_path: Path) -> None:
    wh = str(tmp_path)
    steps: list[dict[str, Any]] = []
    for name, (pk, options) in TABLES.items():
        steps += [
            {"op": "create", "warehouse": wh, "table": name, "schema": SCHEMA0,
             "partition_keys": ["dt"], "primary_keys": pk, "options": options},
            {"op": "write", "warehouse": wh, "table": name, "data": batch0()},  # snapshot 1
            alter_step(wh, name, ALTER1),
            {"op": "write", "warehouse": wh, "table": name, "data": batch1()},  # 2
            alter_step(wh, name, ALTER2),
            {"op": "write", "warehouse": wh, "table": name, "data": batch2(30, "p")},  # 3
            *reads(wh, name, [1, 2]),
        ]
    results = paimon_script(steps)
    cat = CatalogFactory.create({"warehouse": wh})
    offset = 0
    for name in TABLES:
        theirs = results[offset + 6: offset + 10]
        offset += 10
        t = cat.get_table(name)
        assert t.schema.id == 2 and t.schema.field_names == SCHEMA2.names
        # every snapshot reads as pypaimon reads it, with the schema it was committed with
        assert rows_of(lc_read(t)) == rows_of(theirs[0])
        assert lc_read(t, 1).column_names == SCHEMA0.names == theirs[1].column_names
        assert rows_of(lc_read(t, 1)) == rows_of(theirs[1])
        assert rows_of(lc_read(t, 2)) == rows_of(theirs[2])
        # filters on the widened column: old files' INT statistics must not prune
        mine = lc_read(t, filter_=lambda pb: pb.less_than("a", 0))
        assert rows_of(mine) == rows_of(theirs[3])
        assert mine.num_rows >= 20
        # lakecore writes (upserts into old and new keys) and compacts on top
        write(t, batch2(10, "l"))
        t.compact(full=True)
    after = paimon_script([s for name in TABLES for s in reads(wh, name, [])])
    for i, name in enumerate(TABLES):
        t = cat.get_table(name)
        assert rows_of(lc_read(t)) == rows_of(after[2 * i])
        assert rows_of(lc_read(t, filter_=lambda pb: pb.less_than("a", 0))) == rows_of(
            after[2 * i + 1])
    pk_rows = {(r["id"], r["dt"]): r for r in lc_read(cat.get_table("db.pk")).to_pylist()}
    assert pk_rows[(0, DAYS[0])]["a"] == BIG and pk_rows[(12, DAYS[0])]["label"] == "l12"
    assert pk_rows[(1, DAYS[1])]["d"] is None  # the re-added d never shows the old doubles


def test_lakecore_evolves_pypaimon_reads_and_writes(tmp_path: Path) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db")
    for name, (pk, options) in TABLES.items():
        cat.create_table(name, Schema.from_pyarrow_schema(
            SCHEMA0, partition_keys=["dt"], primary_keys=pk, options=options))
        t = cat.get_table(name)
        write(t, batch0())
        cat.alter_table(name, ALTER1)
        write(cat.get_table(name), batch1())
        cat.alter_table(name, ALTER2)
        t = cat.get_table(name)
        write(t, batch2(30, "l"))
        if pk:
            t.compact()  # some files rewritten into schema 2, some left as they were
    steps: list[dict[str, Any]] = []
    for name in TABLES:
        steps += reads(wh, name, [1, 2])
        steps.append({"op": "write", "warehouse": wh, "table": name, "data": batch2(5, "p")})
        steps.append({"op": "read", "warehouse": wh, "table": name, "snapshot_id": None})
    results = paimon_script(steps)
    for i, name in enumerate(TABLES):
        theirs = results[6 * i: 6 * i + 6]
        t = cat.get_table(name)
        snaps = [s.id for s in t.snapshot_manager.snapshots()]
        last_before = snaps[-2]  # pypaimon's write added the last one
        assert rows_of(lc_read(t, last_before)) == rows_of(theirs[0])
        assert rows_of(lc_read(t, 1)) == rows_of(theirs[1])
        assert theirs[1].column_names == SCHEMA0.names
        assert rows_of(lc_read(t, 2)) == rows_of(theirs[2])
        assert rows_of(lc_read(t, last_before, filter_=lambda pb: pb.less_than("a", 0))) == (
            rows_of(theirs[3]))
        assert rows_of(lc_read(t)) == rows_of(theirs[5])


def _schema_json(wh: str, name: str, schema_id: int) -> dict[str, Any]:
    path = Path(wh) / "db.db" / name.split(".")[1] / "schema" / f"schema-{schema_id}"
    obj = json.loads(path.read_text())
    obj.pop("timeMillis")
    if obj.get("comment") is None:
        obj.pop("comment", None)  # pypaimon writes null, Java and lakecore leave it out
    return _without_nullable_keys(obj)


def _without_nullable_keys(obj: Any) -> Any:
    """pypaimon also writes ``"nullable": true`` beside a nested type's ``"type": "ROW"``,
    which already says it (Java and lakecore spell NOT NULL in the type text only)."""
    if isinstance(obj, dict):
        out = {k: _without_nullable_keys(v) for k, v in obj.items()}
        if isinstance(out.get("type"), str) and out.get("nullable") is (
                "NOT NULL" not in out["type"]):
            out.pop("nullable")
        return out
    if isinstance(obj, list):
        return [_without_nullable_keys(v) for v in obj]
    return obj


NESTED = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("a", pa.int32()), ("b", pa.string()),
                    ("s", pa.struct([("x", pa.int32()), ("y", pa.string())]))])
SAME_CHANGES = [
    SC.add_column("c", "DOUBLE", comment="a new one"),
    SC.add_column("r", {"type": "ROW", "fields": [{"id": 0, "name": "p", "type": "INT"}]}),
    SC.rename_column("b", "label"), SC.update_column_type("a", "BIGINT"),
    SC.add_column(["s", "z"], "STRING"), SC.rename_column(["s", "y"], "why"),
    SC.drop_column(["s", "x"]), SC.rename_column("id", "key"),
    SC.update_column_comment("a", "widened"), SC.set_option("snapshot.num-retained.min", "3"),
    SC.update_comment("evolved"),
]
REFUSED = [
    [SC.drop_column("key")], [SC.update_column_type("key", "INT")],
    [SC.rename_column("dt", "day")], [SC.drop_column("dt")],
    [SC.update_column_nullability("key", True)], [SC.add_column("n", "INT NOT NULL")],
    [SC.update_column_nullability("label", False)], [SC.drop_column("nope")],
    [SC.rename_column("label", "a")], [SC.set_option("merge-engine", "first-row")],
    [SC.update_column_type("c", "BOOLEAN")], [SC.update_column_type("a", "DECIMAL(5, 2)")],
]


def test_same_alters_same_schema_files_same_refusals(tmp_path: Path) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db")
    for name in ("db.p", "db.l"):
        cat.create_table(name, Schema.from_pyarrow_schema(
            NESTED, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "1"}))
        write(cat.get_table(name), pa.table({"id": [1], "dt": ["x"], "a": [1], "b": ["b"],
                                             "s": [{"x": 1, "y": "y"}]}, schema=NESTED))
    steps = [alter_step(wh, "db.p", SAME_CHANGES)]
    steps += [alter_step(wh, "db.p", changes, expect_error=True) for changes in REFUSED]
    results = paimon_script(steps)
    cat.alter_table("db.l", SAME_CHANGES)
    assert _schema_json(wh, "db.l", 1) == _schema_json(wh, "db.p", 1)
    for changes, result in zip(REFUSED, results[1:]):
        assert result["error"] is not None, f"pypaimon accepted {changes}"
        with pytest.raises(LakecoreValidationError):
            cat.alter_table("db.l", changes)
    assert sorted(p.name for p in (tmp_path / "db.db" / "l" / "schema").iterdir()) == [
        "schema-0", "schema-1"]
    # nested fields renamed, added and dropped, a ROW column added: both engines read the
    # old file and a new one alike
    t = cat.get_table("db.l")
    new_row = {"key": 2, "dt": "x", "a": 2, "label": "n", "c": 0.5, "r": {"p": 7},
               "s": {"why": "w", "z": "z"}}
    write(t, pa.Table.from_pylist([new_row], schema=t.schema.arrow_schema()))
    theirs = paimon_script([{"op": "read", "warehouse": wh, "table": name, "snapshot_id": None}
                            for name in ("db.l", "db.p")])
    mine = lc_read(t)
    assert canonical(theirs[0], "key") == canonical(mine, "key")
    assert mine.sort_by("key").to_pylist()[0] == {
        "key": 1, "dt": "x", "a": 1, "label": "b", "c": None, "r": None,
        "s": {"why": "y", "z": None}}
    assert canonical(theirs[1], "key") == canonical(lc_read(cat.get_table("db.p")), "key")
