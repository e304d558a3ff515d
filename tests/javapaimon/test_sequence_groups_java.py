"""Partial-update sequence groups and ``sequence.field.sort-order`` checked against Java Paimon
(the oracle of ``tests/javapaimon``, Paimon 1.4.2), both ways.

* One commit of random records per key sequence (several streams, out-of-order and tied
  sequences, nulls, -U/-D, aggregators inside groups, removing -D): Java merges them in its
  write buffer, lakecore in its writer; the rows read must be equal, whichever side reads.
* Several commits of two streams updating disjoint column groups, each side compacting its own
  table (Java: stream writers, its own compactions; lakecore: its writer and ``compact``); then
  each side compacts the other's table. All four reads agree at every step.
* ``sequence.field.sort-order = descending`` (deduplicate, partial-update, aggregation): one
  record per key and commit, since Paimon 1.4.2's write buffer still sorts ascending (fixed
  in 2.0 by apache/paimon#7684; lakecore sorts descending everywhere; the last test pins it).

The records are random but seeded. Paimon's merge is not associative around retractions, in
Java as in lakecore, so two writers that compact different sets of files may disagree there:

* ``initRow``: a merge whose first record is a retraction starts from its values, so an
  aggregator of a group that retracts (``sum``, ``last_non_null_value``) depends on which files
  a compaction merged together;
* a compaction into the highest level drops a -D result (``dropDelete``): the values a removing
  -D leaves (and ``first_value``'s "initialized" flag) are lost for records that come later,
  which the full merge still sees.

So the multi-commit data stays where the answer does not depend on the compaction: every key
starts with a +I, retractions hit a group without aggregators, and a removing -D is the last
record of its key. The one-commit test (one merge per key) has none of these limits.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from tests.core.helpers import write as lc_write
from tests.javapaimon.client import (
    JavaPaimon,
    at,
    from_rows,
    paimon_fields,
    to_rows,
)

SCHEMA = pa.schema([
    pa.field("k", pa.int32(), nullable=False),
    ("a", pa.int64()), ("b", pa.string()), ("ga", pa.int32()),  # group A
    ("c", pa.string()), ("n", pa.int64()), ("gc1", pa.int32()), ("gc2", pa.int64()),  # group C
    ("fv", pa.int64()), ("mx", pa.int64()), ("ge", pa.int64()),  # group E: aggregators
    ("x", pa.string()), ("rk", pa.string()),  # in no group; the row kind
])
NAMES = SCHEMA.names

ONE_COMMIT_OPTIONS = {
    "bucket": "2", "merge-engine": "partial-update", "rowkind.field": "rk",
    "fields.ga.sequence-group": "a,b",
    "fields.gc1,gc2.sequence-group": "c,n",
    "fields.ge.sequence-group": "fv,mx",
    "fields.b.aggregate-function": "last_non_null_value",
    "fields.c.aggregate-function": "listagg", "fields.c.ignore-retract": "true",
    "fields.n.aggregate-function": "sum",
    "fields.fv.aggregate-function": "first_value", "fields.fv.ignore-retract": "true",
    "fields.mx.aggregate-function": "max", "fields.mx.ignore-retract": "true",
    "partial-update.remove-record-on-sequence-group": "gc1",
}
STREAM_OPTIONS = {
    "bucket": "2", "merge-engine": "partial-update", "rowkind.field": "rk",
    "fields.ga.sequence-group": "a,b",
    "fields.gc1,gc2.sequence-group": "c,n",
    "fields.ge.sequence-group": "fv,mx",
    "fields.n.aggregate-function": "sum",
    "fields.fv.aggregate-function": "first_value",
    "fields.mx.aggregate-function": "max",
    "partial-update.remove-record-on-sequence-group": "ga",
    "num-sorted-run.compaction-trigger": "3",
}




def lc_table(wh: Path, options: dict[str, str] | None = None, schema: pa.Schema = SCHEMA,
             name: str = "db.t") -> Any:
    catalog = CatalogFactory.create({"warehouse": str(wh)})
    catalog.create_database("db", ignore_if_exists=True)
    if options is not None:
        catalog.create_table(name, Schema.from_pyarrow_schema(
            schema, primary_keys=[schema.names[0]], options=options))
    return catalog.get_table(name)


def lc_read(wh: Path, schema: pa.Schema = SCHEMA) -> list[dict[str, Any]]:
    table = lc_table(wh, schema=schema)
    rb = table.new_read_builder()
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(out.to_pylist(), key=lambda r: r[schema.names[0]])


def java_read(jp: JavaPaimon, wh: Path, schema: pa.Schema = SCHEMA) -> list[dict[str, Any]]:
    out = from_rows(jp.call("read", **at(wh)), schema)
    return sorted(out.to_pylist(), key=lambda r: r[schema.names[0]])


def java_create(jp: JavaPaimon, wh: Path, options: dict[str, str],
                schema: pa.Schema = SCHEMA) -> None:
    jp.call("create", **at(wh), fields=paimon_fields(schema), primary_keys=[schema.names[0]],
            options=options)


def all_reads_agree(jp: JavaPaimon, java_wh: Path, lc_wh: Path,
                    schema: pa.Schema = SCHEMA) -> list[dict[str, Any]]:
    """Java and lakecore each read both tables: four equal answers."""
    theirs = java_read(jp, java_wh, schema)
    assert lc_read(java_wh, schema) == theirs, "lakecore reads Java's table differently"
    ours = lc_read(lc_wh, schema)
    assert ours == theirs, "the tables differ"
    assert java_read(jp, lc_wh, schema) == ours, "Java reads lakecore's table differently"
    return ours


# ------------------------------------------------------------------ one merge per key


def one_commit_records(rnd: random.Random, keys: int, n: int) -> pa.Table:
    """Random records over few keys: every column and sequence random (nulls, ties, any
    order), kinds +I/+U/-U/-D."""
    rows = []
    for _ in range(n):
        def maybe(v: Any, p: float = 0.3) -> Any:
            return None if rnd.random() < p else v
        rows.append({
            "k": rnd.randrange(keys),
            "a": maybe(rnd.randint(-9, 9)), "b": maybe(rnd.choice("pqrs")),
            "ga": maybe(rnd.randint(0, 4)),
            "c": maybe(rnd.choice(["", "u", "v", "w"])), "n": maybe(rnd.randint(-9, 9)),
            "gc1": maybe(rnd.randint(0, 2), 0.5), "gc2": maybe(rnd.randint(0, 2), 0.5),
            "fv": maybe(rnd.randint(0, 9)), "mx": maybe(rnd.randint(0, 9)),
            "ge": maybe(rnd.randint(0, 3)), "x": maybe(f"x{rnd.randint(0, 9)}"),
            "rk": rnd.choices(["+I", "+U", "-U", "-D"], [5, 2, 2, 2])[0],
        })
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_one_commit_merges_every_key_as_java_does(java_paimon: JavaPaimon, tmp_path: Path,
                                                  seed: int) -> None:
    jp = java_paimon
    data = one_commit_records(random.Random(seed), 150, 900)
    java_wh, lc_wh = tmp_path / "java", tmp_path / "lc"
    java_create(jp, java_wh, ONE_COMMIT_OPTIONS)
    jp.call("write", **at(java_wh), rows=to_rows(data))
    lc_write(lc_table(lc_wh, ONE_COMMIT_OPTIONS), data)
    rows = all_reads_agree(jp, java_wh, lc_wh)
    # the keys a read drops are those Java's merge ends in a retraction (removed, no +I/+U
    # at all, or a lone -U/-D passed through)
    gone = set(data.column("k").to_pylist()) - {r["k"] for r in rows}
    kept = jp.call("read", **at(java_wh), keep_delete=True)
    deleted = {r[0] for r, kind in zip(kept["rows"], kept["row_kinds"], strict=True)
               if kind in ("-D", "-U")}
    assert gone == deleted and gone


# ------------------------------------------------------------------ streams, commits, compaction


def stream_batches(rnd: random.Random, keys: int, commits: int, per_commit: int
                   ) -> list[pa.Table]:
    """Three streams over the same keys, each writing its own group (and stream A sometimes
    x): sequences out of order, tied and null; stream A also retracts its own columns (-U,
    and -D only at sequence 0, older than the first commit's: it never removes). The first
    commit gives every key a +I (group A at sequence 1); the last adds a removing -D
    (sequence 9) to a quarter of the keys, as their last record."""
    batches = [pa.Table.from_pylist(
        [{"k": k, "ga": 1, "x": f"first{k}", "rk": "+I"} for k in range(keys)], schema=SCHEMA)]
    for _ in range(commits):
        rows = []
        for _ in range(per_commit):
            k = rnd.randrange(keys)
            stream = rnd.choice("ACE")
            row: dict[str, Any] = {"k": k, "rk": "+I"}
            if stream == "A":
                kind = rnd.choices(["+I", "+U", "-U", "-D"], [6, 2, 2, 1])[0]
                retract = kind[0] == "-"
                ga = (0 if kind == "-D" else rnd.randint(1, 6)) if retract else rnd.choice(
                    [None, 1, 2, 3, 4, 5])
                row.update(rk=kind, a=rnd.choice([None, rnd.randint(0, 99)]),
                           b=rnd.choice([None, "p", "q", "r"]), ga=ga,
                           x=None if retract else rnd.choice([None, f"x{rnd.randint(0, 9)}"]))
            elif stream == "C":
                row.update(rk=rnd.choice(["+I", "+U"]), c=rnd.choice([None, "c1", "c2", "c3"]),
                           n=rnd.randint(0, 9), gc1=rnd.choice([None, 1, 2, 3]),
                           gc2=rnd.choice([None, 1, 2]))
            else:
                row.update(fv=rnd.randint(0, 50), mx=rnd.choice([None, rnd.randint(0, 50)]),
                           ge=rnd.choice([None, 1, 2, 3, 4]))
            rows.append(row)
        batches.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    removed = rnd.sample(range(keys), keys // 4)
    batches.append(pa.Table.from_pylist(
        [{"k": k, "a": k, "ga": 9, "rk": "-D"} for k in removed], schema=SCHEMA))
    return batches


@pytest.mark.parametrize("seed", [21, 22])
def test_streams_commits_and_compactions_agree_both_ways(java_paimon: JavaPaimon,
                                                         tmp_path: Path, seed: int) -> None:
    jp = java_paimon
    rnd = random.Random(seed)
    java_wh, lc_wh = tmp_path / "java", tmp_path / "lc"
    java_create(jp, java_wh, STREAM_OPTIONS)
    lc = lc_table(lc_wh, STREAM_OPTIONS)
    stream = {**at(java_wh), "stream": True, "commit_user": f"job-{seed}"}
    batches = stream_batches(rnd, 40, 12, 60)
    for i, batch in enumerate(batches):
        # explicit identifiers: a writer made after ``close`` would start again at 1, and
        # Paimon's filterAndCommit drops a (user, identifier) it has committed
        answer = jp.call("write", **stream, rows=to_rows(batch), commit_identifier=i + 1)
        assert answer["committed"] == 1
        lc_write(lc, batch)
        if i == 5:  # besides the writers' own compactions (the Java writer's run async)
            jp.call("close", **at(java_wh))  # a second Java writer would conflict with it
            jp.call("compact", **at(java_wh), full=False)
            lc.compact(full=False)
        if i in (3, 8, 11):
            all_reads_agree(jp, java_wh, lc_wh)
    jp.call("close", **at(java_wh))
    before = all_reads_agree(jp, java_wh, lc_wh)
    # a quarter removed by the last commit (and a key whose commit held only -U records:
    # flushed as a -D, which the removing group then applies, on both sides)
    assert 20 <= len(before) <= 30
    # each side compacts the other's table fully; nothing changes
    lc_table(java_wh).compact(full=True)
    jp.call("compact", **at(lc_wh), full=True)
    assert all_reads_agree(jp, java_wh, lc_wh) == before
    levels = {f["level"] for f in jp.call("files", **at(java_wh))["files"]}
    assert levels == {max(levels)} and max(levels) > 0  # lakecore compacted Java's table


def test_java_reads_a_projection_and_a_removal(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """A hand-written history (the docs' two-stream example plus a removing -D), written by
    lakecore: Java's full read and projected reads equal lakecore's."""
    jp = java_paimon
    lc_wh = tmp_path / "lc"
    t = lc_table(lc_wh, STREAM_OPTIONS)

    def rows(*r: dict[str, Any]) -> pa.Table:
        return pa.Table.from_pylist([{"rk": "+I", **x} for x in r], schema=SCHEMA)

    lc_write(t, rows({"k": 1, "a": 1, "b": "p", "ga": 1, "c": "c1", "n": 1, "gc1": 1, "gc2": 1},
                     {"k": 2, "a": 2, "ga": 1}))
    lc_write(t, rows({"k": 1, "a": 2, "b": None, "ga": 2, "c": "c2", "n": 2, "gc1": 2},
                     {"k": 1, "a": 3, "ga": 1, "c": "c3", "n": 3, "gc1": 1, "gc2": 1}))
    lc_write(t, rows({"k": 2, "a": 0, "ga": 1, "rk": "-D"}))
    # group A: the newest record (ga 2) sets b to its null; group C: (2, null) > (1, 1), and the
    # older (1, 1) record of the same commit is still summed into n (1 + 2 + 3)
    expected = [{"k": 1, "a": 2, "b": None, "ga": 2, "c": "c2", "n": 6, "gc1": 2, "gc2": None,
                 "fv": None, "mx": None, "ge": None, "x": None, "rk": "+I"}]
    assert lc_read(lc_wh) == expected
    assert java_read(jp, lc_wh) == expected
    answer = jp.call("read", **at(lc_wh), projection=["k", "a"])
    assert [tuple(r) for r in answer["rows"]] == [(1, 2)]
    # Java 1.4.2's projected read leaves out the removing group when none of its columns is
    # read (PartialUpdateMergeFunction.Factory.create filters sequenceGroupPartialDelete by the
    # projection): the -D then no longer removes key 2. lakecore reads the removing groups'
    # sequence fields for every projection, so a projection never changes which rows exist.
    answer = jp.call("read", **at(lc_wh), projection=["k", "c", "n"])
    assert [tuple(r) for r in answer["rows"]] == [(1, "c2", 6), (2, None, None)]
    rb = lc_table(lc_wh).new_read_builder().with_projection(["k", "c", "n"])
    ours = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert ours.to_pylist() == [{"k": 1, "c": "c2", "n": 6}]


# ------------------------------------------------------------------ sequence.field.sort-order

ORDER_SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string()),
                          ("ts", pa.int64()), ("a", pa.int64()), ("ga", pa.int32())])


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation"])
def test_descending_sequence_field_agrees_with_java(java_paimon: JavaPaimon, tmp_path: Path,
                                                    engine: str) -> None:
    jp = java_paimon
    rnd = random.Random(31)
    options = {"bucket": "1", "merge-engine": engine, "sequence.field": "ts",
               "sequence.field.sort-order": "descending", "num-sorted-run.compaction-trigger": "3"}
    if engine == "partial-update":
        options["fields.ga.sequence-group"] = "a"
    if engine == "aggregation":  # last_value: the order decides
        options.update({"fields.v.aggregate-function": "last_value",
                        "fields.a.aggregate-function": "sum"})
    java_wh, lc_wh = tmp_path / "java", tmp_path / "lc"
    java_create(jp, java_wh, options, ORDER_SCHEMA)
    lc = lc_table(lc_wh, options, ORDER_SCHEMA)
    for i in range(8):
        keys = rnd.sample(range(30), 20)  # each key at most once a commit (see the docstring)
        batch = pa.Table.from_pylist([
            {"k": k, "v": rnd.choice([None, f"v{i}.{k}"]), "ts": rnd.choice([None, 1, 2, 3, 4]),
             "a": rnd.randint(0, 99), "ga": rnd.choice([None, 1, 2, 3])} for k in keys],
            schema=ORDER_SCHEMA)
        jp.call("write", **at(java_wh), rows=to_rows(batch))
        lc_write(lc, batch)
        if i == 4:
            jp.call("compact", **at(java_wh), full=False)
            lc.compact(full=False)
    before = all_reads_agree(jp, java_wh, lc_wh, ORDER_SCHEMA)
    assert len(before) == 30
    lc_table(java_wh, schema=ORDER_SCHEMA).compact(full=True)
    jp.call("compact", **at(lc_wh), full=True)
    assert all_reads_agree(jp, java_wh, lc_wh, ORDER_SCHEMA) == before


def test_java_1_4_sorts_its_write_buffer_ascending(java_paimon: JavaPaimon,
                                                   tmp_path: Path) -> None:
    """The one known difference of ``sequence.field.sort-order = descending``: Java 1.4.2's
    write buffer sorts ascending (SortBufferWriteBuffer; fixed in 2.0 by apache/paimon#7684),
    so within one commit it keeps the greatest value; across commits it keeps the smallest, as
    lakecore (and Paimon 2.0) do everywhere."""
    jp = java_paimon
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string()),
                        ("ts", pa.int64())])
    options = {"bucket": "1", "sequence.field": "ts", "sequence.field.sort-order": "descending"}
    java_wh, lc_wh = tmp_path / "java", tmp_path / "lc"
    java_create(jp, java_wh, options, schema)
    lc = lc_table(lc_wh, options, schema)
    for batch in ([[1, "a", 1], [1, "b", 3], [2, "c", 1]], [[2, "d", 3]]):
        data = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in batch],
                                    schema=schema)
        jp.call("write", **at(java_wh), rows=to_rows(data))
        lc_write(lc, data)
    assert [tuple(r.values()) for r in java_read(jp, java_wh, schema)] == [
        (1, "b", 3), (2, "c", 1)]
    assert [tuple(r.values()) for r in lc_read(lc_wh, schema)] == [(1, "a", 1), (2, "c", 1)]
    assert java_read(jp, lc_wh, schema) == lc_read(lc_wh, schema)  # Java reads ours as ours
