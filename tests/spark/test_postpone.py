"""A postpone-bucket table (``bucket = -2``) on Spark: the ingest writes pending files, the
compaction job assigns them to real buckets and makes them visible (library level, the shared
session).

No spark-submit run here: for a table without fixed buckets the ingest job's Parquet path is
``ingest_dataframe`` over Spark's reader and the compaction job is ``plan_compact`` then
``compact_table``, the functions tested below; the jobs themselves go through the real
spark-submit with the zip in ``test_submit.py`` (each submit costs 15-40 s)."""

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
