"""Schema evolution on real tables: ALTER, then read, write, compact and time travel across
schema versions; the bugs other engines shipped, each pinned by a test."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, SchemaChange
from lakecore.cli.main import main
from lakecore.compact.executor import BucketCompactor
from lakecore.errors import (
    ColumnNotExistError,
    LakecoreValidationError,
    SchemaChangeError,
    SchemaError,
)
from lakecore.store.manifest_io import merge_entries
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, read, table_files, write

SC = SchemaChange
PK_SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int32()), ("b", pa.string())])


def catalog(tmp_path: Path) -> Any:
    return CatalogFactory.create({"warehouse": str(tmp_path)})


def alter(tmp_path: Path, *changes: SchemaChange) -> FileStoreTable:
    cat = catalog(tmp_path)
    cat.alter_table("db.t", list(changes))
    return cat.get_table("db.t")


def live_files(t: FileStoreTable) -> list[Any]:
    snap = t.snapshot_manager.latest()
    assert snap is not None
    mio = t.manifest_io()
    metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
        snap.delta_manifest_list)
    return [e.file for e in merge_entries(mio.read_entries(metas)).values()]


def pk_table(tmp_path: Path, **options: str) -> FileStoreTable:
    return make_table(str(tmp_path), PK_SCHEMA, primary_keys=["id"],
                      options={"bucket": "1", **options})


def append_table(tmp_path: Path, schema: pa.Schema | None = None) -> FileStoreTable:
    schema = schema or pa.schema([("id", pa.int64()), ("a", pa.int32()), ("b", pa.string())])
    return make_table(str(tmp_path), schema)


def rows(ids: list[int], a: list[int | None], b: list[str | None]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "a": pa.array(a, pa.int32()),
                     "b": pa.array(b, pa.string())})


# --- matching by field id --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_renamed_column_reads_its_old_values(tmp_path: Path, kind: str) -> None:
    t = pk_table(tmp_path) if kind == "pk" else append_table(tmp_path)
    write(t, rows([1, 2], [10, 20], ["x", "y"]))
    t = alter(tmp_path, SC.rename_column("b", "label"), SC.rename_column("a", "amount"))
    write(t, {"id": pa.array([3], pa.int64()), "amount": pa.array([30], pa.int32()),
              "label": ["z"]})
    assert read(t, "id") == [{"id": 1, "amount": 10, "label": "x"},
                             {"id": 2, "amount": 20, "label": "y"},
                             {"id": 3, "amount": 30, "label": "z"}]
    assert read(t, "id", predicate=lambda pb: pb.equal("label", "y")) == [
        {"id": 2, "amount": 20, "label": "y"}]
    assert read(t, "label", projection=["label"]) == [{"label": v} for v in "xyz"]


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_drop_and_readd_does_not_bring_old_values_back(tmp_path: Path, kind: str) -> None:
    t = pk_table(tmp_path) if kind == "pk" else append_table(tmp_path)
    write(t, rows([1, 2], [10, 20], ["old1", "old2"]))
    alter(tmp_path, SC.drop_column("b"))
    t = alter(tmp_path, SC.add_column("b", "STRING"))
    write(t, {"id": pa.array([3], pa.int64()), "a": pa.array([30], pa.int32()), "b": ["new"]})
    expected = [{"id": 1, "a": 10, "b": None}, {"id": 2, "a": 20, "b": None},
                {"id": 3, "a": 30, "b": "new"}]
    assert read(t, "id") == expected
    # the filter on the re-added column must not see the old values either (nor their stats)
    assert read(t, "id", predicate=lambda pb: pb.equal("b", "old1")) == []
    t.compact(full=True)
    assert read(t, "id") == expected
    if kind == "pk":  # rewritten into the newest schema
        assert all(f.schema_id == t.schema.id for f in live_files(t))


def test_renamed_primary_key(tmp_path: Path) -> None:
    t = pk_table(tmp_path, **{"write-only": "true"})
    write(t, rows([1, 2], [10, 20], ["x", "y"]))
    t = alter(tmp_path, SC.rename_column("id", "key"))
    assert t.schema.primary_keys == ("key",)
    write(t, {"key": pa.array([2, 3], pa.int64()), "a": pa.array([21, 30], pa.int32()),
              "b": ["y2", "z"]})
    expected = [{"key": 1, "a": 10, "b": "x"}, {"key": 2, "a": 21, "b": "y2"},
                {"key": 3, "a": 30, "b": "z"}]
    assert read(t, "key") == expected
    assert read(t, "key", predicate=lambda pb: pb.equal("key", 1)) == expected[:1]
    t.compact(full=True)
    assert read(t, "key") == expected


# --- types -----------------------------------------------------------------------------------


def test_one_scan_mixes_old_and_new_types_of_a_column(tmp_path: Path) -> None:
    """Old files hold int32, new ones int64; one merge-on-read and one compaction of both."""
    t = pk_table(tmp_path, **{"write-only": "true"})
    write(t, rows([1, 2, 3], [1, 2, 3], ["a", "b", "c"]))
    t = alter(tmp_path, SC.update_column_type("a", "BIGINT"))
    big = 5_000_000_000
    write(t, {"id": pa.array([2, 4], pa.int64()), "a": pa.array([big, 4], pa.int64()),
              "b": ["b2", "d"]})
    expected = [{"id": 1, "a": 1, "b": "a"}, {"id": 2, "a": big, "b": "b2"},
                {"id": 3, "a": 3, "b": "c"}, {"id": 4, "a": 4, "b": "d"}]
    assert read(t, "id") == expected
    rb = t.new_read_builder()
    arrow = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert arrow.schema.field("a").type == pa.int64()
    t.compact(full=True)
    assert read(t, "id") == expected
    assert {f.schema_id for f in live_files(t)} == {1}


def test_explicit_casts_read_like_pypaimon(tmp_path: Path) -> None:
    t = append_table(tmp_path)
    write(t, {"id": pa.array([1, 2], pa.int64()), "a": pa.array([7, -8], pa.int32()),
              "b": ["12", "-3"]})
    t = alter(tmp_path, SC.update_column_type("b", "INT"), SC.update_column_type("a", "STRING"))
    assert read(t, "id") == [{"id": 1, "a": "7", "b": 12}, {"id": 2, "a": "-8", "b": -3}]


def test_old_type_statistics_never_prune(tmp_path: Path) -> None:
    """An INT file's min/max read as BIGINT would be garbage for negative values (4-byte ints
    in 8-byte slots): a filter on the widened column must keep the file, not drop its rows."""
    t = append_table(tmp_path)
    write(t, {"id": pa.array([1, 2], pa.int64()), "a": pa.array([-5, -1], pa.int32()),
              "b": ["x", "y"]})
    t = alter(tmp_path, SC.update_column_type("a", "BIGINT"))
    write(t, {"id": pa.array([3], pa.int64()), "a": pa.array([7], pa.int64()), "b": ["z"]})
    assert [r["id"] for r in read(t, "id", predicate=lambda pb: pb.less_than("a", 0))] == [1, 2]
    assert [r["id"] for r in read(t, "id", predicate=lambda pb: pb.equal("a", -5))] == [1]
    # statistics of unchanged (and renamed) columns still prune the old file
    t = alter(tmp_path, SC.rename_column("b", "label"))
    pb = t.new_read_builder().new_predicate_builder()
    splits = t.new_read_builder().with_filter(pb.equal("label", "z")).new_scan().plan().splits()
    assert sum(len(s.files) for s in splits) == 1
    splits = t.new_read_builder().with_filter(pb.less_than("a", 0)).new_scan().plan().splits()
    # the new file's int64 stats prune it; the old file's int32 stats are not used
    assert [f.schema_id for s in splits for f in s.files] == [0]


def test_nested_fields_evolve_by_id(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()),
                        ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
                        ("arr", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32()))])
    t = append_table(tmp_path, schema)
    write(t, pa.table({"id": [1, 2], "s": [{"x": 1, "y": "a"}, None],
                       "arr": [[1, 2], None], "m": [[("k", 1)], []]}, schema=schema))
    t = alter(tmp_path, SC.rename_column(["s", "y"], "why"), SC.add_column(["s", "z"], "DOUBLE"),
              SC.update_column_type(["s", "x"], "BIGINT"),
              SC.update_column_type(["arr", "element"], "BIGINT"),
              SC.update_column_type(["m", "value"], "BIGINT"))
    assert read(t, "id") == [
        {"id": 1, "s": {"x": 1, "why": "a", "z": None}, "arr": [1, 2], "m": [("k", 1)]},
        {"id": 2, "s": None, "arr": None, "m": []},
    ]
    t.compact(full=True)
    assert read(t, "id")[0]["s"] == {"x": 1, "why": "a", "z": None}


# --- time travel -----------------------------------------------------------------------------


def test_time_travel_reads_with_the_snapshots_schema(tmp_path: Path) -> None:
    t = pk_table(tmp_path)
    (s1,) = write(t, rows([1], [10], ["x"]))
    t.create_tag("before")
    t = alter(tmp_path, SC.add_column("c", "DOUBLE"), SC.rename_column("b", "label"))
    (s2,) = write(t, {"id": pa.array([2], pa.int64()), "a": pa.array([20], pa.int32()),
                      "label": ["y"], "c": [1.5]})
    old = t.copy({"scan.snapshot-id": str(s1)})
    assert old.schema.id == 0 and read(old, "id") == [{"id": 1, "a": 10, "b": "x"}]
    assert old.new_read_builder().read_type().names == ["id", "a", "b"]
    with pytest.raises(SchemaError):  # the column did not exist then
        old.new_read_builder().with_projection(["c"])
    assert read(t.copy({"scan.tag-name": "before"}), "id") == [{"id": 1, "a": 10, "b": "x"}]
    new = t.copy({"scan.snapshot-id": str(s2)})
    assert read(new, "id") == [{"id": 1, "a": 10, "label": "x", "c": None},
                               {"id": 2, "a": 20, "label": "y", "c": 1.5}]
    assert t.snapshot_manager.snapshot(s2).schema_id == 1


# --- writers and readers opened before an ALTER ----------------------------------------------


def test_writer_opened_before_an_alter_still_commits(tmp_path: Path) -> None:
    stale = pk_table(tmp_path, **{"write-only": "true"})
    write(stale, rows([1], [1], ["a"]))
    fresh = alter(tmp_path, SC.add_column("c", "STRING"), SC.update_column_type("a", "BIGINT"))
    (sid,) = write(stale, rows([2], [2], ["b"]))
    # the snapshot records the newest schema (Paimon's commit does), the file its own
    assert stale.snapshot_manager.snapshot(sid).schema_id == 1
    assert sorted(f.schema_id for f in live_files(fresh)) == [0, 0]
    assert read(fresh, "id") == [{"id": 1, "a": 1, "b": "a", "c": None},
                                 {"id": 2, "a": 2, "b": "b", "c": None}]
    assert read(fresh.copy({"scan.snapshot-id": str(sid)}), "id") == read(fresh, "id")
    # the stale table still reads what it can: the type change it does not know is refused
    write(fresh, {"id": pa.array([3], pa.int64()), "a": pa.array([3], pa.int64()),
                  "b": ["c"], "c": ["new"]})
    with pytest.raises(SchemaError, match="open it again"):
        read(stale)
    # its dedicated compaction rewrites into the newest schema; a stale bucket compactor is
    # refused rather than drop the new column
    with pytest.raises(SchemaError, match="open it again"):
        BucketCompactor(stale, (), 0, live_files(fresh)).compact(full=True)
    stale.compact(full=True)
    assert {f.schema_id for f in live_files(fresh)} == {1}
    assert read(fresh, "id")[-1] == {"id": 3, "a": 3, "b": "c", "c": "new"}


def test_stale_writer_skips_inline_compaction_of_newer_files(tmp_path: Path) -> None:
    stale = pk_table(tmp_path, **{"full-compaction.delta-commits": "1"})
    fresh = alter(tmp_path, SC.add_column("c", "STRING"))
    write(fresh, {"id": pa.array([1], pa.int64()), "a": pa.array([1], pa.int32()), "b": ["a"],
                  "c": ["keep me"]})
    write(stale, rows([2], [2], ["b"]))  # its bucket holds a newer file: no inline compaction
    assert read(fresh, "id") == [{"id": 1, "a": 1, "b": "a", "c": "keep me"},
                                 {"id": 2, "a": 2, "b": "b", "c": None}]


def test_stale_reader_ignores_columns_added_since(tmp_path: Path) -> None:
    stale = append_table(tmp_path)
    fresh = alter(tmp_path, SC.add_column("c", "STRING"))
    write(fresh, {"id": pa.array([1], pa.int64()), "a": pa.array([1], pa.int32()), "b": ["a"],
                  "c": ["x"]})
    assert read(stale) == [{"id": 1, "a": 1, "b": "a"}]


# --- ALTER itself ----------------------------------------------------------------------------


def test_a_refused_alter_changes_nothing(tmp_path: Path) -> None:
    t = pk_table(tmp_path)
    write(t, rows([1], [1], ["a"]))
    before = table_files(t)
    cat = catalog(tmp_path)
    for changes, error in [
        ([SC.add_column("c", "INT"), SC.drop_column("id")], SchemaChangeError),
        ([SC.drop_column("nope")], ColumnNotExistError),
        ([SC.set_option("merge-engine", "first-row")], LakecoreValidationError),
        ([SC.set_option("bucket", "-1")], LakecoreValidationError),
        (["add c"], SchemaChangeError),
    ]:
        with pytest.raises(error):
            cat.alter_table("db.t", changes)
    assert table_files(t) == before
    assert cat.alter_table("db.nope", [SC.drop_column("a")], ignore_if_not_exists=True) is None
    assert cat.alter_table("db.t", []) is None and table_files(t) == before


def test_concurrent_alters_both_land(tmp_path: Path) -> None:
    """Losing the race for schema-N re-applies the changes on the winner's schema."""
    t = pk_table(tmp_path)
    manager = t.schema_manager
    raced: list[int] = []

    def competitor(new: Any) -> None:
        if not raced:
            raced.append(new.id)
            manager.commit_changes([SC.add_column("d", "INT")])

    new = manager.commit_changes([SC.add_column("c", "INT")], check=competitor)
    assert raced == [1] and new.id == 2
    assert [(f.name, f.id) for f in new.fields][-2:] == [("d", 3), ("c", 4)]


def test_alters_from_threads_serialize(tmp_path: Path) -> None:
    pk_table(tmp_path)
    errors: list[BaseException] = []

    def add(i: int) -> None:
        try:
            catalog(tmp_path).alter_table("db.t", [SC.add_column(f"c{i}", "INT")])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    t = catalog(tmp_path).get_table("db.t")
    assert t.schema.id == 6 and sorted(t.schema.field_names[3:]) == [f"c{i}" for i in range(6)]
    assert len({f.id for f in t.schema.fields}) == 9


def test_cli_alter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = pk_table(tmp_path)
    write(t, rows([1], [1], ["a"]))
    base = ["alter", "--warehouse", str(tmp_path), "--table", "db.t"]
    assert main([*base, "--add-column", "note", "STRING", "--rename", "b=label",
                 "--type", "a=BIGINT", "--set", "snapshot.num-retained.min=3",
                 "--dry-run", "--json"]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["dry_run"] and preview["schema"]["id"] == 1
    assert catalog(tmp_path).get_table("db.t").schema.id == 0
    assert main([*base, "--add-column", "note", "STRING", "--rename", "b=label",
                 "--type", "a=BIGINT", "--set", "snapshot.num-retained.min=3",
                 "--column-comment", "note=free text",
                 "--change", json.dumps({"action": "updateComment", "comment": "t"})]) == 0
    out = capsys.readouterr().out
    assert "created schema 1" in out and "label" in out
    t = catalog(tmp_path).get_table("db.t")
    assert t.schema.field_names == ["id", "a", "label", "note"]
    assert t.schema.row_type.field("note").description == "free text"
    assert t.schema.comment == "t" and t.schema.options["snapshot.num-retained.min"] == "3"
    assert read(t) == [{"id": 1, "a": 1, "label": "a", "note": None}]
    assert main([*base, "--drop", "id"]) == 1
    assert "primary-key column 'id'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--rename", "no-equals-sign"])
    assert main(base) == 2


def test_nested_nullability_change(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()),
                        ("s", pa.struct([pa.field("x", pa.int32(), False), ("y", pa.string())]))])
    t = append_table(tmp_path, schema)
    write(t, pa.table({"id": [1], "s": [{"x": 1, "y": "a"}]}, schema=schema))
    t = alter(tmp_path, SC.update_column_nullability(["s", "x"], True))
    write(t, {"id": [2], "s": [{"x": None, "y": "b"}]})
    assert read(t, "id") == [{"id": 1, "s": {"x": 1, "y": "a"}}, {"id": 2, "s": {"x": None,
                                                                                "y": "b"}}]
