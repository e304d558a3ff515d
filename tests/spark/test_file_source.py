"""Parquet sources read by the executors (``ingest_parquet``): same result as Spark's reader."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.errors import SchemaError
from lakecore.spark.file_source import hive_partitions, plan_parquet_source, read_units
from lakecore.spark.ingest import IngestRequest, ingest_dataframe, ingest_parquet
from lakecore.spark.messages import SparkTaskValidationError
from tests.spark import helpers as h


def _hive_layout(root, data: pa.Table) -> str:
    """``root/dt=<day>/part-0.parquet`` without the dt column, plus Spark's marker files."""
    for day in h.DTS:
        part = data.filter(pa.compute.equal(data.column("dt"), day)).drop_columns(["dt"])
        os.makedirs(root / f"dt={day}")
        pq.write_table(part, root / f"dt={day}" / "part-0.parquet")
    (root / "_SUCCESS").write_text("")
    (root / ".part-0.parquet.crc").write_text("x")
    return str(root)


def test_hive_directories_equal_spark_reader_and_library(spark, warehouse, tmp_path):
    data = h.batches(1, rows=400)[0]
    src = _hive_layout(tmp_path / "src", data)
    ours, theirs, lib = (h.create(warehouse, n) for n in ("db.ours", "db.spark", "db.lib"))
    result = ingest_parquet(spark, src, ours, warehouse, IngestRequest(1, "u"))
    ingest_dataframe(spark, spark.read.parquet(src), theirs, warehouse, IngestRequest(1, "u"))
    h.library_commit(lib, data, 1, "lib")
    assert result.rows == data.num_rows
    assert set(h.files_per_bucket(ours, result.snapshot_ids[0]).values()) == {1}
    assert h.rows(ours) == h.rows(theirs) == h.rows(lib) == h.model([data])


def test_one_big_file_is_read_by_several_tasks(spark, warehouse, tmp_path):
    data = h.batches(1, rows=3000)[0]
    path = str(tmp_path / "one.parquet")
    pq.write_table(data, path, row_group_size=500)
    units = read_units(plan_parquet_source(path), 4)
    assert len(units) > 1 and [u[1] for u in units] == list(range(0, 6, 6 // len(units)))
    assert sum(n for _, _, n in units) == 6
    table = h.create(warehouse)
    result = ingest_parquet(spark, path, table, warehouse, IngestRequest(1, "u"))
    assert set(h.files_per_bucket(table, result.snapshot_ids[0]).values()) == {1}
    assert h.rows(table) == h.model([data])


def test_bad_file_is_named_and_nothing_is_written(spark, warehouse, tmp_path):
    table = h.create(warehouse)
    good = h.batches(1, rows=50)[0]
    bad = good.set_column(1, "id", pa.array([None] * good.num_rows, pa.int64()))
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(good, src / "a.parquet")
    pq.write_table(bad, src / "b.parquet")
    with pytest.raises(SparkTaskValidationError, match=r"b\.parquet: primary key column 'id'"):
        ingest_parquet(spark, str(src), table, warehouse, IngestRequest(1, "u"))
    assert h.data_files(table) == [] and table.snapshot_manager.latest_id() is None
    with pytest.raises(SchemaError, match="does not exist"):
        ingest_parquet(spark, str(tmp_path / "nowhere"), table, warehouse, IngestRequest(1, "u"))


def test_hive_partitions_are_decoded_like_spark():
    assert hive_partitions("/s", "/s/dt=2026-11-01/h=a%2Fb/x.parquet") == [
        ("dt", "2026-11-01"), ("h", "a/b")]
    assert hive_partitions("/s", "/s/dt=__HIVE_DEFAULT_PARTITION__/x.parquet") == [("dt", None)]
    assert hive_partitions("/s", "/s/x.parquet") == []
