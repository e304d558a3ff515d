"""The jobs end to end through the real ``spark-submit`` (local[2], lakecore shipped as
``dist/lakecore.zip``). Each submit costs 15-40 s, so there are few, and each does a lot."""

from __future__ import annotations

import json
import os
import time
import uuid

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from lakecore.compact.job import compact
from lakecore.maintenance import expire_snapshots, remove_orphan_files
from lakecore.spark import read_table
from lakecore.spark.ingest import IngestRequest, default_commit_user, ingest_dataframe
from lakecore.spark.sources import SourceFormat, load_source
from tests.compat.pypaimon_runner import canonical, paimon_available, paimon_read
from tests.databases import POSTGRESQL, database_url
from tests.spark import helpers as h
from tests.spark import submit

pytestmark = pytest.mark.slow
RETAIN = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"}


@pytest.fixture(scope="module")
def zip_path():
    return submit.build_zip()


def _table_args(warehouse: str, *extra: str) -> list[str]:
    return ["--warehouse", warehouse, "--table", "db.t", *extra]


def _write_json(path, data: pa.Table) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "part-0.json"), "w") as f:
        for row in data.to_pylist():
            row["ts"] = row["ts"].isoformat() if row["ts"] else None
            f.write(json.dumps(row) + "\n")
    return str(path)


def _write_csv(path, data: pa.Table) -> str:
    os.makedirs(path, exist_ok=True)
    pacsv.write_csv(data, os.path.join(path, "part-0.csv"))
    return str(path)


def test_ingest_compact_maintain_read_equal_library_and_pypaimon(
        zip_path, warehouse, tmp_path, spark):
    table = h.create(warehouse, **RETAIN)
    twin = h.create(warehouse, "db.lib", **RETAIN)
    data = h.batches(3, rows=600)
    sources = [
        ("parquet", h.write_parquet(str(tmp_path / "b1"), "part-0", data[0])),
        ("json", _write_json(tmp_path / "b2", data[1])),
        ("csv", _write_csv(tmp_path / "b3", data[2])),
    ]
    for ident, ((fmt, path), b) in enumerate(zip(sources, data), start=1):
        if fmt == "parquet":
            done = submit.run("ingest", _table_args(warehouse, "--source", path,
                                                    "--source-format", fmt,
                                                    "--commit-identifier", str(ident)),
                              zip_path, tmp_path)
            assert done.returncode == 0, done.output[-5000:]
            s = done.summary
            assert s["status"] == "ok" and s["snapshot_ids"] == [ident]
            assert s["rows"] == b.num_rows
            assert done.last_line.startswith('{"job"')  # nothing of Spark's after the summary
            assert {"table", "files", "bytes", "duration_s", "stages"} <= set(s)
        else:
            # the ingest job's JSON / CSV path (load_source, then ingest_dataframe) on the
            # shared session: a spark-submit costs 15-40 s, and JSON sources go through the
            # real spark-submit in tests/airflow/test_pipeline.py (shop.customers)
            request = IngestRequest(ident, default_commit_user("ingest", table.identifier, ident))
            df = load_source(spark, path=path, fmt=SourceFormat(fmt))
            result = ingest_dataframe(spark, df, table, warehouse, request)
            assert list(result.snapshot_ids) == [ident] and result.rows == b.num_rows
        h.library_commit(twin, b, ident, "lib")

    done = submit.run("compact", _table_args(warehouse, "--full"), zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["snapshot_ids"] == [4] and done.summary["buckets"] == 9
    compact(twin, full=True)

    done = submit.run("maintain", _table_args(warehouse, "--expire-snapshots",
                                              "--remove-orphans"), zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["steps"][0]["snapshots_removed"] == 2
    expire_snapshots(twin, dry_run=False)
    assert table.snapshot_manager.earliest_id() == twin.snapshot_manager.earliest_id() == 3

    want = h.model(data)
    assert h.rows(table) == h.rows(twin) == want
    df = read_table(spark, warehouse, "db.t")
    assert sorted((r.asDict() for r in df.collect()), key=lambda r: (r["dt"], r["id"])) == want
    if paimon_available():  # pypaimon reads what the jobs wrote
        theirs = paimon_read(warehouse, "db.t")
        assert canonical(theirs, h.KEY) == canonical(pa.Table.from_pylist(want, h.SCHEMA), h.KEY)


def test_killed_in_write_and_in_commit_then_rerun_commits_exactly_once(
        zip_path, warehouse, tmp_path):
    table = h.create(warehouse)
    data = h.batches(1, rows=500)[0]
    args = _table_args(warehouse, "--source", h.write_parquet(str(tmp_path / "src"), "b", data),
                       "--commit-identifier", "20261101")

    submit.run_until_paused("ingest", args, zip_path, tmp_path, "write")
    assert table.snapshot_manager.latest_id() is None and h.rows(table) == []
    assert h.data_files(table), "the killed tasks had written files"

    submit.run_until_paused("ingest", args, zip_path, tmp_path, "commit")
    assert table.snapshot_manager.latest_id() is None and h.rows(table) == []
    assert os.listdir(os.path.join(table.table_path, "manifest")), "manifests were written"

    done = submit.run("ingest", args, zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["snapshot_ids"] == [1] and not done.summary["skipped"]
    # the job's session default: Spark does not compress the already compressed pieces
    assert "session: spark.shuffle.compress=false" in done.output
    assert h.rows(table) == h.model([data])

    again = submit.run("ingest", args, zip_path, tmp_path)
    assert again.returncode == 0 and again.summary["skipped"] is True
    assert "session" not in again.summary["stages"]  # a committed run starts no Spark
    assert table.snapshot_manager.latest_id() == 1 and h.rows(table) == h.model([data])

    # what the killed attempts left is unreferenced: orphan removal takes exactly that
    time.sleep(1.1)
    report = remove_orphan_files(table, older_than=_seconds(1), dry_run=False)
    assert report.files_removed >= 1
    assert h.rows(table) == h.model([data])
    live = {f.file_name for s in table.new_read_builder().new_scan().plan().splits()
            for f in s.files}
    assert {os.path.basename(p) for p in h.data_files(table)} == live


def _seconds(n: float):
    from datetime import timedelta

    return timedelta(seconds=n)


@pytest.mark.database(POSTGRESQL)
def test_two_ingests_and_a_compaction_at_once_with_the_postgres_lock(
        zip_path, warehouse, tmp_path):
    url = database_url(POSTGRESQL)
    lock = ["--catalog-option", "lock.enabled=true", "--catalog-option", f"lock.uri={url}",
            "--catalog-option", f"catalog-key=spark-{uuid.uuid4().hex[:12]}"]
    table = h.create(warehouse)
    base = h.batches(3, rows=300)
    for i, b in enumerate(base, start=1):
        h.library_commit(table, b, i, "prefill")
    # two more batches with keys of their own (so the final state does not depend on order)
    extra = [h.batch([(h.DTS[k % 3], 100_000 * j + k, "+I") for k in range(400)], 10 + j)
             for j in (1, 2)]
    # the second ingest sets spark.shuffle.compress itself: the job keeps it
    procs = [submit.start("ingest", _table_args(
        warehouse, "--source", h.write_parquet(str(tmp_path / f"s{j}"), "b", b),
        "--commit-identifier", str(100 + j), *lock), zip_path, tmp_path,
        conf={"spark.shuffle.compress": "true"} if j else None)
        for j, b in enumerate(extra)]
    procs.append(submit.start("compact", _table_args(warehouse, "--full", *lock), zip_path,
                              tmp_path))
    results = [submit.finish(p) for p in procs]
    for r in results:
        assert r.returncode == 0, r.output[-5000:]
    assert "session: spark.shuffle.compress=false" in results[0].output
    assert "session: spark.shuffle.compress=true" in results[1].output
    assert h.rows(table) == h.model([*base, *extra])
    snaps = list(table.snapshot_manager.snapshots())
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1)) == list(range(1, 7))
    users = [s.commit_user for s in snaps[3:]]
    assert sorted(users) == sorted(r.summary["commit_user"] for r in results)
