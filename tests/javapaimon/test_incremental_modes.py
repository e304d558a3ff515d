"""lakecore's incremental reads against Java Paimon 1.4.2's (the oracle JVM), mode by mode.

Every ``incremental-between-scan-mode`` (auto, delta, changelog, diff; diff with and without
``keep_delete`` — Java's ``forceKeepDelete``, lakecore's ``TableRead.force_keep_delete``) on
every range of a small table with upserts and deletes, for each changelog producer (none,
input, lookup, full-compaction), deletion vectors and first-row (whose batch scans filter
level 0 out), aggregation and partial-update diffs, a partitioned two-bucket table with a
filter and a projection, an append table, a table Java wrote, tag ranges (their diff, and with
``incremental-between-tag-to-snapshot`` their snapshot range) and the errors. Each comparison
is (row kind, row) pairs, sorted; where both refuse, both must refuse. The same reads with
expected rows written out by hand: tests/core/test_incremental_read.py.

One JVM for the module (the ``java_paimon`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema, SchemaChange
from lakecore.errors import LakecoreError
from lakecore.read.split_read import ROW_KIND_COLUMN
from tests.javapaimon.client import JavaPaimon, JavaPaimonError, from_rows, to_rows

Row = tuple[Any, ...]
Change = tuple[str, Row]
MODES = ("auto", "delta", "changelog", "diff")
IV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                ("rk", pa.string())])
# upserts and deletes, each commit one snapshot (plus the compaction a producer makes)
COMMITS = [
    [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")],
    [(1, "a2", "+U"), (2, "b", "-D"), (4, "d", "+I")],
    [(4, "d2", "+U"), (5, "e", "+I"), (3, "c", "+U")],  # 3: the same value again
    [(1, None, "-D"), (2, "b3", "+I"), (5, "e", "-D"), (6, "f", "+I")],
]


class Lake:
    """One lakecore warehouse (database ``db``) and the oracle beside it."""

    def __init__(self, wh: Path, jp: JavaPaimon) -> None:
        self.wh, self.jp = wh, jp
        self.catalog = CatalogFactory.create({"warehouse": str(wh)})
        self.catalog.create_database("db", ignore_if_exists=True)

    def create(self, name: str, schema: pa.Schema, pk: list[str] | None = None,
               part: list[str] | None = None, **options: str) -> None:
        self.catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
            schema, primary_keys=pk, partition_keys=part, options=options))

    def table(self, name: str, options: dict[str, str] | None = None) -> Any:
        t = self.catalog.get_table(f"db.{name}")
        return t.copy(options) if options else t

    def write(self, name: str, rows: Iterable[Row], overwrite: dict[str, Any] | None = None
              ) -> None:
        t = self.table(name)
        wb = t.new_batch_write_builder()
        if overwrite is not None:
            wb.overwrite(overwrite)
        w = wb.new_write()
        try:
            w.write_arrow(arrow(rows, t.new_read_builder().read_type()))
            wb.new_commit().commit(w.prepare_commit())
        finally:
            w.close()

    def latest(self, name: str) -> int:
        return self.table(name).snapshot_manager.latest_id()

    def at(self, name: str) -> dict[str, str]:
        return {"warehouse": str(self.wh), "table": f"db.{name}"}

    # -- the two readers ---------------------------------------------------------------------
    def lakecore(self, name: str, start: int | str, end: int | str, mode: str = "auto",
                 keep_delete: bool = False, options: dict[str, str] | None = None,
                 projection: list[str] | None = None, filter_gt: tuple[str, Any] | None = None,
                 ) -> list[Change]:
        opts = {"incremental-between": f"{start},{end}",
                "incremental-between-scan-mode": mode, **(options or {})}
        rb = self.table(name, opts).new_read_builder()
        if projection is not None:
            rb = rb.with_projection(projection)
        if filter_gt is not None:
            rb = rb.with_filter(rb.new_predicate_builder().greater_than(*filter_gt))
        read = rb.new_read()
        if keep_delete:
            read.force_keep_delete()
        got = read.to_arrow(rb.new_scan().plan().splits())
        kinds = got.column(ROW_KIND_COLUMN).to_pylist()
        data = got.drop_columns([ROW_KIND_COLUMN])
        return changes(zip(kinds, (tuple(r.values()) for r in data.to_pylist()), strict=True))

    def java(self, name: str, start: int | str, end: int | str, mode: str = "auto",
             keep_delete: bool = False, options: dict[str, str] | None = None,
             projection: list[str] | None = None, filter_gt: tuple[str, Any] | None = None,
             ) -> list[Change]:
        kw: dict[str, Any] = {"keep_delete": keep_delete, "options": options or {}}
        if projection is not None:
            kw["projection"] = projection
        if filter_gt is not None:
            kw["filter"] = {"greater_than": list(filter_gt)}
        answer = self.jp.call("read_incremental", **self.at(name), start=start, end=end,
                              mode=mode, **kw)
        schema = self.table(name).new_read_builder().with_projection(projection).read_type()
        data = from_rows(answer, schema)
        return changes(zip(answer["row_kinds"], (tuple(r.values()) for r in data.to_pylist()),
                           strict=True))

    def same(self, name: str, start: int | str, end: int | str, mode: str = "auto",
             **kw: Any) -> list[Change]:
        """lakecore's read == Java's read (or both refuse: then None)."""
        try:
            java = self.java(name, start, end, mode, **kw)
        except JavaPaimonError as e:
            with pytest.raises(LakecoreError):
                self.lakecore(name, start, end, mode, **kw)
            return [("error", (e.message[:80],))]
        ours = self.lakecore(name, start, end, mode, **kw)
        assert ours == java, (name, start, end, mode, kw)
        return ours


def arrow(rows: Iterable[Row], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows],
                                schema=schema)


def changes(pairs: Iterable[tuple[str, Row]]) -> list[Change]:
    return sorted(pairs, key=repr)


def every_range(lake: Lake, name: str, modes: Iterable[str] = MODES,
                some: bool = False) -> dict[Any, Any]:
    """Every mode on every range (start, end] of the table's snapshots (``some``: the ranges
    from 0, 1, the middle and the one before the latest to the next, the middle and the
    latest), diff also with keep_delete, lakecore against Java; returns what was read."""
    latest = lake.latest(name)
    ranges = [(s, e) for s in range(0, latest) for e in range(s + 1, latest + 1)]
    if some:
        mid = latest // 2
        ranges = [(s, e) for s, e in ranges
                  if s in (0, 1, mid, latest - 1) and e in (s + 1, mid + 1, latest)]
    seen = {}
    for start, end in ranges:
        for mode in modes:
            seen[(start, end, mode)] = lake.same(name, start, end, mode)
            if mode == "diff":
                seen[(start, end, "diff+")] = lake.same(name, start, end, mode,
                                                        keep_delete=True)
    return seen


@pytest.fixture
def lake(java_paimon: JavaPaimon, tmp_path: Path) -> Lake:
    return Lake(tmp_path / "wh", java_paimon)


def history(lake: Lake, name: str, producer: str, **options: str) -> None:
    lake.create(name, IV, pk=["id"], bucket="1", **{"rowkind.field": "rk",
                                                    "changelog-producer": producer, **options})
    for c in COMMITS:
        lake.write(name, c)
        if producer == "full-compaction":
            lake.table(name).compact(full=True)


# ------------------------------------------------------------------ the mode x producer matrix

@pytest.mark.parametrize("producer", ["none", "input", "lookup", "full-compaction"])
def test_every_mode_on_every_range(lake: Lake, producer: str) -> None:
    """Each changelog producer, every mode and range: lakecore reads what Java reads. Spot
    checks of what that is: auto is delta without a producer, changelog with one; a diff shows
    no -D without keep_delete."""
    history(lake, "t", producer)
    seen = every_range(lake, "t")
    latest = lake.latest("t")
    for (start, end, mode), got in seen.items():
        if mode == "auto":
            resolved = "delta" if producer == "none" else "changelog"
            assert got == seen[(start, end, resolved)], (start, end)
        if mode == "diff" and got and got[0][0] != "error":
            assert all(kind in ("+I", "+U") for kind, _ in got), (start, end, got)
    if producer == "none":
        assert seen[(1, 2, "delta")] == changes([("+U", (1, "a2", "+U")),
                                                 ("-D", (2, "b", "-D")), ("+I", (4, "d", "+I"))])
        assert all(not seen[(s, e, "changelog")] for s in range(latest) for e in
                   range(s + 1, latest + 1))
    # the whole history ends in: 2 b3, 3 c, 4 d2, 6 f
    assert [r for k, r in seen[(0, latest, "changelog" if producer != "none" else "delta")]
            if k == "+I" and r[0] == 6] == [(6, "f", "+I")]


@pytest.mark.parametrize("producer", ["none", "input", "lookup"])
def test_deletion_vector_tables(lake: Lake, producer: str) -> None:
    """Deletion vectors: batch scans filter level 0 out, incremental reads too, in Java as in
    lakecore (delta and input changelog are all level 0: empty; lookup changelog is written
    at the compaction's output level)."""
    history(lake, "dv", producer, **{"deletion-vectors.enabled": "true"})
    seen = every_range(lake, "dv", some=True)
    latest = lake.latest("dv")
    assert seen[(0, latest, "delta")] == []
    assert (seen[(0, latest, "changelog")] == []) == (producer != "lookup")


def test_first_row_skips_level0(lake: Lake) -> None:
    lake.create("fr", IV, pk=["id"], bucket="1", **{"rowkind.field": "rk",
                                                    "merge-engine": "first-row"})
    for c in ([(1, "a", "+I"), (2, "b", "+I")], [(1, "x", "+I"), (3, "c", "+I")]):
        lake.write("fr", c)
    every_range(lake, "fr")
    assert lake.lakecore("fr", 0, lake.latest("fr"), "delta") == []


# ------------------------------------------------------------------ merge engines in a diff

@pytest.mark.parametrize("engine", ["aggregation", "partial-update"])
def test_diff_of_merge_engines(lake: Lake, engine: str) -> None:
    """A diff merges only the files the two snapshots do not share: an update on top of a
    compacted file shows alone (aggregation: the new record's 3, not the sum 8; partial-update:
    the new record's null, not the old value), in Java as in lakecore."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int64()),
                        ("s", pa.string())])
    opts = {"merge-engine": engine}
    if engine == "aggregation":
        opts |= {"fields.n.aggregate-function": "sum", "fields.s.aggregate-function":
                 "last_non_null_value"}
    lake.create("m", schema, pk=["id"], bucket="1", **opts)
    lake.write("m", [(1, 5, "x"), (2, 1, "y")])
    lake.table("m").compact(full=True)
    lake.write("m", [(1, 3, None), (3, 7, "z")])
    lake.write("m", [(2, None, "y2")])
    seen = every_range(lake, "m")
    latest = lake.latest("m")
    assert seen[(2, latest, "diff")] == changes([("+I", (1, 3, None)), ("+I", (2, None, "y2")),
                                                 ("+I", (3, 7, "z"))])


# ------------------------------------------------------------------ shapes

def test_partitions_buckets_filter_and_projection(lake: Lake) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        pa.field("p", pa.string(), nullable=False), ("v", pa.string()),
                        ("rk", pa.string())])
    lake.create("pb", schema, pk=["id", "p"], part=["p"], bucket="2", **{"rowkind.field": "rk"})
    lake.write("pb", [(i, "x" if i % 2 else "y", f"v{i}", "+I") for i in range(10)])
    lake.write("pb", [(1, "x", "u1", "+U"), (2, "y", None, "-D"), (10, "x", "n", "+I")])
    lake.table("pb").compact(full=True)
    lake.write("pb", [(3, "x", "u3", "+U"), (4, "y", None, "-D")])
    every_range(lake, "pb")
    for mode in MODES:
        for kw in ({"projection": ["v", "id"]}, {"filter_gt": ("id", 2)},
                   {"filter_gt": ("v", "u"), "keep_delete": True}):
            lake.same("pb", 1, lake.latest("pb"), mode, **kw)


def test_append_table(lake: Lake) -> None:
    """An append table: delta rows +I; a diff reads the end snapshot's new files only."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    lake.create("ap", schema, bucket="-1")
    lake.write("ap", [(1, "a"), (2, "b")])
    lake.write("ap", [(3, "c")])
    lake.write("ap", [(4, "d")], overwrite={})
    lake.write("ap", [(5, "e")])
    seen = every_range(lake, "ap")
    assert seen[(1, 4, "diff")] == changes([("+I", (4, "d")), ("+I", (5, "e"))])


def test_a_table_java_wrote(lake: Lake) -> None:
    """Java's stream writer (lookup changelog, compaction waited for) makes the history;
    lakecore reads every mode and range as Java does."""
    jp = lake.jp
    jp.call("create", **lake.at("j"), fields=[{"name": "id", "type": "BIGINT NOT NULL"},
                                              {"name": "v", "type": "STRING"}],
            primary_keys=["id"], options={"bucket": "1", "changelog-producer": "lookup"})
    w = {**lake.at("j"), "stream": True, "commit_user": "job"}
    for rows, kinds in [([[1, "a"], [2, "b"], [3, "c"]], None),
                        ([[1, "a2"], [2, "b"], [4, "d"]], ["+U", "-D", "+I"]),
                        ([[3, "c3"], [5, "e"]], None)]:
        jp.call("write", **w, rows=rows, row_kinds=kinds)
    jp.call("close", **lake.at("j"))
    every_range(lake, "j", some=True)


# ------------------------------------------------------------------ tags

def tagged(lake: Lake, producer: str = "input") -> None:
    history(lake, "tg", producer)
    t = lake.table("tg")
    sm = t.snapshot_manager
    t.create_tag("t1", 1)
    t.create_tag("t3", 3)
    t.create_tag("tl", sm.latest_id())
    t.create_tag("10", 1)  # numeric names: tags are looked up first
    t.create_tag("30", 3)


@pytest.mark.parametrize("producer", ["none", "input", "lookup"])
def test_tag_ranges(lake: Lake, producer: str) -> None:
    """Two tags: the diff of their snapshots whatever the scan mode, or with
    incremental-between-tag-to-snapshot the range of their snapshots by the scan mode (Java
    refuses 'diff' then); tags in the wrong order, one tag and one number, the same tag."""
    tagged(lake, producer)
    for start, end in [("t1", "t3"), ("t1", "tl"), ("t3", "tl"), ("10", "30"), ("t3", "t1"),
                       ("t1", "t1"), ("t1", "3"), ("t1", "nope")]:
        diffs = [lake.same("tg", start, end, mode) for mode in MODES]
        assert all(d == diffs[0] for d in diffs), (start, end)
        lake.same("tg", start, end, keep_delete=True)
        for mode in MODES:
            lake.same("tg", start, end, mode,
                      options={"incremental-between-tag-to-snapshot": "true"})
    assert lake.same("tg", "10", "30") == lake.same("tg", "t1", "t3")


# ------------------------------------------------------------------ errors

def test_errors(lake: Lake) -> None:
    """Both refuse: an end before the start, a range outside the snapshots, a diff from
    snapshot 0; an empty range reads nothing in both."""
    history(lake, "e", "none")
    for start, end in [(3, 1), (0, 9), (7, 9), (2, 2)]:
        for mode in MODES:
            lake.same("e", start, end, mode)
    assert lake.same("e", 0, 2, "diff")[0][0] == "error"
    assert lake.same("e", 2, 2) == []
    # a diff across a change of the bucket count (lakecore rescales, then overwrites)
    lake.catalog.alter_table("db.e", [SchemaChange.set_option("bucket", "2")])
    lake.write("e", [(9, "z", "+I")], overwrite={})
    latest = lake.latest("e")
    assert lake.same("e", 1, latest, "diff")[0][0] == "error"
    assert lake.same("e", latest - 1, latest, "delta") == []


def test_java_sees_lakecore_overwrite_like_lakecore(lake: Lake) -> None:
    """An OVERWRITE inside the range (input changelog): a batch changelog read leaves it out,
    a diff shows what it replaced (with keep_delete: the replaced rows as -D)."""
    lake.create("ow", IV, pk=["id"], bucket="1", **{"rowkind.field": "rk",
                                                    "changelog-producer": "input"})
    lake.write("ow", COMMITS[0])
    lake.write("ow", [(7, "x", "+I")], overwrite={})
    lake.write("ow", [(8, "y", "+I")])
    seen = every_range(lake, "ow")
    assert seen[(1, 3, "changelog")] == [("+I", (8, "y", "+I"))]
    assert seen[(1, 3, "diff+")] == changes([
        ("+I", (7, "x", "+I")), ("+I", (8, "y", "+I")), ("-D", (1, "a", "+I")),
        ("-D", (2, "b", "+I")), ("-D", (3, "c", "+I"))])


def test_java_writes_what_lakecore_reads_in_delta(lake: Lake) -> None:
    """Java commits into a lakecore table without a producer: both read its delta with Java's
    row kinds."""
    history(lake, "jw", "none")
    before = lake.latest("jw")
    rows = arrow([(2, "j", "+U"), (3, None, "-D"), (9, "z", "+I")], IV)
    lake.jp.call("write", **lake.at("jw"), rows=to_rows(rows))
    got = lake.same("jw", before, lake.latest("jw"))
    assert got == changes([("+U", (2, "j", "+U")), ("-D", (3, None, "-D")),
                           ("+I", (9, "z", "+I"))])
