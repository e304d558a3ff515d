"""Incremental reads (``incremental-between``) as Paimon's batch scan reads them: the scan modes
(``incremental-between-scan-mode``: auto, delta, changelog, diff), tag ranges (the tags' diff,
or with ``incremental-between-tag-to-snapshot`` their snapshot range), the ``_ROW_KIND``
column, ``force_keep_delete``, the level-0 filter of deletion-vector tables and Paimon's errors.
Expected rows are written out by hand; the same reads against Java Paimon:
tests/javapaimon/test_incremental_modes.py."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakecore.errors import OptionError, SnapshotNotExistError
from lakecore.options.registry import IncrementalBetweenScanMode
from lakecore.read.split_read import ROW_KIND_COLUMN
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])
AGG = pa.schema([pa.field("id", pa.int64(), False), ("n", pa.int64()), ("s", pa.string())])
C1 = [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")]
C2 = [(1, "a2", "+U"), (2, "b", "-D"), (4, "d", "+I")]
C3 = [(4, "d2", "+U"), (5, "e", "+I")]
Change = tuple[str, tuple[Any, ...]]


def rows(data: list[tuple[Any, ...]], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in data],
                                schema=schema)


def table(tmp_path, producer: str = "none", schema: pa.Schema = SCHEMA,
          pk: list[str] | None = None, **options: str) -> FileStoreTable:
    opts = {"bucket": "1", "changelog-producer": producer}
    if schema is SCHEMA:
        opts["rowkind.field"] = "op"
    return make_table(str(tmp_path), schema, primary_keys=["id"] if pk is None else pk or None,
                      options={**opts, **options})


def changes(t: FileStoreTable, between: str, keep_delete: bool = False,
            **options: str) -> list[Change]:
    """(row kind, row) of the incremental read, sorted."""
    got = incremental(t, between, keep_delete, **options)
    kinds = got.column(ROW_KIND_COLUMN).to_pylist()
    data = [tuple(r.values()) for r in got.drop_columns([ROW_KIND_COLUMN]).to_pylist()]
    return sorted(zip(kinds, data, strict=True), key=repr)


def incremental(t: FileStoreTable, between: str, keep_delete: bool = False,
                **options: str) -> pa.Table:
    opts = {"incremental-between": between, **{k.replace("_", "-"): v for k, v in options.items()}}
    rb = t.copy(opts).new_read_builder()
    read = rb.new_read()
    if keep_delete:
        read.force_keep_delete()
    return read.to_arrow(rb.new_scan().plan().splits())


def mode(m: str) -> dict[str, str]:
    return {"incremental_between_scan_mode": m}


def srt(items: list[Change]) -> list[Change]:
    return sorted(items, key=repr)


def three_commits(tmp_path, producer: str = "none", **options: str) -> FileStoreTable:
    t = table(tmp_path, producer, **options)
    for c in (C1, C2, C3):
        write(t, rows(c))
    return t


DELTA = srt([("+U", (1, "a2", "+U")), ("-D", (2, "b", "-D")), ("+I", (4, "d", "+I")),
             ("+U", (4, "d2", "+U")), ("+I", (5, "e", "+I"))])
DIFF = srt([("+U", (1, "a2", "+U")), ("+U", (4, "d2", "+U")), ("+I", (5, "e", "+I"))])


# ------------------------------------------------------------------ options

def test_options_parse_as_paimon() -> None:
    from lakecore.options import CoreOptions
    o = CoreOptions.from_map({"incremental-between-scan-mode": "DiFF",
                              "incremental-between-tag-to-snapshot": "true"})
    assert o.incremental_between_scan_mode is IncrementalBetweenScanMode.DIFF
    assert o.incremental_between_tag_to_snapshot is True
    d = CoreOptions.from_map({})
    assert d.incremental_between_scan_mode is IncrementalBetweenScanMode.AUTO
    assert d.incremental_between_tag_to_snapshot is False
    for key, bad in [("incremental-between-scan-mode", "both"),
                     ("incremental-between-tag-to-snapshot", "maybe")]:
        with pytest.raises(OptionError) as info:
            CoreOptions.from_map({key: bad})
        assert info.value.key == key


# ------------------------------------------------------------------ delta, changelog, auto

def test_no_producer_auto_is_the_delta_of_append_snapshots_as_written(tmp_path) -> None:
    """Each APPEND snapshot's records with their kinds, -D included, nothing merged across
    snapshots; no changelog to read; a COMPACT snapshot adds nothing."""
    t = three_commits(tmp_path)
    assert changes(t, "1,3") == DELTA
    assert changes(t, "1,3", **mode("delta")) == DELTA
    assert changes(t, "1,3", **mode("changelog")) == []
    assert changes(t, "0,1") == srt([("+I", r) for r in C1])
    t.compact(full=True)
    assert changes(t, "1,4") == DELTA
    assert changes(t, "3,4") == []


def test_a_commit_merges_its_own_records_per_key(tmp_path) -> None:
    """The writer merges one commit's records of a key before it writes them: the delta holds
    the merged record (a key the commit deleted: its -D)."""
    t = table(tmp_path)
    write(t, rows(C1))
    write(t, rows([(1, "x", "+U"), (1, "y", "+U"), (2, "b", "-D"), (6, "f", "+I"),
                   (6, "f", "-D")]))
    assert changes(t, "1,2") == srt([("+U", (1, "y", "+U")), ("-D", (2, "b", "-D")),
                                     ("-D", (6, "f", "-D"))])


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_changelog_producers_auto_reads_the_changelog(tmp_path, producer: str) -> None:
    t = three_commits(tmp_path, producer)
    latest = t.snapshot_manager.latest_id()
    if producer == "input":  # the changelog is the input
        want = DELTA
    else:  # lookup: the changes of the merged state, -U/+U pairs
        want = srt([("-U", (1, "a", "+I")), ("+U", (1, "a2", "+U")), ("-D", (2, "b", "+I")),
                    ("+I", (4, "d", "+I")), ("-U", (4, "d", "+I")), ("+U", (4, "d2", "+U")),
                    ("+I", (5, "e", "+I"))])
    start = 1 if producer == "input" else 2  # lookup: snapshot 2 is C1's compaction
    assert changes(t, f"{start},{latest}") == want
    assert changes(t, f"{start},{latest}", **mode("changelog")) == want
    # delta: the APPEND snapshots' files, as written (lookup compacts them in COMPACT ones)
    assert changes(t, f"{start},{latest}", **mode("delta")) == DELTA


def test_changelog_mode_leaves_overwrite_snapshots_out(tmp_path) -> None:
    """A batch changelog read skips OVERWRITE snapshots (Paimon's CHANGELOG scan mode); a
    diff sees what the overwrite replaced."""
    t = table(tmp_path, "input")
    write(t, rows(C1[:2]))
    write(t, rows([(7, "x", "+I")]), overwrite={})
    write(t, rows([(8, "y", "+I")]))
    assert [t.snapshot_manager.snapshot(i).commit_kind.value for i in (1, 2, 3)] == [
        "APPEND", "OVERWRITE", "APPEND"]
    assert changes(t, "1,3") == [("+I", (8, "y", "+I"))]
    assert changes(t, "1,3", **mode("delta")) == [("+I", (8, "y", "+I"))]
    assert changes(t, "1,3", **mode("diff")) == [("+I", (7, "x", "+I")), ("+I", (8, "y", "+I"))]
    assert changes(t, "1,3", keep_delete=True, **mode("diff")) == srt([
        ("+I", (7, "x", "+I")), ("+I", (8, "y", "+I")), ("-D", (1, "a", "+I")),
        ("-D", (2, "b", "+I"))])


# ------------------------------------------------------------------ diff

def test_diff_of_uncompacted_snapshots(tmp_path) -> None:
    """The end's new files merged (the start's file is shared): keys added or changed, no -D;
    with force_keep_delete the -D record of key 2 as written."""
    t = three_commits(tmp_path)
    assert changes(t, "1,3", **mode("diff")) == DIFF
    assert changes(t, "1,3", keep_delete=True, **mode("diff")) == srt(
        [*DIFF, ("-D", (2, "b", "-D"))])
    assert changes(t, "2,3", **mode("diff")) == srt([("+U", (4, "d2", "+U")),
                                                   ("+I", (5, "e", "+I"))])


def test_diff_across_a_full_compaction(tmp_path) -> None:
    """No file shared: the two merged states compared key by key; key 3 unchanged is not
    shown, key 2 gone is a -D of its start row only with force_keep_delete."""
    t = three_commits(tmp_path)
    (s4,) = t.compact(full=True).snapshot_ids
    assert changes(t, f"1,{s4}", **mode("diff")) == DIFF
    assert changes(t, f"1,{s4}", keep_delete=True, **mode("diff")) == srt(
        [*DIFF, ("-D", (2, "b", "+I"))])
    assert changes(t, f"3,{s4}", **mode("diff")) == []


def test_diff_merges_only_the_files_that_differ(tmp_path) -> None:
    """Paimon's diff leaves the files both snapshots hold out of both sides: an aggregation
    key updated on top of a compacted file shows the new record alone (3), not the merged sum
    (8); a re-upsert of an unchanged value shows as a change."""
    t = table(tmp_path, schema=AGG, **{"merge-engine": "aggregation",
                                       "fields.n.aggregate-function": "sum"})
    write(t, rows([(1, 5, "x"), (2, 1, "y")], AGG))
    (s2,) = t.compact(full=True).snapshot_ids
    (s3,) = write(t, rows([(1, 3, "x")], AGG))
    assert changes(t, f"{s2},{s3}", **mode("diff")) == [("+I", (1, 3, "x"))]
    assert changes(t, f"0,{s3}") == srt([("+I", (1, 5, "x")), ("+I", (2, 1, "y")),
                                         ("+I", (1, 3, "x"))])
    u = table(tmp_path / "u")
    write(u, rows(C1))
    u.compact(full=True)
    write(u, rows([(1, "a", "+I")]))
    assert changes(u, "2,3", **mode("diff")) == [("+I", (1, "a", "+I"))]


def test_diff_with_projection_and_filter(tmp_path) -> None:
    """Rows are compared whole, then filtered and projected."""
    t = three_commits(tmp_path)
    t.compact(full=True)
    opts = {"incremental-between": "1,4", "incremental-between-scan-mode": "diff"}
    rb = t.copy(opts).new_read_builder().with_projection(["v"])
    rb = rb.with_filter(rb.new_predicate_builder().greater_than("id", 3))
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert got.column_names == ["v", ROW_KIND_COLUMN]
    assert sorted(zip(got["v"].to_pylist(), got[ROW_KIND_COLUMN].to_pylist())) == [
        ("d2", "+U"), ("e", "+I")]


def test_diff_over_partitions_and_buckets(tmp_path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("p", pa.string(), False),
                        ("v", pa.string()), ("op", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id", "p"], partition_keys=["p"],
                   options={"bucket": "2", "rowkind.field": "op"})
    write(t, rows([(i, "x" if i % 2 else "y", f"v{i}", "+I") for i in range(8)], schema))
    write(t, rows([(1, "x", "n1", "+U"), (2, "y", None, "-D"), (8, "x", "v8", "+I")], schema))
    t.compact(full=True)
    assert changes(t, "1,3", keep_delete=True, **mode("diff")) == srt([
        ("+U", (1, "x", "n1", "+U")), ("+I", (8, "x", "v8", "+I")),
        ("-D", (2, "y", "v2", "+I"))])
    assert changes(t, "1,2", **mode("delta")) == srt([
        ("+U", (1, "x", "n1", "+U")), ("-D", (2, "y", None, "-D")), ("+I", (8, "x", "v8", "+I"))])


# ------------------------------------------------------------------ tags

def test_two_tags_read_their_diff_unless_tag_to_snapshot(tmp_path) -> None:
    """The scan mode is not consulted for two tags, unless incremental-between-tag-to-snapshot
    reads the range of their snapshots (then 'diff' is refused)."""
    t = three_commits(tmp_path, "input")
    t.create_tag("t1", 1)
    t.create_tag("t3", 3)
    assert changes(t, "t1,t3") == DIFF
    assert changes(t, "t1,t3", **mode("delta")) == DIFF
    assert changes(t, "t1,t3", keep_delete=True) == srt([*DIFF, ("-D", (2, "b", "-D"))])
    to_snapshot = {"incremental_between_tag_to_snapshot": "true"}
    assert changes(t, "t1,t3", **to_snapshot) == DELTA  # auto: the input changelog
    assert changes(t, "t1,t3", **to_snapshot, **mode("delta")) == DELTA
    with pytest.raises(OptionError, match="incremental-between-scan-mode"):
        changes(t, "t1,t3", **to_snapshot, **mode("diff"))
    assert changes(t, "t1,t1") == []
    with pytest.raises(OptionError, match="older than tag"):
        changes(t, "t3,t1")
    with pytest.raises(OptionError, match="not two snapshot ids"):
        changes(t, "t1,3")


def test_numeric_names_are_tags_first(tmp_path) -> None:
    """As in Paimon, '10,30' names two tags when both exist (not snapshots 10 and 30)."""
    t = three_commits(tmp_path)
    t.create_tag("10", 1)
    t.create_tag("30", 3)
    assert changes(t, "10,30") == DIFF
    assert changes(t, "1,3") == DELTA


def test_a_tag_of_an_expired_snapshot(tmp_path) -> None:
    """A tag keeps its snapshot's files: the diff reads them after the snapshot expired."""
    from datetime import timedelta

    from lakecore.maintenance import ExpireConfig
    t = three_commits(tmp_path)
    t.create_tag("t1", 1)
    t.compact(full=True)
    t.create_tag("t4", 4)
    t.expire_snapshots(dry_run=False, config=ExpireConfig(
        retain_min=1, retain_max=1, time_retained=timedelta(0)))
    assert t.snapshot_manager.earliest_id() == 4
    assert changes(t, "t1,t4") == DIFF
    with pytest.raises(SnapshotNotExistError):
        changes(t, "1,4")


# ------------------------------------------------------------------ the row kind column, errors

def test_every_incremental_read_has_the_row_kind_column(tmp_path) -> None:
    t = three_commits(tmp_path)
    for between, m in [("2,2", "auto"), ("1,3", "changelog"), ("3,3", "diff")]:
        got = incremental(t, between, **mode(m))
        assert got.num_rows == 0 and got.column_names == ["id", "v", "op", ROW_KIND_COLUMN]
    empty = table(tmp_path / "empty")
    assert incremental(empty, "0,0").column_names == ["id", "v", "op", ROW_KIND_COLUMN]


def test_errors_are_paimons(tmp_path) -> None:
    t = three_commits(tmp_path)
    with pytest.raises(OptionError, match="before the start"):
        changes(t, "3,1")
    with pytest.raises(SnapshotNotExistError, match="outside the snapshots 1..3"):
        changes(t, "0,9")
    with pytest.raises(SnapshotNotExistError):  # a diff needs both snapshots
        changes(t, "0,3", **mode("diff"))
    assert changes(t, "0,3", **mode("delta")) == srt([("+I", r) for r in C1] + DELTA)


def test_a_diff_across_a_bucket_rescale_is_refused(tmp_path) -> None:
    from lakecore import CatalogFactory, SchemaChange
    t = table(tmp_path)
    write(t, rows(C1))
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.alter_table("db.t", [SchemaChange.set_option("bucket", "2")])
    t = catalog.get_table("db.t")
    write(t, rows([(9, "z", "+I")]), overwrite={})
    with pytest.raises(OptionError, match=r"bucket numbers of snapshots 1 and 2 differ \(1, 2\)"):
        changes(t, "1,2", **mode("diff"))
    assert changes(t, "1,2") == []  # an OVERWRITE: no delta


# ------------------------------------------------------------------ table kinds

def test_deletion_vector_tables_skip_level0_in_delta_and_changelog(tmp_path) -> None:
    """A batch scan of a deletion-vector table filters level 0 out, incremental reads too (as
    Paimon's): the APPEND snapshots' files and the input changelog are level 0, so delta and
    changelog reads are empty; a diff reads the compacted levels."""
    t = three_commits(tmp_path, "input", **{"deletion-vectors.enabled": "true"})
    kinds = [s.commit_kind.value for s in t.snapshot_manager.snapshots()]
    assert kinds == ["APPEND", "COMPACT"] * 3
    assert changes(t, "0,6") == []
    assert changes(t, "0,6", **mode("delta")) == []
    # snapshot 2 (C1 compacted) against 6: key 3 unchanged, key 2 gone
    assert changes(t, "2,6", **mode("diff")) == DIFF
    assert changes(t, "2,6", keep_delete=True, **mode("diff")) == srt(
        [*DIFF, ("-D", (2, "b", "+I"))])


def test_append_tables(tmp_path) -> None:
    """Delta: the rows of the APPEND snapshots, +I; diff: the rows of the files the end
    snapshot added (Paimon's raw reader ignores the start side)."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, options={"bucket": "-1"})
    write(t, rows([(1, "a"), (2, "b")], schema))
    write(t, rows([(3, "c")], schema))
    write(t, rows([(4, "d")], schema))
    write(t, rows([(9, "z")], schema), overwrite={})
    assert changes(t, "1,4") == [("+I", (3, "c")), ("+I", (4, "d"))]
    assert changes(t, "1,3", **mode("diff")) == [("+I", (3, "c")), ("+I", (4, "d"))]
    assert changes(t, "3,4", keep_delete=True, **mode("diff")) == [("+I", (9, "z"))]
