"""Structured Streaming through the ``lakecore`` data source: the sink commits each
micro-batch exactly once (the batch id is the commit identifier, the commit user comes from
the query id in the checkpoint), the source reads each new snapshot's delta or changelog with
the row kind, and its consumer keeps snapshot expiry off what the stream still has to read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.format.snapshot import CommitKind
from lakecore.spark.datasource.stream_write import query_commit_user
from tests.core.helpers import make_table, read

ROOT = Path(__file__).resolve().parents[2]
STREAM_SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _input_files(source: Path, batches: int, rows: int) -> list[int]:
    source.mkdir()
    ids = []
    for b in range(batches):
        part = list(range(b * rows, (b + 1) * rows))
        ids += part
        pq.write_table(pa.table({"id": pa.array(part, pa.int64()),
                                 "v": [f"v{i}" for i in part]}), source / f"part-{b}.parquet")
        os.utime(source / f"part-{b}.parquet", (1_000_000 + b, 1_000_000 + b))  # file order
    return ids


def _run_query(args: list[str], pause_at: str | None, marker: Path) -> str | None:
    """Run the query; with ``pause_at`` wait until it pauses there, then SIGKILL the whole
    process group (driver JVM and Python workers) and return None."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LAKECORE_SPARK_PAUSE_AT", None)
    if pause_at is not None:
        env["LAKECORE_SPARK_PAUSE_AT"] = pause_at
        env["LAKECORE_SPARK_PAUSE_MARKER"] = str(marker)
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.stream_query", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)
    if pause_at is None:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out[-3000:]
        return out
    deadline = time.monotonic() + 240
    while not (marker.exists() and marker.read_text().strip()):
        if proc.poll() is not None:
            raise AssertionError(f"query ended before pausing at {pause_at}: "
                                 f"{proc.stdout.read()[-3000:] if proc.stdout else ''}")
        assert time.monotonic() < deadline, f"no pause at {pause_at}"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    marker.unlink()
    return None


def _ids(table) -> list[int]:
    return sorted(r["id"] for r in read(table, "id"))


def test_killed_query_restarted_from_its_checkpoint_writes_every_row_once(tmp_path):
    warehouse = str(tmp_path / "wh")
    table = make_table(warehouse, STREAM_SCHEMA, options={"bucket": "-1"})
    ids = _input_files(tmp_path / "src", batches=3, rows=200)
    checkpoint = str(tmp_path / "ckpt")
    marker = tmp_path / "paused"
    args = [warehouse, "db.t", str(tmp_path / "src"), checkpoint]
    # 1: killed while batch 1 is written (batch 0 committed): its files are never committed
    _run_query(args, "stream-write:1", marker)
    assert _ids(table) == ids[:200]
    # 2: batch 1 again, committed to the table, killed before Spark records it
    _run_query(args, "stream-after-commit:1", marker)
    assert _ids(table) == ids[:400]
    # 3: to the end: the replay of batch 1 commits nothing, batch 2 commits once
    _run_query(args, None, marker)
    got = read(table, "id")
    assert [(r["id"], r["v"]) for r in got] == [(i, f"v{i}") for i in ids]
    snaps = list(table.snapshot_manager.snapshots())
    query_id = json.loads(Path(checkpoint, "metadata").read_text())["id"]
    assert [(s.commit_kind, s.commit_identifier) for s in snaps] == [
        (CommitKind.APPEND, 0), (CommitKind.APPEND, 1), (CommitKind.APPEND, 2)]
    assert {s.commit_user for s in snaps} == {query_commit_user(query_id)}
    # the replay of batch 1 deleted its own files; run 1's killed write left one orphan
    assert len(list(Path(table.paths.table_path).glob("bucket-*/*.parquet"))) == 3 + 1


def test_a_consumer_query_killed_between_batches_loses_and_repeats_nothing(tmp_path):
    """A new query with a new consumer, killed while its first batch (the full scan) is
    written and again after the batch committed: restarted from its checkpoint (Spark asks
    the source for its initial offset again, and the consumer the first run registered must
    give the same full scan) it ends with every row of the source once, and a later run
    reads the next snapshot."""
    from lakecore.store.consumers import read_consumer

    warehouse = str(tmp_path / "wh")
    src = make_table(warehouse, STREAM_SCHEMA, primary_keys=["id"], options={"bucket": "2"},
                     name="db.src")
    _write(src, range(0, 1000))
    _write(src, range(1000, 2000))
    _write(src, range(500, 1500))  # snapshot 3: 2,000 live keys
    out = make_table(warehouse, STREAM_SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    marker = tmp_path / "paused"
    args = [warehouse, "db.t", "lakecore:db.src:c1", str(tmp_path / "ckpt")]
    _run_query(args, "stream-write:0", marker)  # killed writing batch 0
    assert _ids(out) == []
    assert read_consumer(src, "c1") == 3  # the new consumer holds the start snapshot
    _run_query(args, "stream-after-commit:0", marker)  # batch 0 again, committed, killed
    assert _ids(out) == list(range(2000))
    _run_query(args, None, marker)  # batch 0's replay commits nothing
    assert [s.commit_identifier for s in out.snapshot_manager.snapshots()] == [0]
    _write(src, range(2000, 2100))  # snapshot 4
    _run_query(args, None, marker)  # the next batch: snapshot 4's rows
    assert _ids(out) == list(range(2100))
    assert [s.commit_identifier for s in out.snapshot_manager.snapshots()] == [0, 1]
    assert read_consumer(src, "c1") in (4, 5)  # moved on: no full scan pending any more


# -- the source ------------------------------------------------------------------------------

CHANGES = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])


def _stream_write(spark, warehouse: str, source: Path, checkpoint: Path) -> None:
    q = (spark.readStream.schema("id BIGINT, v STRING, op STRING").parquet(str(source))
         .writeStream.format("lakecore").option("warehouse", warehouse)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
         .start("db.t"))
    q.awaitTermination()


def test_stream_read_of_a_lookup_changelog_table_written_by_a_stream(spark, tmp_path):
    from lakecore.spark import register

    register(spark, filter_pushdown=False)
    warehouse = str(tmp_path / "wh")
    make_table(warehouse, CHANGES, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op", "changelog-producer": "lookup"})
    src = tmp_path / "src"
    src.mkdir()
    reader = (spark.readStream.format("lakecore").option("warehouse", warehouse)
              .option("read.changelog", "true").load("db.t")
              .writeStream.format("memory").queryName("lookup_changes").start())
    try:
        steps = [[(1, "a", "+I"), (2, "a", "+I")], [(1, "b", "+U")], [(2, None, "-D")]]
        for i, rows in enumerate(steps):
            ids, vs, ops = zip(*rows)
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                     "v": pa.array(vs, pa.string()), "op": list(ops)}),
                           src / f"part-{i}.parquet")
            os.utime(src / f"part-{i}.parquet", (1_000_000 + i, 1_000_000 + i))
            _stream_write(spark, warehouse, src, tmp_path / "ckpt")
            reader.processAllAvailable()
        got = [(r.rowkind, r.id, r.v) for r in spark.sql("select * from lookup_changes").collect()]
    finally:
        reader.stop()
    assert got == [("+I", 1, "a"), ("+I", 2, "a"), ("-U", 1, "a"), ("+U", 1, "b"),
                   ("-D", 2, "a")]


def _write(table, ids) -> None:
    from tests.core.helpers import write

    write(table, pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]},
                          schema=STREAM_SCHEMA))


def test_a_new_consumer_starts_where_a_query_without_one_starts(spark, tmp_path):
    """Paimon's default ``scan.mode`` (latest-full) for a new query: the latest snapshot's
    full scan first, with or without a ``consumer-id``. Only a consumer that existed before
    the query resumes from its position. (Spark asks an availableNow query for its initial
    offset twice; the consumer registered by the first answer moved the second one to the
    latest snapshot's delta: 1,000 of 2,000 rows.)"""
    from lakecore.spark import register
    from lakecore.store.consumers import read_consumer

    register(spark, filter_pushdown=False)
    warehouse = str(tmp_path / "wh")
    table = make_table(warehouse, STREAM_SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    _write(table, range(0, 1000))
    _write(table, range(1000, 2000))
    _write(table, range(500, 1500))  # snapshot 3: 1,000 upserts; 2,000 live keys

    def run(out: str, checkpoint: str, consumer: str | None = None) -> list[int]:
        sink = f"db.{out}"
        if not (Path(warehouse) / "db.db" / out).exists():
            make_table(warehouse, STREAM_SCHEMA, primary_keys=["id"],
                       options={"bucket": "1"}, name=sink)
        reader = spark.readStream.format("lakecore").option("warehouse", warehouse)
        if consumer is not None:
            reader = reader.option("consumer-id", consumer)
        q = (reader.load("db.t").writeStream.format("lakecore").option("warehouse", warehouse)
             .option("checkpointLocation", str(tmp_path / checkpoint))
             .trigger(availableNow=True).start(sink))
        q.awaitTermination()
        from lakecore import CatalogFactory

        return _ids(CatalogFactory.create({"warehouse": warehouse}).get_table(sink))

    assert run("plain", "a") == list(range(2000))
    assert read_consumer(table, "c1") is None
    assert run("c1", "b", "c1") == list(range(2000))  # was 500..1499 only
    _write(table, range(2000, 2100))  # snapshot 4
    # the same query restarted from its checkpoint: only what was committed since
    assert run("c1", "b", "c1") == list(range(2100))
    # Spark commits a batch's end to the source when it plans the next batch, so an
    # availableNow query leaves its consumer at its last batch's start or past its end
    held = read_consumer(table, "c1")
    assert held in (4, 5)
    _write(table, range(2100, 2200))  # snapshot 5
    # a new query (new checkpoint) with the existing consumer resumes from it: snapshot 4's
    # rows (2000..2099) again only if the consumer still names snapshot 4
    resumed = {4: list(range(2000, 2200)), 5: list(range(2100, 2200))}[held]
    assert run("c1_again", "c", "c1") == resumed
    # ...and a new consumer starts from the full snapshot again
    assert run("c2", "d", "c2") == list(range(2200))


def test_expiry_between_micro_batches_keeps_what_the_stream_needs(spark, tmp_path):
    from lakecore.spark import register
    from lakecore.store.consumers import read_consumer

    register(spark, filter_pushdown=False)
    warehouse = str(tmp_path / "wh")
    table = make_table(warehouse, STREAM_SCHEMA, options={
        "bucket": "-1", "snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    out = make_table(warehouse, STREAM_SCHEMA, options={"bucket": "-1"}, name="db.out")

    def run_stream() -> None:  # table -> out, resuming from the checkpoint each time
        q = (spark.readStream.format("lakecore").option("warehouse", warehouse)
             .option("consumer-id", "c1").load("db.t")
             .writeStream.format("lakecore").option("warehouse", warehouse)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start("db.out"))
        q.awaitTermination()

    _write(table, range(0, 10))  # snapshot 1
    run_stream()  # latest-full: snapshot 1's rows
    assert _ids(out) == list(range(10))
    _write(table, range(10, 20))
    _write(table, range(20, 30))  # snapshots 2 and 3: the stream has yet to read them
    time.sleep(0.01)
    sm = table.snapshot_manager
    # retention alone keeps snapshot 3 only (what the plan is without the consumer)
    assert table.copy({"consumer.expiration-time": "1 ms"}).expire_snapshots(
    ).plan.snapshot_ids == (1, 2)
    held = read_consumer(table, "c1")
    assert held in (1, 2)  # Spark commits a batch's end when it plans the next one
    table.expire_snapshots(dry_run=False)
    assert (sm.earliest_id(), sm.latest_id()) == (held, 3)
    run_stream()  # reads snapshots 2 and 3
    assert _ids(out) == list(range(30))
    # an abandoned consumer holds nothing once consumer.expiration-time has passed
    _write(table, range(30, 40))  # snapshot 4
    time.sleep(0.01)
    table.copy({"consumer.expiration-time": "1 ms"}).expire_snapshots(dry_run=False)
    assert (sm.earliest_id(), sm.latest_id()) == (4, 4)
    assert read_consumer(table, "c1") is None


# -- the source's offsets, driven directly (driver and executor sides, no query) --------------

def _reader(warehouse: str, **options: str):
    from lakecore.spark.datasource.options import SourceOptions, open_table
    from lakecore.spark.datasource.source import table_spark_schema
    from lakecore.spark.datasource.stream_read import make_stream_reader

    opts = SourceOptions.parse({"warehouse": warehouse, "path": "db.t", "read.changelog": "true",
                                **options})
    catalog, table = open_table(opts)
    schema = table_spark_schema(table, opts)
    catalog.close()
    return make_stream_reader(opts, schema)


def _changes(reader, start, end) -> list[tuple]:
    return [(k, i, v) for p in reader.partitions(start, end) for b in reader.read(p)
            for k, i, v in zip(*(b.column(c).to_pylist() for c in ("rowkind", "id", "v")))]


def _history(tmp_path):
    """s1: +I 1 a, +I 2 a; s2: +U 1 b; s3: COMPACT; s4: -D 2."""
    from tests.core.helpers import write

    warehouse = str(tmp_path / "wh")
    table = make_table(warehouse, CHANGES, primary_keys=["id"],
                       options={"bucket": "1", "rowkind.field": "op"})

    def rows(ids, v, op):
        return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids)),
                         "op": [op] * len(ids)}, schema=CHANGES)

    write(table, rows([1, 2], "a", "+I"))
    write(table, rows([1], "b", "+U"))
    table.compact(full=True)
    write(table, rows([2], "a", "-D"))
    assert [s.commit_kind for s in table.snapshot_manager.snapshots()] == [
        CommitKind.APPEND, CommitKind.APPEND, CommitKind.COMPACT, CommitKind.APPEND]
    return warehouse, table


def test_stream_start_follows_paimons_scan_modes(tmp_path):
    from lakecore.errors import OptionError
    from lakecore.store.consumers import write_consumer

    warehouse, table = _history(tmp_path)
    end = {"snapshot": 5, "scan": False}
    r = _reader(warehouse)  # default = latest-full
    start = r.initialOffset()
    assert start == {"snapshot": 4, "scan": True} and r.latestOffset(start) == end
    assert _changes(r, start, end) == [("+I", 1, "b")]
    r = _reader(warehouse, **{"scan.mode": "latest"})
    assert r.initialOffset() == end and r.latestOffset(end) == end
    r = _reader(warehouse, **{"scan.snapshot-id": "2"})  # default -> from-snapshot
    start = r.initialOffset()
    assert start == {"snapshot": 2, "scan": False}
    # the delta of APPEND snapshots as written (the COMPACT one skipped), with their kinds
    assert _changes(r, start, end) == [("+U", 1, "b"), ("-D", 2, "a")]
    r = _reader(warehouse, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"})
    start = r.initialOffset()
    assert start == {"snapshot": 2, "scan": True}
    assert sorted(_changes(r, start, end)) == [("+I", 1, "b"), ("+I", 2, "a"), ("-D", 2, "a")]
    s2 = table.snapshot_manager.snapshot(2)
    r = _reader(warehouse, **{"scan.timestamp-millis": str(s2.time_millis)})
    assert r.initialOffset()["snapshot"] == 3
    # a consumer's progress wins over the scan mode, unless ignored
    write_consumer(table, "c", 4)
    assert _reader(warehouse, **{"consumer-id": "c"}).initialOffset() == {
        "snapshot": 4, "scan": False}
    assert _reader(warehouse, **{"consumer-id": "c", "consumer.ignore-progress": "true"}
                   ).initialOffset() == {"snapshot": 4, "scan": True}
    for bad in ({"scan.mode": "compacted-full"}, {"scan.mode": "from-snapshot"},
                {"read.stream.maxFilesPerTrigger": "1"}):
        try:
            _reader(warehouse, **bad)
        except OptionError:
            continue
        raise AssertionError(f"{bad} accepted")


def test_stream_start_before_the_earliest_snapshot_starts_at_the_earliest(tmp_path):
    warehouse, table = _history(tmp_path)
    table.copy({"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms"}
               ).expire_snapshots(dry_run=False)
    assert table.snapshot_manager.earliest_id() == 3
    r = _reader(warehouse, **{"scan.snapshot-id": "1"})
    start = r.initialOffset()
    assert start == {"snapshot": 3, "scan": False}
    assert _changes(r, start, r.latestOffset(start)) == [("-D", 2, "a")]


def test_stream_commit_user_is_stable_per_checkpoint(tmp_path):
    from lakecore.errors import OptionError
    from lakecore.spark.datasource.options import SourceOptions
    from lakecore.spark.datasource.stream_write import resolve_commit_user

    base = {"warehouse": str(tmp_path), "path": "db.t"}
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "metadata").write_text('{"id":"8df70e31-48c0-4717-89f9-7f9f813921ee"}\n')
    for location in (str(ckpt), f"file://{ckpt}"):
        opts = SourceOptions.parse({**base, "checkpointLocation": location})
        assert resolve_commit_user(opts) == query_commit_user(
            "8df70e31-48c0-4717-89f9-7f9f813921ee")
    assert resolve_commit_user(SourceOptions.parse({**base, "commit.user": "u1"})) == "u1"
    for bad in ({}, {"checkpointLocation": str(tmp_path / "none")}):
        try:
            resolve_commit_user(SourceOptions.parse({**base, **bad}))
        except OptionError:
            continue
        raise AssertionError(f"{bad} accepted")
