"""A postpone-bucket table (``bucket = -2``) on Spark: the ingest writes pending files, the
compaction job assigns them to real buckets and makes them visible (library level, the shared
session)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.compact.job import compact
from lakecore.format.snapshot import CommitKind
from lakecore.spark.compact import CompactRequest, compact_table
from lakecore.spark.ingest import IngestRequest, default_commit_user, ingest_dataframe
from tests.core.helpers import table_files
from tests.spark import helpers as h

pytestmark = pytest.mark.slow


def test_ingest_then_compaction_job_makes_postpone_data_visible(spark, warehouse, tmp_path):
    opts = {"bucket": "-2", "postpone.default-bucket-num": "2"}
    table = h.create(warehouse, "db.spark", **opts)
    twin = h.create(warehouse, "db.lib", **opts)
    data = h.batches(3, rows=150)
    for ident, b in enumerate(data, start=1):
        df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), f"b{ident}", b))
        request = IngestRequest(ident, default_commit_user("ingest", table.identifier, ident))
        result = ingest_dataframe(spark, df, table, warehouse, request)
        assert result.rows == b.num_rows and len(result.snapshot_ids) == 1
        h.library_commit(twin, b, ident, "lib")
    assert h.rows(table) == [] and h.rows(twin) == []
    pending = [f for f in table_files(table) if "/bucket-" in f]
    assert pending and all("/bucket-postpone/" in f for f in pending)

    out = compact_table(spark, table, warehouse, CompactRequest())
    compact(twin)
    assert len(out.snapshot_ids) == 1 and out.buckets_planned == len(h.DTS)
    assert table.snapshot_manager.latest().commit_kind is CommitKind.COMPACT
    assert h.rows(table) == h.rows(twin) == h.model(data)
    buckets = {s.bucket for s in table.new_read_builder().new_scan().plan().splits()}
    assert buckets == {0, 1}
    again = compact_table(spark, table, warehouse, CompactRequest())
    assert again.snapshot_ids == () and again.skipped_reason


def test_spark_submit_ingest_and_compaction_jobs_on_a_postpone_table(warehouse, tmp_path):
    """The jobs the DAGs run (spark-submit, lakecore shipped as the zip): the ingest leaves the
    rows pending, the compaction job (what the off-peak compaction DAG submits) shows them."""
    from tests.spark import submit

    zip_path = submit.build_zip()
    table = h.create(warehouse, "db.t", bucket="-2", **{"postpone.default-bucket-num": "2"})
    data = h.batches(1, rows=400)[0]
    source = h.write_parquet(str(tmp_path / "src"), "part-0", data)
    args = ["--warehouse", warehouse, "--table", "db.t"]
    done = submit.run("ingest", [*args, "--source", source, "--source-format", "parquet",
                                 "--commit-identifier", "1"], zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["rows"] == data.num_rows
    assert h.rows(table) == []
    done = submit.run("compact", args, zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["snapshot_ids"] == [2] and done.summary["buckets_planned"] == 3
    assert h.rows(table) == h.model([data])


def test_null_key_in_a_postpone_ingest_fails_and_leaves_nothing(spark, warehouse, tmp_path):
    from lakecore.spark.messages import SparkTaskValidationError

    table = h.create(warehouse, "db.t", bucket="-2")
    data = h.batches(1, rows=50)[0]
    ids = data.column("id").to_pylist()
    ids[7] = None
    bad = data.set_column(1, "id", pa.array(ids, pa.int64()))
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), "bad", bad))
    with pytest.raises(SparkTaskValidationError, match="primary key column 'id'"):
        ingest_dataframe(spark, df, table, warehouse, IngestRequest(1, "u"))
    assert h.data_files(table) == [] and table.snapshot_manager.latest_id() is None
