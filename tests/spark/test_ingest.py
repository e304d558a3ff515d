"""Distributed ingest through one shared local[2] session (library level, no spark-submit)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from lakecore.errors import SchemaError
from lakecore.format.snapshot import CommitKind
from lakecore.spark.ingest import IngestRequest, default_commit_user, ingest_dataframe
from lakecore.spark.messages import SparkTaskError, SparkTaskValidationError
from tests.spark import helpers as h


def _ingest(spark, table, warehouse, data: pa.Table, ident: int, tmp_path, **kw):
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), f"b{ident}", data))
    request = IngestRequest(ident, default_commit_user("ingest", table.identifier, ident), **kw)
    return ingest_dataframe(spark, df, table, warehouse, request)


def test_batches_equal_library_and_model(spark, warehouse, tmp_path):
    table = h.create(warehouse, "db.spark")
    twin = h.create(warehouse, "db.lib")
    data = h.batches(3)
    for ident, b in enumerate(data, start=1):
        result = _ingest(spark, table, warehouse, b, ident, tmp_path)
        h.library_commit(twin, b, ident, "lib")
        assert not result.skipped and len(result.snapshot_ids) == 1
        assert result.rows == b.num_rows
        # one task owned each (partition, bucket): exactly one new file per bucket touched
        per_bucket = h.files_per_bucket(table, result.snapshot_ids[0])
        assert set(per_bucket.values()) == {1}
        assert result.stats.files == len(per_bucket)
    assert h.rows(table) == h.rows(twin) == h.model(data)


def test_rerun_of_same_pair_commits_nothing_and_old_dates_still_commit(
        spark, warehouse, tmp_path):
    table = h.create(warehouse)
    data = h.batches(2)
    first = _ingest(spark, table, warehouse, data[0], 20261105, tmp_path)
    again = _ingest(spark, table, warehouse, data[0], 20261105, tmp_path)
    assert again.skipped and again.snapshot_ids == ()
    assert table.snapshot_manager.latest_id() == first.snapshot_ids[0]
    # an older run arriving later (a backfill) is its own commit user: it commits
    late = _ingest(spark, table, warehouse, data[1], 20261101, tmp_path)
    assert not late.skipped and late.snapshot_ids == (first.snapshot_ids[0] + 1,)
    assert h.rows(table) == h.model(data)


def test_static_and_dynamic_partition_overwrite(spark, warehouse, tmp_path):
    table = h.create(warehouse)
    base = h.batches(1)[0]
    _ingest(spark, table, warehouse, base, 1, tmp_path)
    day = h.DTS[0]
    fresh = h.batch([(day, 10_000 + i, "+I") for i in range(5)], 9)
    result = _ingest(spark, table, warehouse, fresh, 2, tmp_path,
                     overwrite_partition={"dt": day})
    snap = table.snapshot_manager.snapshot(result.snapshot_ids[0])
    assert snap.commit_kind is CommitKind.OVERWRITE
    got = h.rows(table)
    assert [r for r in got if r["dt"] == day] == fresh.to_pylist()
    assert [r for r in got if r["dt"] != day] == [r for r in h.model([base]) if r["dt"] != day]
    # dynamic: only the partitions in the source are replaced
    other = h.batch([(h.DTS[1], 20_000, "+I")], 10)
    _ingest(spark, table, warehouse, other, 3, tmp_path, dynamic_overwrite=True)
    got = h.rows(table)
    assert [r for r in got if r["dt"] == h.DTS[1]] == other.to_pylist()
    assert [r for r in got if r["dt"] == day] == fresh.to_pylist()


def test_static_overwrite_with_foreign_rows_fails_and_leaves_no_files(
        spark, warehouse, tmp_path):
    table = h.create(warehouse)
    _ingest(spark, table, warehouse, h.batches(1)[0], 1, tmp_path)
    before = h.data_files(table)
    mixed = h.batch([(h.DTS[0], 1, "+I"), (h.DTS[1], 2, "+I")], 5)
    with pytest.raises(Exception, match="does not belong to the overwritten partition"):
        _ingest(spark, table, warehouse, mixed, 2, tmp_path,
                overwrite_partition={"dt": h.DTS[0]})
    assert h.data_files(table) == before
    assert table.snapshot_manager.latest_id() == 1


@pytest.mark.parametrize("change, match", [
    (lambda t: t.drop_columns(["amount"]), r"missing column\(s\) \['amount'\]"),
    (lambda t: t.append_column("extra", pa.array([1] * t.num_rows)), r"\['extra'\]"),
    (lambda t: t.set_column(3, "amount", pa.array([[1.0]] * t.num_rows)), "column 'amount'"),
])
def test_source_schema_mismatch_names_the_column(spark, warehouse, tmp_path, change, match):
    table = h.create(warehouse)
    with pytest.raises(SchemaError, match=match):
        _ingest(spark, table, warehouse, change(h.batches(1, rows=5)[0]), 1, tmp_path)
    assert h.data_files(table) == [] and table.snapshot_manager.latest_id() is None


def test_bad_value_fails_before_any_file_is_written(spark, warehouse, tmp_path):
    """Stage 1 casts and checks every row; an unparsable value fails the job, naming it."""
    table = h.create(warehouse, bucket="4")
    data = h.batch([(h.DTS[i % 3], i, "+I") for i in range(200)], 1)
    amounts = [str(x) for x in data.column("amount").to_pylist()]
    amounts[-1] = "not-a-number"
    data = data.set_column(3, "amount", pa.array(amounts))
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), "bad", data))
    with pytest.raises(SparkTaskValidationError, match="column 'amount'.*not-a-number"):
        ingest_dataframe(spark, df, table, warehouse, IngestRequest(1, "u", parallelism=4))
    assert h.data_files(table) == []
    assert table.snapshot_manager.latest_id() is None


def test_failed_write_task_deletes_the_files_of_the_other_tasks(spark, warehouse, tmp_path):
    """One bucket cannot be written (its directory is a file): that task reports the error,
    the others finish, and the driver deletes every file they wrote before raising."""
    table = h.create(warehouse, bucket="4")
    data = h.batch([(h.DTS[i % 3], i, "+I") for i in range(400)], 1)
    blocked = os.path.join(table.table_path, f"dt={h.DTS[0]}", "bucket-1")
    os.makedirs(os.path.dirname(blocked))
    with open(blocked, "w") as f:
        f.write("not a directory")
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), "ok", data))
    with pytest.raises(SparkTaskError, match="write task failed"):
        ingest_dataframe(spark, df, table, warehouse, IngestRequest(1, "u", parallelism=4))
    assert h.data_files(table) == [blocked]
    assert table.snapshot_manager.latest_id() is None


def test_csv_strings_are_cast_and_a_bad_value_names_its_column(spark, warehouse, tmp_path):
    from lakecore.spark.sources import SourceFormat, load_source

    table = h.create(warehouse)
    src = tmp_path / "csv"
    src.mkdir()
    (src / "a.csv").write_text("dt,id,v,amount,ts,op\n2026-11-01,1,a,2.5,2026-11-01 10:00:00,+I\n"
                               "2026-11-02,2,,3,,+I\n")
    df = load_source(spark, path=str(src), fmt=SourceFormat.CSV)
    ingest_dataframe(spark, df, table, warehouse, IngestRequest(1, "u"))
    assert [(r["id"], r["v"], r["amount"]) for r in h.rows(table)] == [(1, "a", 2.5),
                                                                          (2, None, 3.0)]
    (src / "a.csv").write_text("dt,id,v,amount,ts,op\n2026-11-01,x,a,2.5,,+I\n")
    df = load_source(spark, path=str(src), fmt=SourceFormat.CSV)
    with pytest.raises(Exception, match="column 'id'"):
        ingest_dataframe(spark, df, table, warehouse, IngestRequest(2, "u"))


def test_append_table_without_buckets(spark, warehouse, tmp_path):
    from tests.core.helpers import make_table, read

    schema = pa.schema([("dt", pa.string()), ("x", pa.int64())])
    table = make_table(warehouse, schema, partition_keys=["dt"], name="db.log")
    data = pa.table({"dt": ["a", "b"] * 50, "x": list(range(100))}, schema=schema)
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), "log", data))
    result = ingest_dataframe(spark, df, table, warehouse, IngestRequest(1, "u"))
    assert result.rows == 100 and len(result.snapshot_ids) == 1
    assert sorted(r["x"] for r in read(table)) == list(range(100))


BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
RECORDS = "spark.sql.execution.arrow.maxRecordsPerBatch"


@pytest.mark.parametrize("rows_from_spark, cap", [(True, "2147483647"), (False, "4194304")])
def test_the_ingest_sets_its_arrow_batches_only_while_it_runs(spark, rows_from_spark, cap):
    """Fed the source's rows, the ingest lifts Spark's byte cap (Spark would size the batch
    after every row); reading files itself, it caps stage 2's batches of pieces at 4 MiB. The
    session's own settings come back after, unset ones unset, and one it set is kept."""
    from lakecore.spark.write_stage import arrow_batches

    with h.session_conf(spark, **{BYTES: None, RECORDS: None}):
        with arrow_batches(spark, rows_from_spark):
            assert (spark.conf.get(BYTES), spark.conf.get(RECORDS)) == (cap, "100000")
        assert (spark.conf.get(BYTES, None), spark.conf.get(RECORDS, None)) == (None, None)
        spark.conf.set(BYTES, "16m")
        spark.conf.set(RECORDS, "5000")
        with arrow_batches(spark, rows_from_spark):
            assert (spark.conf.get(BYTES), spark.conf.get(RECORDS)) == ("16m", "5000")
        assert (spark.conf.get(BYTES), spark.conf.get(RECORDS)) == ("16m", "5000")


def test_an_ingest_under_a_byte_cap_of_the_sessions_own_writes_every_row(
        spark, warehouse, tmp_path):
    """A session's own small byte cap is kept (many small batches into both stages)."""
    table = h.create(warehouse)
    data = h.batches(2)
    with h.session_conf(spark, **{BYTES: "4k"}):
        for ident, b in enumerate(data, start=1):
            _ingest(spark, table, warehouse, b, ident, tmp_path)
    assert h.rows(table) == h.model(data)
