"""The Java Paimon oracle checked against Java Paimon itself, then against lakecore.

Every command of ``tests/javapaimon`` runs on a real JVM (one per module, the ``java_paimon``
fixture) and each test asserts what Java Paimon itself observes: merged reads, file levels after
compaction, changelogs, expiry, tags, schema evolution, the JDBC catalog lock. The last tests are
the cross-checks: Java reads a table lakecore wrote, lakecore reads (and compacts) a table Java
wrote with deletion vectors, and a Java JDBC-catalog writer and a lakecore writer exclude each
other on one warehouse through Paimon's ``paimon_distributed_locks``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.lock import lock_from_options
from tests.core.helpers import write as lc_write
from tests.javapaimon.client import (
    KV,
    PKV,
    JavaPaimon,
    JavaPaimonError,
    at,
    from_rows,
    paimon_fields,
    to_rows,
)

Rows = list[tuple[Any, ...]]





def rows(answer: dict[str, Any]) -> Rows:
    return sorted(tuple(r) for r in answer["rows"])


def changes(answer: dict[str, Any]) -> list[tuple[str, tuple[Any, ...]]]:
    return sorted(zip(answer["row_kinds"], (tuple(r) for r in answer["rows"]), strict=True))


def files(jp: JavaPaimon, t: dict[str, str]) -> list[dict[str, Any]]:
    return jp.call("files", **t)["files"]


def snapshots(jp: JavaPaimon, t: dict[str, str]) -> list[dict[str, Any]]:
    return jp.call("snapshots", **t)["snapshots"]


# ------------------------------------------------------------------ protocol and types

def test_ping_errors_and_the_process_survives(java_paimon: JavaPaimon) -> None:
    jp = java_paimon
    assert jp.call("ping")["paimon_version"] == jp.paimon_version == "1.4.2"
    assert jp.start_seconds < 30
    with pytest.raises(JavaPaimonError, match="unknown op 'nope'") as e:
        jp.call("nope")
    assert "Oracle.run" in e.value.trace
    with pytest.raises(JavaPaimonError, match="TableNotExistException"):
        jp.call("read", warehouse="/nonexistent/wh", table="db.missing")
    assert jp.call("ping")["paimon_version"] == "1.4.2"


ALL_TYPES = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("b", pa.bool_()), ("s", pa.string()),
    ("bin", pa.binary()), ("dec", pa.decimal128(10, 2)), ("d", pa.date32()),
    ("ts", pa.timestamp("us")), ("ltz", pa.timestamp("us", tz="UTC")),
    ("arr", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32())),
    ("r", pa.struct([("a", pa.int32()), ("b", pa.string())])),
])


def test_every_type_round_trips(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """paimon_fields/to_rows/from_rows and the driver's encoding are inverse: what goes in
    comes back, type by type (composite types parsed by the driver's own parser)."""
    t = at(tmp_path)
    created = java_paimon.call("create", **t, fields=paimon_fields(ALL_TYPES),
                               primary_keys=["id"], options={"bucket": "1"})
    assert [f["type"] for f in created["fields"]][-4:] == [
        "TIMESTAMP(6) WITH LOCAL TIME ZONE", "ARRAY<INT>", "MAP<STRING NOT NULL, INT>",
        "ROW<`a` INT, `b` STRING>"]
    data = pa.Table.from_pylist([
        {"id": 1, "i8": -8, "i16": 16, "i32": -32, "f32": 1.5, "f64": 2.25, "b": True,
         "s": "héllo", "bin": b"\x00\xff", "dec": decimal.Decimal("-12.34"),
         "d": dt.date(2024, 1, 31), "ts": dt.datetime(2024, 1, 31, 12, 0, 0, 123456),
         "ltz": dt.datetime(2024, 2, 29, 23, 59, 59, 1, tzinfo=dt.UTC),
         "arr": [1, None, 3], "m": [("k", 1), ("z", None)], "r": {"a": 5, "b": "x"}},
        {"id": 2},
    ], schema=ALL_TYPES)
    java_paimon.call("write", **t, rows=to_rows(data))
    back = from_rows(java_paimon.call("read", **t), ALL_TYPES)
    assert back.sort_by("id").equals(data)


def test_type_strings_and_bad_rows(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    t = at(tmp_path)
    answer = java_paimon.call("create", **t, fields=[
        {"name": "k", "type": "INT NOT NULL"},
        {"name": "n",
         "type": "ROW<x ARRAY<MAP<STRING, DECIMAL(5,1)>>, `y z` TIMESTAMP(3)> NOT NULL"},
        {"name": "c", "type": "VARCHAR(10)"},
    ])
    assert [f["type"] for f in answer["fields"]] == [
        "INT NOT NULL", "ROW<`x` ARRAY<MAP<STRING, DECIMAL(5, 1)>>, `y z` TIMESTAMP(3)> NOT NULL",
        "VARCHAR(10)"]
    with pytest.raises(JavaPaimonError, match="has 1 values, the table has 3 fields"):
        java_paimon.call("write", **t, rows=[[1]])
    with pytest.raises(JavaPaimonError, match="Cannot parse type"):
        java_paimon.call("create", **at(tmp_path, "db.u"),
                         fields=[{"name": "a", "type": "ARRAY<INT> NULLISH"}])


# ------------------------------------------------------------------ writes and reads

def test_primary_key_upserts_deletes_time_travel_and_filters(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2"})
    first = [[i, "x" if i % 2 else "y", f"v{i}"] for i in range(8)]
    assert jp.call("write", **t, rows=first)["snapshot_id"] == 1
    assert jp.call("write", **t, rows=[[1, "x", "new"], [2, "y", "v2"], [20, "x", "n"]],
                   row_kinds=["+U", "-D", "+I"])["snapshot_id"] == 2
    model = {(r[0], r[1]): tuple(r) for r in first}
    model[(1, "x")] = (1, "x", "new")
    del model[(2, "y")]
    model[(20, "x")] = (20, "x", "n")
    assert rows(jp.call("read", **t)) == sorted(model.values())
    assert rows(jp.call("read", **t, snapshot_id=1)) == sorted(tuple(r) for r in first)
    assert rows(jp.call("read", **t, filter={"equal": ["v", "new"]})) == [(1, "x", "new")]
    got = jp.call("read", **t, projection=["v", "id"],
                  filter={"and": [{"equal": ["p", "x"]}, {"greater_than": ["id", 4]}]})
    assert got["fields"] == ["v", "id"]
    assert rows(got) == [("n", 20), ("v5", 5), ("v7", 7)]
    snaps = snapshots(jp, t)
    assert [(s["id"], s["kind"], s["delta_record_count"]) for s in snaps] == [
        (1, "APPEND", 8), (2, "APPEND", 3)]
    assert snaps[1]["total_record_count"] == 11


def test_overwrite_a_partition(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "1"})
    jp.call("write", **t, rows=[[1, "x", "a"], [2, "y", "b"]])
    jp.call("write", **t, rows=[[3, "x", "c"]], overwrite={"p": "x"})
    assert rows(jp.call("read", **t)) == [(2, "y", "b"), (3, "x", "c")]
    assert snapshots(jp, t)[-1]["kind"] == "OVERWRITE"


def test_full_compaction_leaves_one_file_per_bucket_on_the_top_level(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2"})
    for n in range(3):
        jp.call("write", **t, rows=[[i, "x" if i % 2 else "y", f"v{i}.{n}"] for i in range(10)])
    jp.call("write", **t, rows=[[4, "y", None]], row_kinds=["-D"])
    before = rows(jp.call("read", **t))
    assert {f["level"] for f in files(jp, t)} == {0}
    answer = jp.call("compact", **t, full=True)
    assert answer["new_snapshot"] and len(answer["compacted"]) == 4
    after = files(jp, t)
    assert {f["level"] for f in after} == {5}  # num-levels = compaction trigger 5 + 1
    assert sorted((tuple(f["partition"]), f["bucket"]) for f in after) == sorted(
        {(tuple(f["partition"]), f["bucket"]) for f in after})
    assert rows(jp.call("read", **t)) == before
    assert len(before) == 9 and sum(f["row_count"] for f in after) == 9
    assert snapshots(jp, t)[-1]["kind"] == "COMPACT"


def test_stream_writer_lookup_changelog_and_incremental_modes(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """changelog-producer=lookup: each stream commit waits for its lookup compaction (as
    Flink does) and a COMPACT snapshot carries the changelog with -U/+U and -D."""
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "changelog-producer": "lookup"})
    w = {**t, "stream": True, "commit_user": "job-1"}
    s1 = jp.call("write", **w, rows=[[1, "a"], [2, "b"]])
    s2 = jp.call("write", **w, rows=[[1, "a2"], [3, "c"]])
    s3 = jp.call("write", **w, rows=[[2, "b"]], row_kinds=["-D"])
    assert (s1["commit_identifier"], s2["commit_identifier"], s3["commit_identifier"]) == (1, 2, 3)
    snaps = snapshots(jp, t)
    assert [s["kind"] for s in snaps] == ["APPEND", "COMPACT"] * 3
    assert {s["commit_user"] for s in snaps} == {"job-1"}
    assert [s["changelog_record_count"] for s in snaps if s["kind"] == "COMPACT"] == [2, 3, 1]
    end = s3["snapshot_id"]
    assert end == snaps[-1]["id"] == 6

    inc = {**t, "start": 2, "end": end}  # everything after the first commit's changelog
    assert changes(jp.call("read_incremental", **inc, mode="changelog")) == [
        ("+I", (3, "c")), ("+U", (1, "a2")), ("-D", (2, "b")), ("-U", (1, "a"))]
    assert changes(jp.call("read_incremental", **inc, mode="delta")) == [
        ("+I", (1, "a2")), ("+I", (3, "c")), ("-D", (2, "b"))]
    # 'diff' compares the two snapshots' merged rows: without keep_delete only what is there
    assert changes(jp.call("read_incremental", **inc, mode="diff")) == [
        ("+I", (1, "a2")), ("+I", (3, "c"))]
    assert changes(jp.call("read_incremental", **inc, mode="diff", keep_delete=True)) == [
        ("+I", (1, "a2")), ("+I", (3, "c")), ("-D", (2, "b"))]
    assert rows(jp.call("read", **t)) == [(1, "a2"), (3, "c")]

    # the same (user, identifier) again: Paimon's filterAndCommit drops it
    again = jp.call("write", **w, rows=[[9, "dup"]], commit_identifier=3)
    assert again["committed"] == 0 and again["snapshot_id"] == end
    assert jp.call("close", **t)["closed"] == 1
    assert rows(jp.call("read", **t)) == [(1, "a2"), (3, "c")]


def test_full_compaction_changelog_producer(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "changelog-producer": "full-compaction"})
    jp.call("write", **t, rows=[[1, "a"], [2, "b"]])
    c1 = jp.call("compact", **t, full=True)["snapshot_id"]
    jp.call("write", **t, rows=[[1, "a2"], [2, "b"]], row_kinds=["+U", "-D"])
    c2 = jp.call("compact", **t, full=True)["snapshot_id"]
    snaps = {s["id"]: s for s in snapshots(jp, t)}
    assert (snaps[c1]["kind"], snaps[c1]["changelog_record_count"]) == ("COMPACT", 2)
    assert (snaps[c2]["kind"], snaps[c2]["changelog_record_count"]) == ("COMPACT", 3)
    assert changes(jp.call("read_incremental", **t, start=c1, end=c2, mode="changelog")) == [
        ("+U", (1, "a2")), ("-D", (2, "b")), ("-U", (1, "a"))]


def test_dynamic_bucket_table(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """bucket=-1: the driver assigns buckets with Paimon's HashBucketAssigner; an upsert finds
    its key's bucket through the hash index, so no key is duplicated."""
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "-1", "dynamic-bucket.target-row-num": "4"})
    assert jp.call("schema", **t)["bucket_mode"] == "HASH_DYNAMIC"
    jp.call("write", **t, rows=[[i, "x", f"v{i}"] for i in range(10)])
    jp.call("write", **t, rows=[[i, "x", f"w{i}"] for i in range(0, 12, 2)])
    expected = sorted((i, "x", f"w{i}" if i % 2 == 0 else f"v{i}") for i in range(12)
                      if i < 10 or i % 2 == 0)
    assert rows(jp.call("read", **t)) == expected
    assert len({f["bucket"] for f in files(jp, t)}) >= 3
    assert all(s["index_manifest"] for s in snapshots(jp, t))
    assert jp.call("compact", **t, full=True)["new_snapshot"]
    assert rows(jp.call("read", **t)) == expected


def test_deletion_vectors_write_only_then_compact(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """deletion-vectors + write-only: level-0 files are invisible to batch reads until a
    dedicated compaction; a non-full compaction of later upserts writes deletion vectors."""
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2", "deletion-vectors.enabled": "true", "write-only": "true"})
    jp.call("write", **t, rows=[[i, "x", f"v{i}"] for i in range(20)])
    assert rows(jp.call("read", **t)) == []  # only level 0 so far
    jp.call("compact", **t, full=True)
    assert {f["level"] for f in files(jp, t)} == {5}
    jp.call("write", **t, rows=[[1, "x", "u1"], [2, "x", None], [7, "x", "u7"]],
            row_kinds=["+U", "-D", "+U"])
    assert len(rows(jp.call("read", **t))) == 20  # the upserts wait for compaction
    jp.call("compact", **t, full=False)
    dv_files = [f for f in files(jp, t) if "deletion_vector" in f]
    assert dv_files and sum(f["deleted_rows"] for f in dv_files) == 3
    assert snapshots(jp, t)[-1]["index_manifest"]
    expected = [(i, "x", {1: "u1", 7: "u7"}.get(i, f"v{i}")) for i in range(20) if i != 2]
    assert rows(jp.call("read", **t)) == sorted(expected)


def test_append_tables_compact(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp = java_paimon
    unaware, bucketed = at(tmp_path, "db.ap"), at(tmp_path, "db.apb")
    jp.call("create", **unaware, fields=PKV, partition_keys=["p"])
    jp.call("create", **bucketed, fields=PKV, options={"bucket": "2", "bucket-key": "id"})
    for n in range(5):
        jp.call("write", **unaware, rows=[[n, "x", "a"], [n, "y", "b"]])
        jp.call("write", **bucketed, rows=[[n, "x", "a"], [n + 10, "y", "b"]])
    before = rows(jp.call("read", **unaware)), rows(jp.call("read", **bucketed))
    # unaware bucket: Paimon's append compaction coordinator (5 small files -> 1 per partition)
    assert jp.call("compact", **unaware)["new_snapshot"]
    assert sorted(tuple(f["partition"]) for f in files(jp, unaware)) == [("x",), ("y",)]
    assert jp.call("compact", **bucketed, full=True)["new_snapshot"]
    assert sorted(f["bucket"] for f in files(jp, bucketed)) == [0, 1]
    assert (rows(jp.call("read", **unaware)), rows(jp.call("read", **bucketed))) == before
    assert len(before[0]) == len(before[1]) == 10


# ------------------------------------------------------------------ maintenance, schema

def test_expire_snapshots(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=KV, primary_keys=["id"],
            options={"bucket": "1", "num-sorted-run.compaction-trigger": "50"})
    for i in range(6):
        jp.call("write", **t, rows=[[i, "v"]])
    assert jp.call("expire_snapshots", **t, retain_max=2, retain_min=1)["expired"] == 4
    assert [s["id"] for s in snapshots(jp, t)] == [5, 6]
    assert len(rows(jp.call("read", **t))) == 6
    with pytest.raises(JavaPaimonError):
        jp.call("read", **t, snapshot_id=2)
    # the time rule within [retain_min, retain_max]: nothing is older than an hour
    assert jp.call("expire_snapshots", **t, retain_max=10, retain_min=1,
                   older_than_ms=3_600_000)["expired"] == 0


def test_tags_time_travel_and_rollback(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    for i in range(4):
        jp.call("write", **t, rows=[[i, f"v{i}"]])
    jp.call("create_tag", **t, name="first", snapshot_id=1)
    jp.call("create_tag", **t, name="third", snapshot_id=3)
    listing = jp.call("snapshots", **t)
    assert listing["tags"] == ["first", "third"]
    assert listing["tag_snapshots"] == {"first": 1, "third": 3}
    assert rows(jp.call("read", **t, tag="first")) == [(0, "v0")]
    jp.call("delete_tag", **t, name="third")
    assert jp.call("snapshots", **t)["tags"] == ["first"]
    assert jp.call("rollback_to", **t, snapshot_id=3)["snapshot_id"] == 3
    assert len(rows(jp.call("read", **t))) == 3
    jp.call("rollback_to", **t, tag="first")
    assert rows(jp.call("read", **t)) == [(0, "v0")]
    assert [s["id"] for s in snapshots(jp, t)] == [1]


def test_alter_table(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    jp, t = java_paimon, at(tmp_path)
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    jp.call("write", **t, rows=[[1, "a"]])
    s1 = jp.call("alter", **t, changes=[
        {"add_column": {"name": "n", "type": "INT", "after": "id"}},
        {"add_column": {"name": "gone", "type": "STRING"}},
        {"set_option": {"key": "snapshot.num-retained.max", "value": "50"}},
    ])
    assert [f["name"] for f in s1["fields"]] == ["id", "n", "v", "gone"]
    assert s1["options"]["snapshot.num-retained.max"] == "50"
    assert rows(jp.call("read", **t)) == [(1, None, "a", None)]  # old rows: null
    jp.call("write", **t, rows=[[2, 20, "b", "x"]])
    s2 = jp.call("alter", **t, changes=[
        {"rename_column": {"from": "v", "to": "w"}},
        {"update_column_type": {"name": "n", "type": "BIGINT"}},
        {"drop_column": "gone"},
        {"remove_option": "snapshot.num-retained.max"},
    ])
    assert [(f["name"], f["type"]) for f in s2["fields"]] == [
        ("id", "BIGINT NOT NULL"), ("n", "BIGINT"), ("w", "STRING")]
    assert s2["schema_id"] == 2 and "snapshot.num-retained.max" not in s2["options"]
    assert rows(jp.call("read", **t)) == [(1, None, "a"), (2, 20, "b")]
    with pytest.raises(JavaPaimonError, match="Cannot update primary key"):
        jp.call("alter", **t, changes=[{"update_column_type": {"name": "id", "type": "INT"}}])


# ------------------------------------------------------------------ the JDBC catalog lock

def sqlite_catalog(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"uri": f"jdbc:sqlite:{tmp_path / 'locks.db'}", "catalog-key": "ck",
            "warehouse": str(tmp_path / "wh"), **extra}


def test_lock_commit_on_sqlite(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """A table made by the filesystem catalog gets commits from a JDBC catalog (registered in
    its paimon_tables by repairTable) under JdbcCatalogLock; the lock row is gone after."""
    jp, t = java_paimon, at(tmp_path / "wh")
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    jp.call("write", **t, rows=[[1, "fs"]])
    cat = sqlite_catalog(tmp_path)
    first = jp.call("lock_commit", catalog=cat, table="db.t", rows=[[2, "jdbc"]])
    assert (first["catalog"], first["registered"], first["snapshot_id"]) == ("JdbcCatalog", True, 2)
    second = jp.call("lock_commit", catalog=cat, table="db.t", rows=[[3, "jdbc"]])
    assert (second["registered"], second["snapshot_id"]) == (False, 3)
    with sqlite3.connect(tmp_path / "locks.db") as con:
        assert con.execute("SELECT * FROM paimon_distributed_locks").fetchall() == []
        assert con.execute("SELECT * FROM paimon_tables").fetchall() == [("ck", "db", "t")]
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert rows(jp.call("read", **t)) == [(1, "fs"), (2, "jdbc"), (3, "jdbc")]

    # contention: the lock held (in the driver's background thread) makes the commit wait; the
    # hold outlasts the asserted wait by 1.4 s or more, the slack for a loaded machine between
    # "held" and the commit starting
    held = jp.call("hold_lock", catalog=cat, table="db.t", millis=2400, background=True)
    assert held["lock_id"] == "ck.db.t"
    started = time.monotonic()
    waited = jp.call("lock_commit", catalog=cat, table="db.t", rows=[[4, "late"]])
    assert time.monotonic() - started >= 0.8 and waited["commit_ms"] >= 800
    assert jp.call("wait_locks")["held_ms"][0] >= 2400
    assert rows(jp.call("read", **t))[-1] == (4, "late")


def test_java_sqlite_jdbc_catalog_blocks_itself_in_rollback_journal_mode(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """Why the driver puts SQLite lock databases in WAL mode (``sqlite_wal``, default on): a
    JdbcCatalog opened on a database whose tables exist leaves DatabaseMetaData.getTables
    result sets open; in rollback-journal mode those hold SHARED locks and the lock's INSERT on
    another connection fails with SQLITE_BUSY. If this starts passing, Paimon fixed it."""
    jp, t = java_paimon, at(tmp_path / "wh")
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    cat = sqlite_catalog(tmp_path, sqlite_wal=False, **{"jdbc.busy_timeout": "100"})
    jp.call("lock_commit", catalog=cat, table="db.t", rows=[[1, "a"]])  # creates the tables
    with pytest.raises(JavaPaimonError) as e:
        jp.call("lock_commit", catalog=cat, table="db.t", rows=[[2, "b"]],
                options={"commit.max-retries": "0"})
    assert "SQLITE_BUSY" in (e.value.root_cause or "")


def test_filesystem_catalog_cannot_take_the_jdbc_lock(java_paimon: JavaPaimon,
                                                      tmp_path: Path) -> None:
    """lock.type=jdbc on a filesystem catalog: JdbcCatalogLockFactory casts the lock context to
    JdbcCatalogLockContext, which only JdbcCatalog makes; the commit fails before writing."""
    jp, t = java_paimon, at(tmp_path / "wh")
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    with pytest.raises(JavaPaimonError, match="ClassCastException.*JdbcCatalogLockContext"):
        jp.call("lock_commit", catalog=sqlite_catalog(tmp_path, metastore="filesystem"),
                table="db.t", rows=[[1, "a"]])
    assert jp.call("snapshots", **t)["latest"] is None


@pytest.mark.database("postgresql")
def test_lock_commit_on_postgresql(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    from tests.databases import POSTGRESQL, database_url

    url = urlsplit(database_url(POSTGRESQL))
    jdbc = f"jdbc:postgresql://{url.hostname}:{url.port or 5432}{url.path}"
    key = f"oracle-{uuid.uuid4().hex[:12]}"
    cat = {"uri": jdbc, "user": url.username or "postgres", "catalog-key": key,
           "warehouse": str(tmp_path / "wh")}
    if url.password:
        cat["password"] = url.password
    jp, t = java_paimon, at(tmp_path / "wh")
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    assert jp.call("lock_commit", catalog=cat, table="db.t", rows=[[1, "pg"]])["registered"]
    held = jp.call("hold_lock", catalog=cat, table="db.t", millis=2000, background=True)
    assert held["lock_id"] == f"{key}.db.t"
    assert jp.call("lock_commit", catalog=cat, table="db.t", rows=[[2, "pg"]])["commit_ms"] >= 500
    jp.call("wait_locks")
    assert rows(jp.call("read", **t)) == [(1, "pg"), (2, "pg")]

    import psycopg  # the lock tests' driver

    with psycopg.connect(f"postgresql://{url.username or 'postgres'}@{url.hostname}:"
                         f"{url.port or 5432}{url.path}", autocommit=True) as con:
        left = con.execute("SELECT lock_id FROM paimon_distributed_locks WHERE lock_id LIKE %s",
                           (key + ".%",)).fetchall()
        con.execute("DELETE FROM paimon_tables WHERE catalog_key = %s", (key,))
    assert left == []


# ------------------------------------------------------------------ cross-checks with lakecore

LC_SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    ("name", pa.string()),
    ("amount", pa.decimal128(10, 2)),
    ("ts", pa.timestamp("us")),
    ("rk", pa.string()),
])


def lc_table(wh: Path, name: str, schema: pa.Schema, **kw: Any) -> Any:
    catalog = CatalogFactory.create({"warehouse": str(wh), **kw.pop("catalog_options", {})})
    catalog.create_database(name.split(".")[0], ignore_if_exists=True)
    if kw:
        catalog.create_table(name, Schema.from_pyarrow_schema(schema, **kw))
    return catalog.get_table(name)


def lc_read(table: Any) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def sorted_rows(table: pa.Table, key: list[str]) -> list[dict[str, Any]]:
    return table.sort_by([(k, "ascending") for k in key]).to_pylist()


def lc_row(i: int, day: str, gen: int, kind: str = "+I") -> dict[str, Any]:
    return {"id": i, "dt": day, "name": f"n{i}.{gen}",
            "amount": decimal.Decimal(f"{i}.{gen:02d}"),
            "ts": dt.datetime(2024, 1, 1, 0, 0, 0, i * 1000 + gen), "rk": kind}


def test_java_reads_a_lakecore_primary_key_table(java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """lakecore: 2 buckets, a partition column, an upsert and a delete (rowkind.field); Java
    Paimon's read is exactly lakecore's, at the latest snapshot and the first."""
    wh = tmp_path / "wh"
    table = lc_table(wh, "db.lc", LC_SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": "2", "rowkind.field": "rk"})
    days = ["2024-01-01", "2024-01-02"]
    lc_write(table, pa.Table.from_pylist([lc_row(i, days[i % 2], 0) for i in range(12)],
                                         schema=LC_SCHEMA))
    lc_write(table, pa.Table.from_pylist(
        [lc_row(3, days[1], 1, "+U"), lc_row(4, days[0], 1, "-D"), lc_row(20, days[0], 1)],
        schema=LC_SCHEMA))
    ours = lc_read(table)
    assert ours.num_rows == 12
    theirs = from_rows(java_paimon.call("read", **at(wh, "db.lc")), ours.schema)
    assert sorted_rows(theirs, ["id", "dt"]) == sorted_rows(ours, ["id", "dt"])
    assert sorted(map(tuple, java_paimon.call("read", **at(wh, "db.lc"),
                                              filter={"equal": ["id", 3]})["rows"])) == [
        (3, days[1], "n3.1", "3.01", "2024-01-01T00:00:00.003001", "+U")]
    first = from_rows(java_paimon.call("read", **at(wh, "db.lc"), snapshot_id=1), ours.schema)
    assert first.num_rows == 12
    jfiles = {(tuple(f["partition"]), f["bucket"], f["file"]) for f in
              files(java_paimon, at(wh, "db.lc"))}
    assert {b for _, b, _ in jfiles} == {0, 1}


def test_lakecore_reads_and_compacts_a_java_deletion_vector_table(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """Java: deletion vectors, a full compaction, upserts/deletes compacted into deletion
    vectors, then one more uncompacted level-0 commit. lakecore reads exactly Java's rows, then
    compacts it fully; both read the same rows again."""
    jp, wh = java_paimon, tmp_path / "wh"
    t = at(wh)
    jp.call("create", **t, fields=PKV, primary_keys=["id", "p"], partition_keys=["p"],
            options={"bucket": "2", "deletion-vectors.enabled": "true"})
    jp.call("write", **t, rows=[[i, "x" if i % 3 else "y", f"v{i}"] for i in range(30)])
    jp.call("compact", **t, full=True)
    jp.call("write", **t, rows=[[1, "x", "u1"], [3, "y", None], [4, "x", "u4"], [30, "x", "n"]],
            row_kinds=["+U", "-D", "+U", "+I"])
    jp.call("compact", **t, full=False)
    assert any("deletion_vector" in f for f in files(jp, t))
    # a DV table's writer compacts at each commit; write-only keeps this one on level 0, which
    # Paimon's batch scan of a DV table skips until a compaction lifts it
    jp.call("write", **t, rows=[[5, "x", "late"]], row_kinds=["+U"],
            options={"write-only": "true"})
    assert any(f["level"] == 0 for f in files(jp, t))
    java_rows = jp.call("read", **t)
    assert [r for r in java_rows["rows"] if r[0] == 5] == [[5, "x", "v5"]]
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        pa.field("p", pa.string(), nullable=False), ("v", pa.string())])

    table = lc_table(wh, "db.t", schema)
    ours = lc_read(table)
    theirs = from_rows(java_rows, ours.schema)
    assert sorted_rows(ours, ["id", "p"]) == sorted_rows(theirs, ["id", "p"])

    table.compact(full=True)
    after_lc = lc_read(lc_table(wh, "db.t", schema))
    after_java = from_rows(jp.call("read", **t), after_lc.schema)
    assert sorted_rows(after_lc, ["id", "p"]) == sorted_rows(after_java, ["id", "p"])
    assert {"late", "u1", "u4", "n"} <= {r["v"] for r in after_lc.to_pylist()}
    assert (3, "y") not in {(r["id"], r["p"]) for r in after_lc.to_pylist()}
    assert snapshots(jp, t)[-1]["kind"] == "COMPACT"


def test_incremental_delta_read_of_a_java_table_matches_java(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """A Java table without a changelog producer: lakecore's incremental read (scan mode auto =
    delta) is Java's, the APPEND snapshots' records with their kinds, -D included."""
    jp, wh = java_paimon, tmp_path / "wh"
    t = at(wh)
    jp.call("create", **t, fields=KV, primary_keys=["id"], options={"bucket": "1"})
    jp.call("write", **t, rows=[[1, "a"], [2, "b"]])
    jp.call("write", **t, rows=[[1, "a2"], [3, "c"]])
    jp.call("write", **t, rows=[[2, "b"]], row_kinds=["-D"])
    java = changes(jp.call("read_incremental", **t, start=1, end=3, mode="delta"))
    assert java == [("+I", (1, "a2")), ("+I", (3, "c")), ("-D", (2, "b"))]
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    ours = lc_read(lc_table(wh, "db.t", schema).copy({"incremental-between": "1,3"}))
    assert sorted((r.get("_ROW_KIND"), (r["id"], r["v"])) for r in ours.to_pylist()) == java


def test_java_jdbc_writer_and_lakecore_share_the_lock(java_paimon: JavaPaimon,
                                                      tmp_path: Path) -> None:
    """One warehouse, one SQLite lock database, catalog-key "ck": lakecore (filesystem catalog
    with lock.uri) and Java (JDBC catalog) commit to the same table and exclude each other."""
    wh = tmp_path / "wh"
    lock_options = {"lock.enabled": "true", "lock.uri": f"sqlite:///{tmp_path / 'locks.db'}",
                    "catalog-key": "ck"}
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    table = lc_table(wh, "db.t", schema, primary_keys=["id"], options={"bucket": "1"},
                     catalog_options=lock_options)
    lc_write(table, pa.table({"id": [1], "v": ["lakecore"]}, schema=schema))
    cat = sqlite_catalog(tmp_path)
    assert jp_commit(java_paimon, cat, [[2, "java"]])["registered"]

    java_paimon.call("hold_lock", catalog=cat, table="db.t", millis=2400, background=True)
    started = time.monotonic()
    lc_write(table, pa.table({"id": [3], "v": ["lakecore-waited"]}, schema=schema))
    waited = time.monotonic() - started
    assert java_paimon.call("wait_locks")["held_ms"][0] >= 2400
    assert waited >= 0.8, f"lakecore did not wait for Java's lock ({waited:.2f} s)"

    # and the other way round: Java's commit waits while lakecore's lock holds the table
    lock = lock_from_options(lock_options)
    entered = threading.Event()

    def hold() -> None:
        entered.set()
        time.sleep(2.4)

    holder = threading.Thread(target=lock.run_with_lock, args=("db", "t", hold))
    holder.start()
    try:
        assert entered.wait(30)
        result = jp_commit(java_paimon, cat, [[4, "java-after"]])
    finally:
        holder.join(60)
        lock.close()
    assert result["snapshot_id"] == 4 and result["commit_ms"] >= 800
    with sqlite3.connect(tmp_path / "locks.db") as con:
        assert con.execute("SELECT count(*) FROM paimon_distributed_locks").fetchone() == (0,)
    expected = [(1, "lakecore"), (2, "java"), (3, "lakecore-waited"), (4, "java-after")]
    assert rows(java_paimon.call("read", **at(wh))) == expected
    assert sorted(tuple(r.values()) for r in lc_read(table).to_pylist()) == expected


def jp_commit(jp: JavaPaimon, cat: dict[str, Any], data: list[list[Any]]) -> dict[str, Any]:
    return jp.call("lock_commit", catalog=cat, table="db.t", rows=data)
