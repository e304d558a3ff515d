"""Java Paimon (1.4.2, the oracle JVM) reads the tables lakecore writes, as lakecore reads them.

Every test creates and writes its table with lakecore (several commits: inserts, upserts and
deletes through ``rowkind.field``), then compares three things: lakecore's own read, Java
Paimon's read of the same snapshot through ``tests/javapaimon`` and, where it is cheap, the rows
written out by hand. Then Java commits once more to the same table and lakecore reads Java's
commit: one history, two writers.

Covered: every merge engine (before and after lakecore's full compaction), every bucket mode
(fixed, dynamic, postpone, append with and without buckets), deletion vectors, every changelog
producer (Java's incremental read against lakecore's), partitions, schema evolution, tags, time
travel, expiry and orphan removal, and nested and wide types. Where Java and lakecore differ the
test stays, marked ``xfail(strict=True)`` with the exact difference.

One JVM for the module (the ``java_paimon`` fixture); tables are a few rows each.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema, SchemaChange
from lakecore.errors import MergeError
from lakecore.maintenance import ExpireConfig
from tests.javapaimon.client import JavaPaimon, JavaPaimonError, from_rows, to_rows

Row = tuple[Any, ...]

# id, v, n and the row kind column (rowkind.field): the primary-key tables' schema
KV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                ("n", pa.int64()), ("rk", pa.string())])
# id, v and the row kind column: the changelog tables' schema
IV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                ("rk", pa.string())])


# ------------------------------------------------------------------ helpers

class Lake:
    """One lakecore warehouse: create, write, compact and read tables of database ``db``."""

    def __init__(self, wh: Path) -> None:
        self.wh = wh
        self.catalog = CatalogFactory.create({"warehouse": str(wh)})
        self.catalog.create_database("db", ignore_if_exists=True)

    def create(self, name: str, schema: pa.Schema, *, pk: Sequence[str] | None = ("id",),
               part: Sequence[str] | None = None, **options: str) -> None:
        self.catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
            schema, primary_keys=list(pk) if pk else None,
            partition_keys=list(part) if part else None, options=options))

    def table(self, name: str, options: dict[str, str] | None = None) -> Any:
        """A fresh handle (the latest schema), with dynamic options if given."""
        t = self.catalog.get_table(f"db.{name}")
        return t.copy(options) if options else t

    def write(self, name: str, rows: Iterable[Row], overwrite: dict[str, Any] | None = None
              ) -> tuple[int, ...]:
        """One batch commit of positional ``rows`` (the table's current columns)."""
        t = self.table(name)
        wb = t.new_batch_write_builder()
        if overwrite is not None:
            wb.overwrite(overwrite)
        w = wb.new_write()
        try:
            w.write_arrow(arrow(rows, t.new_read_builder().read_type()))
            return wb.new_commit().commit(w.prepare_commit()).snapshot_ids
        finally:
            w.close()

    def read(self, name: str, options: dict[str, str] | None = None) -> pa.Table:
        rb = self.table(name, options).new_read_builder()
        return rb.new_read().to_arrow(rb.new_scan().plan().splits())

    def rows(self, name: str, options: dict[str, str] | None = None) -> list[Row]:
        return tuples(self.read(name, options))

    def compact(self, name: str, full: bool = True) -> Any:
        return self.table(name).compact(full=full)

    def at(self, name: str) -> dict[str, str]:
        return {"warehouse": str(self.wh), "table": f"db.{name}"}


def arrow(rows: Iterable[Row], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows],
                                schema=schema)


def tuples(t: pa.Table) -> list[Row]:
    """Rows as tuples in a canonical order (by their repr: columns may hold nulls)."""
    return sorted((tuple(r.values()) for r in t.to_pylist()), key=repr)


def canon(rows: Iterable[Row]) -> list[Row]:
    return sorted((tuple(r) for r in rows), key=repr)


def java_rows(answer: dict[str, Any], schema: pa.Schema) -> list[Row]:
    """A Java ``read`` answer decoded with lakecore's schema, canonical order."""
    return tuples(from_rows(answer, schema))


def java_kinds(answer: dict[str, Any]) -> dict[Any, str]:
    """The row kind Java reports for each row, by the row's first column (the key)."""
    return {r[0]: k for r, k in zip(answer["rows"], answer["row_kinds"], strict=True)}


def same(jp: JavaPaimon, lake: Lake, name: str, expected: Iterable[Row] | None = None,
         **scan: Any) -> dict[str, Any]:
    """lakecore's read == Java's read (== ``expected`` written out by hand, if given), at the
    latest snapshot or at ``snapshot_id=`` / ``tag=``; Java's answer is returned."""
    options = ({"scan.snapshot-id": str(scan["snapshot_id"])} if "snapshot_id" in scan else
               {"scan.tag-name": scan["tag"]} if "tag" in scan else None)
    ours = lake.read(name, options)
    answer = jp.call("read", **lake.at(name), **scan)
    if expected is not None:
        assert tuples(ours) == canon(expected), f"lakecore's read of {name} {scan}"
    assert java_rows(answer, ours.schema) == tuples(ours), f"Java's read of {name} {scan}"
    return answer


def java_write(jp: JavaPaimon, lake: Lake, name: str, rows: Iterable[Row], **kw: Any) -> int:
    """One Java batch commit of ``rows`` (positional, the table's current columns; with
    ``rowkind.field`` the row kind column decides each row's kind, in Java as in lakecore)."""
    schema = lake.table(name).new_read_builder().read_type()
    return jp.call("write", **lake.at(name), rows=to_rows(arrow(rows, schema)), **kw)["snapshot_id"]


def java_files(jp: JavaPaimon, lake: Lake, name: str) -> list[dict[str, Any]]:
    return jp.call("files", **lake.at(name))["files"]


def dedupe(*commits: Iterable[Row]) -> list[Row]:
    """The deduplicate model of a table keyed by its first column, kinds in the last column:
    the last record wins, a -D / -U removes the key."""
    state: dict[Any, Row] = {}
    for commit in commits:
        for r in commit:
            if r[-1] in ("-D", "-U"):
                state.pop(r[0], None)
            else:
                state[r[0]] = tuple(r)
    return list(state.values())


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "wh")


# ------------------------------------------------------------------ 1. merge engines

# (id, v, n, rk): two commits every engine takes, and a third with a delete
C1 = [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I")]
C2 = [(1, None, 10, "+U"), (2, "b2", None, "+I"), (5, "e", 5, "+I")]
C3 = [(3, None, None, "-D"), (4, "d", None, "+U")]

ENGINES = {
    # name: (options, commits, expected rows, Java's row kinds (by id) before compaction,
    #        Java's commit, expected rows after it)
    "deduplicate": (
        {}, [C1, C2, C3],
        [(1, None, 10, "+U"), (2, "b2", None, "+I"), (4, "d", None, "+U"), (5, "e", 5, "+I")],
        {1: "+U", 2: "+I", 4: "+U", 5: "+I"},
        [(2, None, 20, "+U"), (6, "j", 6, "+I")],
        [(1, None, 10, "+U"), (2, None, 20, "+U"), (4, "d", None, "+U"), (5, "e", 5, "+I"),
         (6, "j", 6, "+I")],
    ),
    "deduplicate-sequence-field": (
        # sequence.field=n: the record with the larger n wins, whatever its commit
        {"sequence.field": "n"},
        [C1, [(1, "late", 0, "+U"), (2, "b2", 7, "+U")], [(3, None, 9, "-D"), (5, "e", 5, "+I")]],
        [(1, "a", 1, "+I"), (2, "b2", 7, "+U"), (4, None, 4, "+I"), (5, "e", 5, "+I")],
        {1: "+I", 2: "+U", 4: "+I", 5: "+I"},
        [(2, "old", 6, "+U"), (4, "new", 40, "+U")],
        [(1, "a", 1, "+I"), (2, "b2", 7, "+U"), (4, "new", 40, "+U"), (5, "e", 5, "+I")],
    ),
    "partial-update": (
        {"merge-engine": "partial-update"}, [C1, C2],
        [(1, "a", 10, "+U"), (2, "b2", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 3: "+I", 4: "+I", 5: "+I"},
        [(2, None, 20, "+U"), (4, "j", None, "+U")],
        [(1, "a", 10, "+U"), (2, "b2", 20, "+U"), (3, "c", 3, "+I"), (4, "j", 4, "+U"),
         (5, "e", 5, "+I")],
    ),
    "partial-update-remove-record-on-delete": (
        {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
        [C1, C2, C3],
        [(1, "a", 10, "+U"), (2, "b2", 2, "+I"), (4, "d", 4, "+U"), (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 4: "+I", 5: "+I"},
        [(2, None, None, "-D"), (3, "back", None, "+I")],
        [(1, "a", 10, "+U"), (3, "back", None, "+I"), (4, "d", 4, "+U"), (5, "e", 5, "+I")],
    ),
    "partial-update-ignore-delete": (
        {"merge-engine": "partial-update", "ignore-delete": "true"}, [C1, C2, C3],
        [(1, "a", 10, "+U"), (2, "b2", 2, "+I"), (3, "c", 3, "+I"), (4, "d", 4, "+U"),
         (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 3: "+I", 4: "+I", 5: "+I"},
        [(2, None, None, "-D"), (5, None, 50, "+U")],
        [(1, "a", 10, "+U"), (2, "b2", 2, "+I"), (3, "c", 3, "+I"), (4, "d", 4, "+U"),
         (5, "e", 50, "+U")],
    ),
    "aggregation": (
        # n: sum, v: listagg (delimiter '/'); a -U retracts from the sum, listagg ignores it
        {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
         "fields.v.aggregate-function": "listagg", "fields.v.list-agg-delimiter": "/",
         "fields.v.ignore-retract": "true"},
        [C1, C2, [(1, "x", 4, "-U"), (2, None, 5, "+I")]],
        # rk is last_non_null_value: a -U's non-null rk retracts it to null
        [(1, "a", 7, None), (2, "b/b2", 7, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 3: "+I", 4: "+I", 5: "+I"},
        [(1, "j", 100, "+I"), (6, "k", 6, "+I")],
        [(1, "a/j", 107, "+I"), (2, "b/b2", 7, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I"), (6, "k", 6, "+I")],
    ),
    "first-row": (
        # lakecore's writer lifts each commit's level-0 file by lookup compaction
        {"merge-engine": "first-row"}, [C1, C2],
        [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 3: "+I", 4: "+I", 5: "+I"},
        [(1, "j", 100, "+U"), (6, "k", 6, "+I")],
        [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I"), (6, "k", 6, "+I")],
    ),
    "first-row-ignore-delete": (
        # C2 and C3 in one commit: its level-0 file is merged with C1's (see
        # test_first_row_lookup_compaction_drops_keys_of_higher_levels for a file lifted alone)
        {"merge-engine": "first-row", "ignore-delete": "true"}, [C1, C2 + C3],
        [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I")],
        {1: "+I", 2: "+I", 3: "+I", 4: "+I", 5: "+I"},
        [(3, None, None, "-D"), (6, "k", 6, "+I")],
        [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
         (5, "e", 5, "+I"), (6, "k", 6, "+I")],
    ),
}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_merge_engine_before_and_after_full_compaction(java_paimon: JavaPaimon, lake: Lake,
                                                       engine: str) -> None:
    """Each merge engine: Java's merged read (rows and the row kind of the record that won) is
    lakecore's before compaction; after lakecore's full compaction both read the same rows,
    Java's raw (single-file) reads reporting +I; then Java commits and lakecore reads it."""
    options, commits, expected, kinds, java_commit, after_java = ENGINES[engine]
    jp = java_paimon
    lake.create("t", KV, bucket="1", **{"rowkind.field": "rk"}, **options)
    for c in commits:
        lake.write("t", c)
    assert java_kinds(same(jp, lake, "t", expected)) == kinds

    lake.compact("t", full=True)
    assert {f["level"] for f in java_files(jp, lake, "t")} == {5}
    answer = same(jp, lake, "t", expected)
    assert set(answer["row_kinds"]) == {"+I"}

    java_write(jp, lake, "t", java_commit)
    same(jp, lake, "t", after_java)


# id, sum, sum (decimal), product, min, max (string), max (date), min (timestamp),
# first_value, first_non_null_value, last_value, last_non_null_value (default), bool_and,
# bool_or, listagg
AGG = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("sm", pa.int64()), ("dsum", pa.decimal128(10, 2)),
    ("pr", pa.float64()), ("mn", pa.int32()), ("mx", pa.string()), ("mxd", pa.date32()),
    ("mnt", pa.timestamp("us")), ("fv", pa.string()), ("fnn", pa.string()), ("lv", pa.string()),
    ("lnn", pa.string()), ("band", pa.bool_()), ("bor", pa.bool_()), ("la", pa.string()),
    ("rk", pa.string()),
])
AGG_FUNCTIONS = {"sm": "sum", "dsum": "sum", "pr": "product", "mn": "min", "mx": "max",
                 "mxd": "max", "mnt": "min", "fv": "first_value", "fnn": "first_non_null_value",
                 "lv": "last_value", "band": "bool_and", "bor": "bool_or", "la": "listagg"}
NOT_RETRACTABLE = ["mn", "mx", "mxd", "mnt", "fv", "fnn", "band", "bor", "la"]


def agg_row(i: int, g: int, rk: str = "+I", **changes: Any) -> Row:
    row = {"id": i, "sm": g, "dsum": decimal.Decimal(f"{g}.25"), "pr": float(g + 1),
           "mn": 10 - g, "mx": f"s{g}", "mxd": dt.date(2024, 1, 1 + g),
           "mnt": dt.datetime(2024, 1, 1, g), "fv": f"f{g}", "fnn": None if g == 0 else f"n{g}",
           "lv": None if g == 2 else f"l{g}", "lnn": None if g == 2 else f"ln{g}",
           "band": g != 1, "bor": g == 1, "la": f"x{g}", "rk": rk, **changes}
    return tuple(row.values())


D = decimal.Decimal
AGG_CASES = {
    # name: (extra options, commits, expected rows)
    "every-function": (
        {},
        [[agg_row(1, g), agg_row(2, g, mn=None, la=None)] + ([agg_row(3, g)] if g == 1 else [])
         for g in range(3)],
        [(1, 3, D("3.75"), 6.0, 8, "s2", dt.date(2024, 1, 3), dt.datetime(2024, 1, 1, 0),
          "f0", "n1", None, "ln1", False, True, "x0|x1|x2", "+I"),
         (2, 3, D("3.75"), 6.0, None, "s2", dt.date(2024, 1, 3), dt.datetime(2024, 1, 1, 0),
          "f0", "n1", None, "ln1", False, True, None, "+I"),
         (3, 1, D("1.25"), 2.0, 9, "s1", dt.date(2024, 1, 2), dt.datetime(2024, 1, 1, 1),
          "f1", "n1", "l1", "ln1", False, True, "x1", "+I")],
    ),
    "retractions": (
        # sum, product, last_value and last_non_null_value retract; the others ignore it
        {f"fields.{c}.ignore-retract": "true" for c in NOT_RETRACTABLE},
        [[agg_row(1, 0), agg_row(1, 1), agg_row(2, 2)],
         [agg_row(1, 1, "-U"), agg_row(2, 2, "-D"), agg_row(1, 2, "+U")]],
        [(1, 2, D("2.50"), 6.0, 8, "s2", dt.date(2024, 1, 3), dt.datetime(2024, 1, 1, 0),
          "f0", "n1", None, "ln1", False, True, "x0|x1|x2", "+U"),
         (2, 0, D("0.00"), 1.0, 8, "s2", dt.date(2024, 1, 3), dt.datetime(2024, 1, 1, 2),
          "f2", "n2", None, None, True, False, "x2", None)],
    ),
    "remove-record-on-delete": (
        # the -D is key 2's last record: the key is gone (a record after a -D: see
        # test_remove_record_on_delete_then_insert_starts_from_the_delete_record)
        {"aggregation.remove-record-on-delete": "true"},
        [[agg_row(1, 0), agg_row(2, 0), agg_row(3, 0)], [agg_row(1, 1), agg_row(2, 1, "-D")]],
        [(1, 1, D("1.50"), 2.0, 9, "s1", dt.date(2024, 1, 2), dt.datetime(2024, 1, 1, 0),
          "f0", "n1", "l1", "ln1", False, True, "x0|x1", "+I"),
         (3, 0, D("0.25"), 1.0, 10, "s0", dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 0),
          "f0", None, "l0", "ln0", True, False, "x0", "+I")],
    ),
}


@pytest.mark.parametrize("case", list(AGG_CASES))
def test_aggregation_functions(java_paimon: JavaPaimon, lake: Lake, case: str) -> None:
    """Every aggregate function lakecore implements, over several commits (nulls, retractions,
    aggregation.remove-record-on-delete): Java's merge is lakecore's, before and after a full
    compaction; then Java aggregates one more commit onto lakecore's files."""
    extra, commits, expected = AGG_CASES[case]
    jp = java_paimon
    lake.create("agg", AGG, bucket="1", **{
        "rowkind.field": "rk", "merge-engine": "aggregation", "fields.la.list-agg-delimiter": "|",
        **{f"fields.{c}.aggregate-function": f for c, f in AGG_FUNCTIONS.items()}, **extra})
    for c in commits:
        lake.write("agg", c)
    assert set(same(jp, lake, "agg", expected)["row_kinds"]) == {"+I"}
    lake.compact("agg", full=True)
    same(jp, lake, "agg", expected)
    java_write(jp, lake, "agg", [agg_row(1, 5)])
    after = {r[0]: r for r in lake.rows("agg")}
    same(jp, lake, "agg")
    assert after[1][1] == expected[0][1] + 5 and after[1][-2].endswith("|x5")


def test_partial_update_refuses_deletes_like_java(java_paimon: JavaPaimon, lake: Lake) -> None:
    """partial-update without ignore-delete / remove-record-on-delete: lakecore commits the -D
    to level 0, then lakecore's read and Java's read both refuse to merge it."""
    jp = java_paimon
    lake.create("pu", KV, bucket="1", **{"rowkind.field": "rk", "merge-engine": "partial-update"})
    lake.write("pu", C1)
    lake.write("pu", [(1, None, None, "-D")])
    with pytest.raises(MergeError, match="partial-update can not accept delete records"):
        lake.read("pu")
    with pytest.raises(JavaPaimonError, match="Partial update can not accept delete records"):
        jp.call("read", **lake.at("pu"))


def test_first_row_refuses_a_delete_on_write_like_java(java_paimon: JavaPaimon,
                                                       lake: Lake) -> None:
    """first-row without ignore-delete: a -D fails Java's write (FirstRowMergeFunction.add in
    its lookup compaction) and lakecore's (its compaction on write refuses the level-0 -D);
    neither commits, and both read C1."""
    jp = java_paimon
    lake.create("fr", KV, bucket="1", **{"rowkind.field": "rk", "merge-engine": "first-row"})
    lake.write("fr", C1)
    with pytest.raises(JavaPaimonError, match="First row merge engine can not accept DELETE"):
        java_write(jp, lake, "fr", [(1, None, None, "-D")])
    with pytest.raises(MergeError, match="first-row merge engine can not accept DELETE"):
        lake.write("fr", [(1, None, None, "-D")])
    same(jp, lake, "fr", C1)


@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_remove_record_on_delete_then_insert_starts_from_the_delete_record(
        java_paimon: JavaPaimon, lake: Lake, engine: str) -> None:
    """After a -D, Paimon's PartialUpdateMergeFunction / AggregateMergeFunction set the row to
    the -D record's values (initRow) and keep merging onto them: key 1 reads (1,'gone',5) /
    (1,'gone',105), in Java's read and lakecore's, before and after lakecore's compaction."""
    jp = java_paimon
    lake.create("rm", KV, bucket="1", **{
        "rowkind.field": "rk", "merge-engine": engine, f"{engine}.remove-record-on-delete": "true",
        **({"fields.n.aggregate-function": "sum"} if engine == "aggregation" else {})})
    for c in ([(1, "a", 1, "+I"), (2, "b", 2, "+I")], [(1, "gone", 100, "-D")],
              [(1, None, 5, "+I")]):
        lake.write("rm", c)
    java = {"partial-update": (1, "gone", 5, "+I"), "aggregation": (1, "gone", 105, "+I")}
    answer = jp.call("read", **lake.at("rm"))
    assert java_rows(answer, KV) == canon([java[engine], (2, "b", 2, "+I")])
    assert lake.rows("rm") == java_rows(answer, KV)
    lake.compact("rm", full=True)
    same(jp, lake, "rm", [java[engine], (2, "b", 2, "+I")])


# partial-update, remove-record-on-delete: one record per key and commit (each commit its own
# level-0 file, so the read merges them record by record)
PU_RESETS = [
    [(1, "a", 1, "+I"), (3, "a", 1, "+I"), (5, "a", 1, "+I")],
    [(1, "gone", 100, "-D"), (2, "u", 7, "-U"), (3, "x", 9, "-D"), (4, "p", 1, "-U"),
     (5, None, 2, "+U")],
    [(1, None, 5, "+I"), (2, None, 8, "+I"), (3, "y", 3, "-U"), (4, "q", 2, "-U"),
     (5, "z", 3, "-D")],
]
# id, first_value, first_non_null_value, listagg, sum, row kind
AGG_RESET = pa.schema([pa.field("id", pa.int64(), nullable=False), ("fv", pa.string()),
                       ("fnn", pa.string()), ("la", pa.string()), ("s", pa.int64()),
                       ("rk", pa.string())])
AGG_RESETS = [
    [(1, "a", "a", "x", 1, "+I"), (3, None, None, "", None, "+I"), (4, "", "", "", 1, "+I"),
     (5, "a", None, "a", 1, "+I")],
    [(1, "d", None, "dx", 10, "-D"), (2, "d", None, "", 10, "-D"), (3, "d", "d", "q", 1, "-D"),
     (4, None, None, None, None, "+I"), (5, "", "", "", 2, "+I")],
    [(1, "b", "b", "y", 2, "+I"), (2, "b", "b", "y", 2, "+I"), (3, "e", "e", "", 3, "+I"),
     (4, "", "", "", 3, "+I"), (5, "b", "b", "b", 3, "+I")],
]


@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_remove_record_on_delete_record_by_record(java_paimon: JavaPaimon, lake: Lake,
                                                  engine: str) -> None:
    """Paimon's merge functions record by record, checked on Java's read of lakecore's table
    and on Java's read after lakecore's full compaction.

    partial-update (PartialUpdateMergeFunction.add): a retraction that comes first sets the
    row to its values (key 2: (2,'u',8)); a -D then a -U leave the -D's values as +I (the -U
    resets currentDeleteRow and meetInsert is never reset: key 3 (3,'x',9,'-D')); only
    retractions give a -D (key 4, gone); a last -D removes the row (key 5).

    aggregation (AggregateMergeFunction.add) with first_value, first_non_null_value, listagg
    and sum: the records after a -D fold onto its values; FieldFirstValueAgg /
    FieldFirstNonNullValueAgg keep their ``initialized`` flag across the -D, so key 1 keeps the
    -D's 'd' and null, key 2 (-D first) takes 'b' and 'b', key 3 ('initialized' by a null
    first_value input, not by a null first_non_null_value one) 'd' and 'e'. FieldListaggAgg
    skips empty strings ('dx,y', 'y', 'q', key 4 only empty strings: '', key 5 'a,b')."""
    jp = java_paimon
    if engine == "partial-update":
        schema, commits = KV, PU_RESETS
        expected = [(1, "gone", 5, "+I"), (2, "u", 8, "+I"), (3, "x", 9, "-D")]
    else:
        schema, commits = AGG_RESET, AGG_RESETS
        expected = [(1, "d", None, "dx,y", 12, "+I"), (2, "b", "b", "y", 12, "+I"),
                    (3, "d", "e", "q", 4, "+I"), (4, "", "", "", 4, "+I"),
                    (5, "a", "", "a,b", 6, "+I")]
    lake.create("rm", schema, bucket="1", **{
        "rowkind.field": "rk", "merge-engine": engine, f"{engine}.remove-record-on-delete": "true",
        **({"fields.fv.aggregate-function": "first_value",
            "fields.fnn.aggregate-function": "first_non_null_value",
            "fields.la.aggregate-function": "listagg", "fields.s.aggregate-function": "sum"}
           if engine == "aggregation" else {})})
    for c in commits:
        lake.write("rm", c)
    assert len(java_files(jp, lake, "rm")) == 3
    same(jp, lake, "rm", expected)
    lake.compact("rm", full=True)
    same(jp, lake, "rm", expected)


def test_first_row_lookup_compaction_drops_keys_of_higher_levels(java_paimon: JavaPaimon,
                                                                 lake: Lake) -> None:
    """lakecore's compaction on write lifts the last commit's level-0 file to level 4 and drops
    key 4, which level 5 holds (FirstRowMergeFunctionWrapper): Java's raw read of the files
    shows each key once."""
    jp = java_paimon
    lake.create("fr", KV, bucket="1", **{"rowkind.field": "rk", "merge-engine": "first-row"})
    for c in (C1, C2, [(4, "d", None, "+U")]):
        lake.write("fr", c)
    first = [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
             (5, "e", 5, "+I")]
    assert lake.rows("fr") == canon(first)
    assert 0 not in {f["level"] for f in java_files(jp, lake, "fr")}
    same(jp, lake, "fr", first)


def test_first_row_write_only_level0_is_invisible_until_compaction(java_paimon: JavaPaimon,
                                                                    lake: Lake) -> None:
    """first-row + write-only: commits stay on level 0, which Paimon's batch scan of a first-row
    table skips (batchScanSkipLevel0) — Java shows nothing, and neither does lakecore. After
    lakecore's full compaction both show the first row of each key; Java's own write-only
    commit is then invisible to both until lakecore compacts it."""
    jp = java_paimon
    lake.create("fr", KV, bucket="1", **{"rowkind.field": "rk", "merge-engine": "first-row",
                                         "write-only": "true"})
    lake.write("fr", C1)
    lake.write("fr", C2)
    assert {f["level"] for f in java_files(jp, lake, "fr")} == {0}
    answer = same(jp, lake, "fr", [])
    assert answer["splits"] == 0
    first = [(1, "a", 1, "+I"), (2, "b", 2, "+I"), (3, "c", 3, "+I"), (4, None, 4, "+I"),
             (5, "e", 5, "+I")]
    lake.compact("fr", full=True)
    same(jp, lake, "fr", first)

    java_write(jp, lake, "fr", [(2, "late", 0, "+I"), (7, "g", 7, "+I")])
    assert sorted(f["level"] for f in java_files(jp, lake, "fr")) == [0, 5]
    same(jp, lake, "fr", first)
    lake.compact("fr", full=True)
    same(jp, lake, "fr", [*first, (7, "g", 7, "+I")])


# ------------------------------------------------------------------ 2. bucket modes

BASE = [(i, f"v{i}", i, "+I") for i in range(8)]
UPSERTS = [(1, "u1", 10, "+U"), (2, None, None, "-D"), (9, "v9", 9, "+I")]
JAVA_UPSERTS = [(3, "j3", 30, "+U"), (20, "j20", 20, "+I"), (4, None, None, "-D")]

BUCKET_MODES = {
    "fixed-1": {"bucket": "1"},
    "fixed-4": {"bucket": "4"},
    "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "3"},
    "postpone": {"bucket": "-2"},
    "postpone-3-buckets": {"bucket": "-2", "postpone.default-bucket-num": "3"},
}


@pytest.mark.parametrize("mode", list(BUCKET_MODES))
def test_primary_key_bucket_modes(java_paimon: JavaPaimon, lake: Lake, mode: str) -> None:
    """Fixed, dynamic and postpone buckets. Java's upserts of lakecore's keys land in lakecore's
    buckets (fixed: the same bucket hash; dynamic: Paimon's HashBucketAssigner over lakecore's
    hash index), so no key is read twice. Postponed rows (bucket-postpone) are invisible to
    both until lakecore's compaction assigns real buckets; Java's batch write to a postpone
    table postpones too, and lakecore's next compaction brings it in."""
    jp, options = java_paimon, BUCKET_MODES[mode]
    postpone = options["bucket"] == "-2"
    lake.create("t", KV, **{"rowkind.field": "rk"}, **options)
    lake.write("t", BASE)
    lake.write("t", UPSERTS)
    model = dedupe(BASE, UPSERTS)
    if postpone:
        same(jp, lake, "t", [])
        assert {f["bucket"] for f in java_files(jp, lake, "t")} == {-2}
        lake.compact("t", full=True)
    same(jp, lake, "t", model)
    buckets = {f["bucket"] for f in java_files(jp, lake, "t")}
    assert buckets == {"fixed-1": {0}, "fixed-4": {0, 1, 2, 3}, "dynamic": {0, 1, 2},
                       "postpone": {0}, "postpone-3-buckets": {0, 1, 2}}[mode]
    if options["bucket"] == "-1":
        assert jp.call("schema", **lake.at("t"))["bucket_mode"] == "HASH_DYNAMIC"

    java_write(jp, lake, "t", JAVA_UPSERTS)
    both = dedupe(BASE, UPSERTS, JAVA_UPSERTS)
    if postpone:
        same(jp, lake, "t", model)  # Java's rows wait in bucket-postpone
        assert -2 in {f["bucket"] for f in java_files(jp, lake, "t")}
        lake.compact("t", full=True)
        assert -2 not in {f["bucket"] for f in java_files(jp, lake, "t")}
    same(jp, lake, "t", both)
    if not postpone:
        # Java compacts lakecore's and its own files; lakecore upserts on top (dynamic: key 20
        # is in the bucket Java's assigner chose, which lakecore finds in Java's hash index)
        assert jp.call("compact", **lake.at("t"), full=True)["new_snapshot"]
        assert {f["level"] for f in java_files(jp, lake, "t")} == {5}
        same(jp, lake, "t", both)
        last = [(20, "lc20", 21, "+U"), (5, None, None, "-D")]
        lake.write("t", last)
        same(jp, lake, "t", dedupe(BASE, UPSERTS, JAVA_UPSERTS, last))


AP = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


@pytest.mark.parametrize("options", [{"bucket": "-1"}, {"bucket": "2", "bucket-key": "id"}],
                         ids=["unaware-bucket", "bucketed"])
def test_append_tables(java_paimon: JavaPaimon, lake: Lake, options: dict[str, str]) -> None:
    """Append tables (no primary key), partitioned: duplicates are kept; Java appends to
    lakecore's files, lakecore compacts both writers' files, and every read agrees."""
    jp = java_paimon
    lake.create("ap", AP, pk=None, part=["p"], **options)
    commits = [[(i, "x" if i % 2 else "y", f"c{c}") for i in range(c, c + 3)] for c in range(4)]
    for c in commits:
        lake.write("ap", c)
    rows = [r for c in commits for r in c]
    same(jp, lake, "ap", rows)
    java = [(1, "x", "java"), (1, "x", "java"), (2, "z", "java")]
    java_write(jp, lake, "ap", java)
    same(jp, lake, "ap", rows + java)
    before = len(java_files(jp, lake, "ap"))
    report = lake.compact("ap", full=True)
    assert report.snapshot_ids, report.skipped_reason
    after = java_files(jp, lake, "ap")
    assert len(after) < before and {f["level"] for f in after} == {0}
    same(jp, lake, "ap", rows + java)


KEYS = pa.schema([
    pa.field("k_s", pa.string(), nullable=False), pa.field("k_i", pa.int32(), nullable=False),
    pa.field("k_d", pa.date32(), nullable=False),
    pa.field("k_m", pa.decimal128(12, 3), nullable=False),
    pa.field("k_ts", pa.timestamp("us"), nullable=False), ("v", pa.string()),
])


def test_composite_keys_of_every_type_hash_to_the_same_buckets(java_paimon: JavaPaimon,
                                                               lake: Lake) -> None:
    """A five-column key (STRING, INT, DATE, DECIMAL, TIMESTAMP) over 4 buckets: Java's upsert
    of every lakecore key replaces it (its bucket hash of the key's BinaryRow is lakecore's),
    and Java's filter on key columns finds lakecore's rows."""
    jp = java_paimon
    lake.create("k", KEYS, pk=list(KEYS.names[:5]), bucket="4")

    def key(i: int) -> Row:
        return (f"s{i}", i - 3, dt.date(2020, 1, 1) + timedelta(days=i * 40),
                D(f"{i}.{i:03d}"), dt.datetime(2024, 1, 1, 12) + timedelta(microseconds=i * 7))

    lake.write("k", [(*key(i), f"lc{i}") for i in range(12)])
    same(jp, lake, "k", [(*key(i), f"lc{i}") for i in range(12)])
    assert len({f["bucket"] for f in java_files(jp, lake, "k")}) == 4
    java_write(jp, lake, "k", [(*key(i), f"java{i}") for i in range(0, 12, 2)])
    expected = [(*key(i), f"java{i}" if i % 2 == 0 else f"lc{i}") for i in range(12)]
    same(jp, lake, "k", expected)
    filtered = jp.call("read", **lake.at("k"), filter={"and": [
        {"equal": ["k_d", key(5)[2].isoformat()]}, {"equal": ["k_i", 2]},
        {"equal": ["k_ts", key(5)[4].isoformat(timespec="microseconds")]}]})
    assert java_rows(filtered, KEYS) == [expected[5]]


# ------------------------------------------------------------------ 3. deletion vectors

def test_deletion_vectors_write_only_then_dedicated_compaction(java_paimon: JavaPaimon,
                                                               lake: Lake) -> None:
    """deletion-vectors.enabled + write-only: lakecore's level-0 commits are invisible to Java's
    batch read (batchScanSkipLevel0) and to lakecore's; lakecore's full compaction lifts them;
    a later commit of upserts and deletes, compacted by lakecore (not fully), leaves deletion
    vectors on the compacted files, which Java applies. Java then commits (compacting, as its
    writer does for DV tables) and lakecore reads Java's vectors."""
    jp = java_paimon
    lake.create("dv", KV, bucket="2", **{"rowkind.field": "rk", "deletion-vectors.enabled": "true",
                                         "write-only": "true"})
    base = [(i, f"v{i}", i, "+I") for i in range(30)]
    lake.write("dv", base)
    same(jp, lake, "dv", [])
    lake.compact("dv", full=True)
    same(jp, lake, "dv", base)

    changes = [(1, "u1", 10, "+U"), (2, None, None, "-D"), (7, "u7", 70, "+U"),
               (30, "n", 30, "+I")]
    lake.write("dv", changes)
    same(jp, lake, "dv", base)  # the changes wait on level 0
    lake.compact("dv", full=False)
    files = java_files(jp, lake, "dv")
    assert 0 not in {f["level"] for f in files}
    assert sum(f.get("deleted_rows", 0) for f in files if "deletion_vector" in f) == 3
    model = dedupe(base, changes)
    same(jp, lake, "dv", model)

    java = [(3, "j3", 3, "+U"), (4, None, None, "-D")]
    java_write(jp, lake, "dv", java, options={"write-only": "false"})
    assert 0 not in {f["level"] for f in java_files(jp, lake, "dv")}
    model = dedupe(base, changes, java)
    same(jp, lake, "dv", model)
    late = [(5, "late", 5, "+U")]
    java_write(jp, lake, "dv", late)  # the table's write-only: level 0
    same(jp, lake, "dv", model)
    lake.compact("dv", full=False)
    same(jp, lake, "dv", dedupe(base, changes, java, late))


DV_ENGINES = {
    # engine options, lakecore's second commit, Java's commit, rows of keys 1, 2, 30 after each
    "partial-update": (
        {"merge-engine": "partial-update"},
        [(1, None, 100, "+U"), (2, "w2", None, "+I"), (30, "n", 30, "+I")],
        [(1, "j", None, "+U")],
        [(1, "v1", 100, "+U"), (2, "w2", 2, "+I"), (30, "n", 30, "+I")],
        [(1, "j", 100, "+U"), (2, "w2", 2, "+I"), (30, "n", 30, "+I")],
    ),
    "aggregation": (
        {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
         "fields.v.aggregate-function": "listagg"},
        [(1, None, 100, "+U"), (2, "w2", None, "+I"), (30, "n", 30, "+I")],
        [(1, "j", 1, "+U")],
        [(1, "v1", 101, "+U"), (2, "v2,w2", 2, "+I"), (30, "n", 30, "+I")],
        [(1, "v1,j", 102, "+U"), (2, "v2,w2", 2, "+I"), (30, "n", 30, "+I")],
    ),
}


@pytest.mark.parametrize("engine", list(DV_ENGINES))
def test_deletion_vectors_with_merging_engines(java_paimon: JavaPaimon, lake: Lake,
                                               engine: str) -> None:
    """Deletion vectors with partial-update / aggregation: lakecore's compaction of a level-0
    commit merges the keys' rows from level 5 into the new rows and marks the old ones deleted;
    Java reads the files raw with the vectors, exactly as lakecore; Java's merging commit on
    top (compacted by its writer) reads back in lakecore."""
    options, commit, java, after, after_java = DV_ENGINES[engine]
    jp = java_paimon
    lake.create("dv", KV, bucket="1", **{"rowkind.field": "rk", "deletion-vectors.enabled": "true",
                                         "write-only": "true"}, **options)
    base = [(i, f"v{i}", i, "+I") for i in range(20)]
    lake.write("dv", base)
    lake.compact("dv", full=True)
    lake.write("dv", commit)
    lake.compact("dv", full=False)
    files = java_files(jp, lake, "dv")
    assert [f.get("deleted_rows") for f in files if f["level"] == 5] == [2]
    untouched = [r for r in base if r[0] not in (1, 2)]
    same(jp, lake, "dv", untouched + after)
    java_write(jp, lake, "dv", java, options={"write-only": "false"})
    same(jp, lake, "dv", untouched + after_java)


# ------------------------------------------------------------------ 4. changelog producers

CL1 = [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")]
CL2 = [(1, "a2", "+U"), (2, "b", "-D"), (4, "d", "+I")]
CL3 = [(4, "d2", "+U"), (5, "e", "+I")]
# what a consumer replays from the first snapshot on (kind, row)
CHANGELOG = {
    "input": [("+I", (1, "a", "+I")), ("+I", (2, "b", "+I")), ("+I", (3, "c", "+I")),
              ("+U", (1, "a2", "+U")), ("-D", (2, "b", "-D")), ("+I", (4, "d", "+I")),
              ("+U", (4, "d2", "+U")), ("+I", (5, "e", "+I"))],
    # lookup and full-compaction: -U carries the old row, -D the deleted one
    "lookup": [("+I", (1, "a", "+I")), ("+I", (2, "b", "+I")), ("+I", (3, "c", "+I")),
               ("-U", (1, "a", "+I")), ("+U", (1, "a2", "+U")), ("-D", (2, "b", "+I")),
               ("+I", (4, "d", "+I")), ("-U", (4, "d", "+I")), ("+U", (4, "d2", "+U")),
               ("+I", (5, "e", "+I"))],
}
CHANGELOG["full-compaction"] = CHANGELOG["lookup"]


def changes(rows: Iterable[tuple[str, Row]]) -> list[tuple[str, Row]]:
    return sorted(rows, key=repr)


def lc_changes(lake: Lake, name: str, start: int | str, end: int | str,
               options: dict[str, str] | None = None) -> list[tuple[str, Row]]:
    """lakecore's incremental read of (start, end]: (row kind, row) pairs."""
    got = lake.read(name, {"incremental-between": f"{start},{end}", **(options or {})})
    kinds = got.column("_ROW_KIND").to_pylist()
    return changes(zip(kinds, tuples_unsorted(got.drop_columns(["_ROW_KIND"])), strict=True))


def tuples_unsorted(t: pa.Table) -> list[Row]:
    return [tuple(r.values()) for r in t.to_pylist()]


SCAN_MODE = {m: {"incremental-between-scan-mode": m}
             for m in ("auto", "delta", "changelog", "diff")}


def java_changes(jp: JavaPaimon, lake: Lake, name: str, start: int | str, end: int | str,
                 mode: str = "changelog", **kw: Any) -> list[tuple[str, Row]]:
    answer = jp.call("read_incremental", **lake.at(name), start=start, end=end, mode=mode, **kw)
    return changes(zip(answer["row_kinds"], (tuple(r) for r in answer["rows"]), strict=True))


def changelog_table(lake: Lake, producer: str) -> list[int]:
    """Three lakecore commits (CL1..CL3) to a ``producer`` table; full-compaction: a lakecore
    full compaction after each. Returns the latest snapshot id after each step."""
    lake.create("cl", IV, bucket="1", **{"rowkind.field": "rk", "changelog-producer": producer})
    ends = []
    for c in (CL1, CL2, CL3):
        lake.write("cl", c)
        if producer == "full-compaction":
            lake.compact("cl", full=True)
        ends.append(lake.table("cl").snapshot_manager.latest_id())
    return ends


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_changelog_producer_incremental_reads(java_paimon: JavaPaimon, lake: Lake,
                                              producer: str) -> None:
    """input / lookup / full-compaction: Java's changelog read (incremental-between, mode
    changelog, and auto, which picks it) of every range is lakecore's incremental read, and
    the whole history is the changelog written out by hand. Then Java commits (full-compaction:
    lakecore compacts Java's commit) and both read the same changelog of Java's snapshots."""
    jp = java_paimon
    ends = changelog_table(lake, producer)
    latest = ends[-1]
    kinds = [s["kind"] for s in jp.call("snapshots", **lake.at("cl"))["snapshots"]]
    assert kinds == {"input": ["APPEND"] * 3, "lookup": ["APPEND", "COMPACT"] * 3,
                     "full-compaction": ["APPEND", "COMPACT"] * 3}[producer]
    assert lc_changes(lake, "cl", 0, latest) == changes(CHANGELOG[producer])
    for start, end in [(0, latest), (ends[0], latest), (ends[0], ends[1]), (ends[1], latest),
                       (1, 2)]:
        ours = lc_changes(lake, "cl", start, end)
        assert java_changes(jp, lake, "cl", start, end) == ours, (start, end)
    assert java_changes(jp, lake, "cl", ends[0], latest, mode="auto") == lc_changes(
        lake, "cl", ends[0], latest)
    if producer == "input":  # the changelog is the input: Java's delta read is the same
        assert java_changes(jp, lake, "cl", 0, latest, mode="delta") == changes(
            CHANGELOG["input"])

    java_write(jp, lake, "cl", [(5, "e2", "+U"), (3, "c", "-D"), (6, "f", "+I")])
    if producer == "full-compaction":
        lake.compact("cl", full=True)
    now = lake.table("cl").snapshot_manager.latest_id()
    ours = lc_changes(lake, "cl", latest, now)
    assert java_changes(jp, lake, "cl", latest, now) == ours
    want = {"input": [("+U", (5, "e2", "+U")), ("-D", (3, "c", "-D")), ("+I", (6, "f", "+I"))],
            "lookup": [("-U", (5, "e", "+I")), ("+U", (5, "e2", "+U")), ("-D", (3, "c", "+I")),
                       ("+I", (6, "f", "+I"))]}
    want["full-compaction"] = want["lookup"]
    assert ours == changes(want[producer])
    same(jp, lake, "cl", [(1, "a2", "+U"), (4, "d2", "+U"), (5, "e2", "+U"), (6, "f", "+I")])


def test_first_row_lookup_changelog(java_paimon: JavaPaimon, lake: Lake) -> None:
    """first-row + changelog-producer=lookup: a key's first record is its only +I in the
    changelog; a later record of the key produces nothing, in lakecore's changelog files as in
    Java's read of them. (The data files of that second commit: see
    test_first_row_lookup_compaction_drops_keys_of_higher_levels.)"""
    jp = java_paimon
    lake.create("frl", IV, bucket="1", **{"rowkind.field": "rk", "merge-engine": "first-row",
                                          "changelog-producer": "lookup"})
    lake.write("frl", [*CL1, (8, "h", "+I"), (9, "i", "+I")])
    lake.write("frl", [(1, "x", "+I"), (6, "f", "+I")])
    latest = lake.table("frl").snapshot_manager.latest_id()
    ours = lc_changes(lake, "frl", 0, latest)
    assert ours == changes(("+I", r) for r in [*CL1, (8, "h", "+I"), (9, "i", "+I"),
                                               (6, "f", "+I")])
    assert java_changes(jp, lake, "frl", 0, latest) == ours


def test_no_changelog_producer_incremental_read_is_java_delta(java_paimon: JavaPaimon,
                                                              lake: Lake) -> None:
    """changelog-producer=none: the incremental read (scan mode auto = delta) is the APPEND
    snapshots' records as written, each with its kind, -D included, in Java as in lakecore;
    there is no changelog to read."""
    jp = java_paimon
    ends = changelog_table(lake, "none")
    java = java_changes(jp, lake, "cl", ends[0], ends[-1], mode="delta")
    assert java == changes([("+I", (4, "d", "+I")), ("+I", (5, "e", "+I")),
                            ("+U", (1, "a2", "+U")), ("+U", (4, "d2", "+U")),
                            ("-D", (2, "b", "-D"))])
    assert java_changes(jp, lake, "cl", ends[0], ends[-1], mode="changelog") == []
    assert lc_changes(lake, "cl", ends[0], ends[-1], SCAN_MODE["changelog"]) == []
    assert lc_changes(lake, "cl", ends[0], ends[-1], SCAN_MODE["delta"]) == java
    assert lc_changes(lake, "cl", ends[0], ends[-1]) == java


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_java_diff_between_snapshots_is_lakecore_time_travel(java_paimon: JavaPaimon,
                                                             lake: Lake, producer: str) -> None:
    """Java's 'diff' incremental read (keep_delete: -D rows too) between two snapshots of a
    lakecore table is the difference of lakecore's time-travel reads of those snapshots: rows
    new or changed at the end (with the kind of the record that won), and the start's rows of
    keys gone, as -D. (lakecore's own diff mode: tests/javapaimon/test_incremental_modes.py.)"""
    jp = java_paimon
    ends = changelog_table(lake, producer)
    # the -D row of key 2: the delete record as lakecore stored it, on level 0 (none), or the
    # start's row (lookup: compaction dropped the delete record)
    deleted = {"none": (2, "b", "-D"), "lookup": (2, "b", "+I")}[producer]
    for start, end in [(ends[0], ends[-1]), (ends[1], ends[2])]:
        old = {r[0]: r for r in lake.rows("cl", {"scan.snapshot-id": str(start)})}
        new = {r[0]: r for r in lake.rows("cl", {"scan.snapshot-id": str(end)})}
        want = [(r[-1], r) for k, r in new.items() if old.get(k) != r]
        gone = [k for k in old if k not in new]
        assert gone == ([2] if start == ends[0] else []), (start, end)
        want += [("-D", deleted) for _ in gone]
        assert java_changes(jp, lake, "cl", start, end, mode="diff", keep_delete=True) == (
            changes(want)), (start, end)
    assert changes(want) == changes([("+U", (4, "d2", "+U")), ("+I", (5, "e", "+I"))])


# ------------------------------------------------------------------ 5. partitions

P1 = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), False),
                ("v", pa.string()), ("rk", pa.string())])
P2 = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("d", pa.date32(), False),
                pa.field("r", pa.string(), False), ("v", pa.string()), ("rk", pa.string())])
DAY1, DAY2, DAY3 = dt.date(2024, 1, 1), dt.date(2024, 2, 29), dt.date(1969, 12, 31)


def test_one_partition_key_with_an_overwrite(java_paimon: JavaPaimon, lake: Lake) -> None:
    """STRING partition, 2 buckets: upserts and deletes per partition, then lakecore's static
    overwrite of one partition (an OVERWRITE snapshot); Java reads every snapshot, filters on
    the partition, and its commit to two partitions is read back by lakecore."""
    jp = java_paimon
    lake.create("p", P1, pk=["id", "p"], part=["p"], bucket="2", **{"rowkind.field": "rk"})
    c1 = [(i, "x" if i % 2 else "y", f"v{i}", "+I") for i in range(10)]
    c2 = [(1, "x", "u1", "+U"), (2, "y", None, "-D"), (2, "x", "new", "+I")]
    lake.write("p", c1)
    lake.write("p", c2)
    model = {(r[0], r[1]): r for r in c1}
    model[(1, "x")] = c2[0]
    del model[(2, "y")]
    model[(2, "x")] = c2[2]
    same(jp, lake, "p", model.values())
    same(jp, lake, "p", c1, snapshot_id=1)
    lake.write("p", [(100, "y", "o", "+I")], overwrite={"p": "y"})
    assert jp.call("snapshots", **lake.at("p"))["snapshots"][-1]["kind"] == "OVERWRITE"
    after = [r for k, r in model.items() if k[1] == "x"] + [(100, "y", "o", "+I")]
    same(jp, lake, "p", after)
    only_x = jp.call("read", **lake.at("p"), filter={"equal": ["p", "x"]})
    assert java_rows(only_x, P1) == canon(r for r in after if r[1] == "x")
    assert {tuple(f["partition"]) for f in java_files(jp, lake, "p")} == {("x",), ("y",)}
    same(jp, lake, "p", model.values(), snapshot_id=2)

    java_write(jp, lake, "p", [(100, "y", "j", "+U"), (7, "z", "z7", "+I")])
    same(jp, lake, "p", [*(r for r in after if r[0] != 100), (100, "y", "j", "+U"),
                         (7, "z", "z7", "+I")])


def test_two_partition_keys_with_a_date(java_paimon: JavaPaimon, lake: Lake) -> None:
    """Partitioned by (DATE, STRING), dates before and after the epoch and a leap day: Java
    decodes lakecore's partition values (directory names and BinaryRow), filters on the date
    key, and its writes to an existing and a new partition land where lakecore reads them."""
    jp = java_paimon
    lake.create("p2", P2, pk=["id", "d", "r"], part=["d", "r"], bucket="2",
                **{"rowkind.field": "rk"})
    days = [DAY1, DAY2, DAY3]
    c1 = [(i, days[i % 3], "eu" if i % 2 else "us", f"v{i}", "+I") for i in range(12)]
    c2 = [(1, DAY2, "eu", "u1", "+U"), (2, DAY3, "us", None, "-D"), (3, DAY1, "eu", "n3", "+I")]
    lake.write("p2", c1)
    lake.write("p2", c2)
    model = {r[:3]: r for r in c1}
    model[c2[0][:3]] = c2[0]
    del model[c2[1][:3]]
    model[c2[2][:3]] = c2[2]
    same(jp, lake, "p2", model.values())
    parts = {tuple(f["partition"]) for f in java_files(jp, lake, "p2")}
    assert parts == {(d.isoformat(), r) for d, r in {k[1:] for k in model}}
    leap = jp.call("read", **lake.at("p2"), filter={"equal": ["d", DAY2.isoformat()]})
    assert java_rows(leap, P2) == canon(r for r in model.values() if r[1] == DAY2)
    # partition.legacy-name (default true): a DATE partition's directory is its epoch day
    assert sorted(os.listdir(lake.wh / "db.db" / "p2")) == [
        "d=-1", "d=19723", "d=19782", "manifest", "schema", "snapshot"]

    java = [(4, DAY2, "us", "j4", "+U"), (50, dt.date(2000, 1, 1), "eu", "j50", "+I")]
    java_write(jp, lake, "p2", java)
    assert os.path.isdir(lake.wh / "db.db" / "p2" / "d=10957" / "r=eu")  # 2000-01-01
    model.update({r[:3]: r for r in java})
    same(jp, lake, "p2", model.values())


# ------------------------------------------------------------------ 5. schema evolution

EV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int32()),
                ("old", pa.string()), ("gone", pa.string())])


def test_evolved_schema_old_and_new_files_by_field_id(java_paimon: JavaPaimon,
                                                      lake: Lake) -> None:
    """lakecore alters the table (add a column, rename, drop, widen INT->BIGINT) and writes
    again: Java maps both files through their schema versions by field id, reads the old
    snapshot with its own schema, and lakecore reads Java's commit under the new schema."""
    jp = java_paimon
    lake.create("ev", EV, bucket="1")
    lake.write("ev", [(1, 1, "a", "x"), (2, 2, "b", "y"), (3, -3, "c", "z")])
    lake.catalog.alter_table("db.ev", [
        SchemaChange.add_column("extra", "STRING"), SchemaChange.rename_column("old", "new"),
        SchemaChange.drop_column("gone"), SchemaChange.update_column_type("n", "BIGINT")])
    lake.write("ev", [(2, 2**40, "b2", "e"), (4, 4, "d", None)])
    schema = jp.call("schema", **lake.at("ev"))
    assert (schema["schema_id"], [(f["id"], f["name"], f["type"]) for f in schema["fields"]]) == (
        1, [(0, "id", "BIGINT NOT NULL"), (1, "n", "BIGINT"), (2, "new", "STRING"),
            (4, "extra", "STRING")])
    same(jp, lake, "ev", [(1, 1, "a", None), (2, 2**40, "b2", "e"), (3, -3, "c", None),
                          (4, 4, "d", None)])
    old = same(jp, lake, "ev", [(1, 1, "a", "x"), (2, 2, "b", "y"), (3, -3, "c", "z")],
               snapshot_id=1)
    assert old["fields"] == ["id", "n", "old", "gone"] and old["types"][1] == "INT"
    renamed = jp.call("read", **lake.at("ev"), projection=["new", "n", "id"],
                      filter={"greater_than": ["n", 2]})
    assert sorted(map(tuple, renamed["rows"])) == [("b2", 2**40, 2), ("d", 4, 4)]

    java_write(jp, lake, "ev", [(1, 2**50, "j1", "je"), (5, None, "j5", None)])
    lake.compact("ev", full=True)
    same(jp, lake, "ev", [(1, 2**50, "j1", "je"), (2, 2**40, "b2", "e"), (3, -3, "c", None),
                          (4, 4, "d", None), (5, None, "j5", None)])


# ------------------------------------------------------------------ 5. tags, expiry, orphans

def test_tags_time_travel_expiry_and_orphan_files(java_paimon: JavaPaimon, lake: Lake) -> None:
    """lakecore tags snapshots 2 and 4, Java reads each tag and snapshot as lakecore does (and
    the changelog between the tags); lakecore expires every snapshot but the latest and
    removes an orphan file: Java still reads the latest and both tags, no longer the expired
    snapshots, and lakecore reads Java's next commit."""
    jp = java_paimon
    lake.create("tg", IV, bucket="1", **{"rowkind.field": "rk", "changelog-producer": "input"})
    commits = [[(i, f"v{i}", "+I"), (0, f"zero{i}", "+U")] for i in range(1, 6)]
    for c in commits:
        lake.write("tg", c)
    t = lake.table("tg")
    t.create_tag("t2", 2)
    t.create_tag("t4", 4)
    listing = jp.call("snapshots", **lake.at("tg"))
    assert listing["tag_snapshots"] == {"t2": 2, "t4": 4}
    for n in range(1, 6):
        same(jp, lake, "tg", dedupe(*commits[:n]), snapshot_id=n)
    same(jp, lake, "tg", dedupe(*commits[:2]), tag="t2")
    same(jp, lake, "tg", dedupe(*commits[:4]), tag="t4")
    at3 = t.snapshot_manager.snapshot(3).time_millis
    n = max(i for i in range(1, 6) if t.snapshot_manager.snapshot(i).time_millis <= at3)
    ours = lake.rows("tg", {"scan.timestamp-millis": str(at3)})
    assert ours == canon(dedupe(*commits[:n]))
    answer = jp.call("read", **lake.at("tg"), options={"scan.timestamp-millis": str(at3)})
    assert java_rows(answer, IV) == ours
    between = lc_changes(lake, "tg", "t2", "t4", TAG_TO_SNAPSHOT)
    assert between == changes([(r[-1], r) for c in commits[2:4] for r in c])
    # Java and lakecore read the changelog of the tags' snapshot range with this option
    # (without it: the tags' diff, test_incremental_between_tags_is_the_tags_diff_in_java)
    assert java_changes(jp, lake, "tg", "t2", "t4", options=TAG_TO_SNAPSHOT) == between

    latest = listing["latest"]
    twin = lake.wh.parent / "twin"
    shutil.copytree(lake.wh, twin)
    assert jp.call("expire_snapshots", warehouse=str(twin), table="db.tg", retain_max=1,
                   retain_min=1)["expired"] == latest - 1
    report = lake.table("tg").expire_snapshots(dry_run=False, config=ExpireConfig(
        retain_min=1, retain_max=1, time_retained=timedelta(0)))
    assert report.snapshots_removed == latest - 1
    # the same files go (the tagged snapshots' changelog files and changelog manifest lists
    # too: ExpireSnapshotsImpl, FileDeletionBase.manifestSkippingSet)
    assert files_under(lake.wh) == files_under(twin)
    stray = Path(t.table_path) / "bucket-0" / "data-stray-orphan.parquet"
    stray.write_bytes(b"not parquet")
    os.utime(stray, (1, 1))
    orphans = lake.table("tg").remove_orphan_files(older_than=timedelta(hours=1), dry_run=False)
    assert [Path(f.path).name for f in orphans.files] == [stray.name] and not stray.exists()

    listing = jp.call("snapshots", **lake.at("tg"))
    assert [s["id"] for s in listing["snapshots"]] == [latest]
    assert listing["tag_snapshots"] == {"t2": 2, "t4": 4}
    same(jp, lake, "tg", dedupe(*commits))
    same(jp, lake, "tg", dedupe(*commits[:2]), tag="t2")
    same(jp, lake, "tg", dedupe(*commits[:4]), tag="t4")
    with pytest.raises(JavaPaimonError, match="out of available snapshotId range"):
        jp.call("read", **lake.at("tg"), snapshot_id=3)

    java_write(jp, lake, "tg", [(0, "java", "+U")])
    same(jp, lake, "tg", dedupe(*commits, [(0, "java", "+U")]))
    same(jp, lake, "tg", dedupe(*commits[:2]), tag="t2")


TAG_TO_SNAPSHOT = {"incremental-between-tag-to-snapshot": "true"}


def files_under(wh: Path) -> set[str]:
    """Every file of the warehouse but lakecore's own bookkeeping (``_lakecore``)."""
    return {str(p.relative_to(wh)) for p in wh.rglob("*")
            if p.is_file() and "_lakecore" not in p.parts}


def test_incremental_between_tags_is_the_tags_diff_in_java(java_paimon: JavaPaimon,
                                                           lake: Lake) -> None:
    """incremental-between 't2,t4' (two tags) on a changelog-producer=input table: the diff of
    the two tagged snapshots (Paimon's IncrementalDiffStartingScanner.betweenTags; the scan
    mode is not consulted), not the changelog between them: key 0's last value only, and no
    -D for key 1 (a diff drops deletes)."""
    jp = java_paimon
    lake.create("tg", IV, bucket="1", **{"rowkind.field": "rk", "changelog-producer": "input"})
    commits = [[(i, f"v{i}", "+I"), (0, f"zero{i}", "+U")] for i in range(1, 5)]
    commits[2].append((1, None, "-D"))
    for c in commits:
        lake.write("tg", c)
    t = lake.table("tg")
    t.create_tag("t2", 2)
    t.create_tag("t4", 4)
    java = java_changes(jp, lake, "tg", "t2", "t4")
    assert java == changes([("+U", (0, "zero4", "+U")), ("+I", (3, "v3", "+I")),
                            ("+I", (4, "v4", "+I"))])
    assert lc_changes(lake, "tg", "t2", "t4") == java


# ------------------------------------------------------------------ 6. nested and wide types

WIDE = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("f32", pa.float32()),
    ("f64", pa.float64()), ("b", pa.bool_()), ("s", pa.string()), ("bin", pa.binary()),
    ("d52", pa.decimal128(5, 2)), ("d184", pa.decimal128(18, 4)),
    ("d3810", pa.decimal128(38, 10)), ("day", pa.date32()),
    ("ts0", pa.timestamp("s")), ("ts3", pa.timestamp("ms")), ("ts6", pa.timestamp("us")),
    ("ltz", pa.timestamp("us", tz="UTC")),
    ("arr", pa.list_(pa.int32())), ("arr_s", pa.list_(pa.string())),
    ("a_ts", pa.list_(pa.timestamp("us"))),
    ("m", pa.map_(pa.string(), pa.int64())), ("m_arr", pa.map_(pa.int32(), pa.list_(pa.string()))),
    ("r", pa.struct([("x", pa.int32()), ("y", pa.string()),
                     ("z", pa.struct([("q", pa.decimal128(10, 3)), ("w", pa.list_(pa.date32())),
                                      ("t", pa.timestamp("ms"))]))])),
    ("arr_r", pa.list_(pa.struct([("k", pa.string()), ("v", pa.float64())]))),
    ("rk", pa.string()),
])


def wide(i: int, g: int, rk: str = "+I") -> Row:
    row = {
        "id": i, "i8": -i, "i16": 300 + i, "i32": -(2**31) + i, "f32": 1.5 * i,
        "f64": 2.25 * i + g, "b": i % 2 == 0, "s": f"héllo {i}.{g}", "bin": bytes([i, 0, 255, g]),
        "d52": D(f"{i}.{g:02d}"), "d184": D(f"-{i}12345678901.{g:04d}"),
        "d3810": D(f"1234567890123456789012345678.{i:010d}"),
        "day": dt.date(1970, 1, 1) + timedelta(days=i * 1000 - 3000),
        "ts0": dt.datetime(2001, 2, 3, 4, 5, 6 + g),
        "ts3": dt.datetime(2024, 1, 1, 1, 2, 3, 456000) + timedelta(days=i),
        "ts6": dt.datetime(1969, 12, 31, 23, 59, 59, 999999) - timedelta(seconds=i),
        "ltz": dt.datetime(2024, 2, 29, 23, 59, 59, i, tzinfo=dt.UTC),
        "arr": [i, None, g], "arr_s": ["a", None, "ü"][: i % 4],
        "a_ts": [dt.datetime(2020, 5, 5, 5, 5, 5, 5 + g), None],
        "m": [("k", i), ("n", None)], "m_arr": [(i, ["x", None]), (i + 1, [])],
        "r": {"x": i, "y": None if i % 2 else "y",
              "z": {"q": D("1.500"), "w": [dt.date(2000, 1, 1), None],
                    "t": dt.datetime(1900, 1, 1, 0, 0, 0, 1000 * g)}},
        "arr_r": [{"k": "a", "v": 1.0}, None, {"k": None, "v": None}],
        "rk": rk,
    }
    return tuple(row.values())


def test_nested_and_wide_types(java_paimon: JavaPaimon, lake: Lake) -> None:
    """Every scalar type and ARRAY / MAP / ROW nested in each other, with nulls at each level,
    in a 2-bucket primary-key table: Java reads lakecore's level-0 files (merged), its
    compacted files, and lakecore reads Java's upsert of a nested row."""
    jp = java_paimon
    empty = (9,) + (None,) * (len(WIDE) - 2) + ("+I",)
    c1 = [wide(i, 0) for i in range(5)] + [empty]
    c2 = [wide(1, 1, "+U"), wide(2, 1, "-D"), wide(7, 1)]
    lake.create("w", WIDE, bucket="2", **{"rowkind.field": "rk"})
    lake.write("w", c1)
    lake.write("w", c2)
    answer = same(jp, lake, "w", dedupe(c1, c2))
    assert answer["types"][13:17] == ["TIMESTAMP(0)", "TIMESTAMP(3)", "TIMESTAMP(6)",
                                      "TIMESTAMP(6) WITH LOCAL TIME ZONE"]
    lake.compact("w", full=True)
    same(jp, lake, "w", dedupe(c1, c2))
    java_write(jp, lake, "w", [wide(3, 2, "+U"), wide(20, 2)])
    same(jp, lake, "w", dedupe(c1, c2, [wide(3, 2, "+U"), wide(20, 2)]))


SCALARS = ["i8", "i16", "i32", "f32", "f64", "b", "s", "bin", "d3810", "day", "ts0", "ts3",
           "ts6", "ltz"]


def test_filters_on_every_scalar_type(java_paimon: JavaPaimon, lake: Lake) -> None:
    """Java pushes an equality filter on each scalar column into lakecore's Parquet files
    (statistics and row-group filters) and finds exactly the rows lakecore holds with that
    value. (DECIMAL(p <= 18): test_filters_on_small_decimals.)"""
    jp = java_paimon
    lake.create("w", WIDE, bucket="2", **{"rowkind.field": "rk"})
    lake.write("w", [wide(i, 0) for i in range(5)])
    lake.write("w", [wide(1, 1, "+U"), wide(7, 1)])
    ours = lake.read("w")
    encoded = dict(zip(ours.column("id").to_pylist(), to_rows(ours), strict=True))
    for col in SCALARS:
        at = WIDE.names.index(col)
        value = encoded[3][at]
        want = sorted(i for i, r in encoded.items() if r[at] == value)
        got = jp.call("read", **lake.at("w"), filter={"equal": [col, value]})
        assert sorted(r[0] for r in got["rows"]) == want, col


@pytest.mark.parametrize("col", ["d52", "d184"])
def test_filters_on_small_decimals(java_paimon: JavaPaimon, lake: Lake, col: str) -> None:
    jp = java_paimon
    lake.create("w", WIDE, bucket="1", **{"rowkind.field": "rk"})
    lake.write("w", [wide(i, 0) for i in range(3)])
    value = str(wide(2, 0)[WIDE.names.index(col)])
    got = jp.call("read", **lake.at("w"), filter={"equal": [col, value]})
    assert [r[0] for r in got["rows"]] == [2]


NANOS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts9", pa.timestamp("ns")),
                   ("ltz9", pa.timestamp("ns", tz="UTC"))])


@pytest.mark.parametrize("col", ["ts9", "ltz9"])
def test_nanosecond_timestamps(java_paimon: JavaPaimon, lake: Lake, col: str) -> None:
    jp = java_paimon
    lake.create("ns", NANOS, bucket="1")
    value = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    lake.write("ns", [(1, value, value.replace(tzinfo=dt.UTC))])
    got = jp.call("read", **lake.at("ns"), projection=["id", col])["rows"]
    assert got == [[1, "2024-01-02T03:04:05.123456"]]
    same(jp, lake, "ns")


NS_BASE = pd.Timestamp("2024-01-02 03:04:05.123456789")


@pytest.mark.parametrize("col", ["ts9", "ltz9"])
def test_nanosecond_timestamp_filters(java_paimon: JavaPaimon, lake: Lake, col: str) -> None:
    """A filter literal with nanoseconds (a ``pandas.Timestamp``) on TIMESTAMP(9) /
    TIMESTAMP_LTZ(9) selects the rows Java's filter with the same literal selects, for every
    comparison and ``in`` (values one nanosecond either side, and a microsecond above; two
    commits, so statistics prune too). pyarrow made a microsecond scalar of such a literal:
    ``equal`` found nothing and ``greater_than`` took the equal row."""
    jp = java_paimon
    lake.create("nf", NANOS, bucket="1")
    one, micro = pd.Timedelta(nanoseconds=1), pd.Timedelta(microseconds=1)
    values = [NS_BASE - one, NS_BASE, NS_BASE + one, NS_BASE + micro]
    rows = [(i, v, v.tz_localize("UTC")) for i, v in enumerate(values)]
    lake.write("nf", rows[:2])
    lake.write("nf", rows[2:])
    text = ns_text(NS_BASE)
    literal = NS_BASE if col == "ts9" else NS_BASE.tz_localize("UTC")

    def ours(build: Any) -> list[int]:
        rb = lake.table("nf").new_read_builder()
        rb = rb.with_filter(build(rb.new_predicate_builder()))
        return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits())
                      .column("id").to_pylist())

    def java(spec: dict[str, Any]) -> list[int]:
        return sorted(r[0] for r in jp.call("read", **lake.at("nf"), filter=spec)["rows"])

    expected = {"equal": [1], "not_equal": [0, 2, 3], "less_than": [0],
                "less_or_equal": [0, 1], "greater_than": [2, 3], "greater_or_equal": [1, 2, 3]}
    for op, ids in expected.items():
        assert ours(lambda pb, op=op: getattr(pb, op)(col, literal)) == ids, op
        assert java({op: [col, text]}) == ids, op
    assert ours(lambda pb: pb.is_in(col, [literal, literal + micro])) == [1, 3]
    assert java({"in": [col, [text, ns_text(values[3])]]}) == [1, 3]


def ns_text(v: pd.Timestamp) -> str:
    """Java's text of a TIMESTAMP(9) literal (wall-clock time, all nine digits)."""
    return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond:06d}{v.nanosecond:03d}"
