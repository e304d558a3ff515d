"""Paimon's ``write.merge-schema`` in the Spark ingest: new source columns (and wider types)
become one ALTER on the driver before the write; without it the ingest refuses, naming the
column, and the table is unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.catalog import CatalogFactory
from lakecore.errors import SchemaError
from lakecore.spark.ingest import IngestRequest, ingest_dataframe, ingest_parquet
from tests.core.helpers import make_table, read
from tests.spark import helpers as h

pytestmark = pytest.mark.slow


def _request(ident: int, **kw: object) -> IngestRequest:
    return IngestRequest(ident, f"merge-schema-test-{ident}", **kw)  # type: ignore[arg-type]


def _latest(warehouse: str, name: str = "db.t"):  # type: ignore[no-untyped-def]
    return CatalogFactory.create({"warehouse": warehouse}).get_table(name)


def test_new_source_columns_are_added_when_asked_and_refused_otherwise(
        spark, warehouse, tmp_path):
    table = h.create(warehouse)
    first, second = h.batches(2, rows=30)
    path = h.write_parquet(str(tmp_path / "src"), "b1", first)
    ingest_parquet(spark, path, table, warehouse, _request(1))
    wider = second.append_column("channel", pa.array(["web"] * second.num_rows))
    src = h.write_parquet(str(tmp_path / "src"), "b2", wider)

    # not asked: refused on the driver, naming the column; nothing written, schema unchanged
    before = h.data_files(table)
    with pytest.raises(SchemaError, match=r"\['channel'\].*write.merge-schema"):
        ingest_parquet(spark, src, table, warehouse, _request(2))
    latest = _latest(warehouse)
    assert latest.schema.id == 0 and h.data_files(table) == before
    assert latest.snapshot_manager.latest_id() == 1

    # asked (the request's flag, as --merge-schema gives it): one ALTER, then the write
    result = ingest_parquet(spark, src, table, warehouse, _request(2, merge_schema=True))
    latest = _latest(warehouse)
    assert latest.schema.id == 1 and latest.schema.field_names == [*h.SCHEMA.names, "channel"]
    assert result.snapshot_ids == (2,)
    got = {(r["dt"], r["id"]): r["channel"] for r in h.rows(latest)}
    model = {(r["dt"], r["id"]): r for r in h.model([first, second])}
    assert set(got) == set(model)
    new_keys = {(r["dt"], r["id"]) for r in second.to_pylist() if r["op"] != "-D"}
    assert {k for k, v in got.items() if v == "web"} == new_keys
    assert all(v is None for k, v in got.items() if k not in new_keys)  # older rows: null


def test_table_option_merges_and_widens_through_a_dataframe(spark, warehouse, tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("n", pa.int32())])
    table = make_table(warehouse, schema, primary_keys=["id"],
                       options={"bucket": "1", "write.merge-schema": "true"})
    data = pa.table({"id": [1, 2], "n": pa.array([1, 2], pa.int32())})
    df = spark.createDataFrame(data.to_pandas())
    ingest_dataframe(spark, df, table, warehouse, _request(1))
    big = pa.table({"id": [3], "n": pa.array([2**40], pa.int64()), "note": ["x"]})
    result = ingest_dataframe(spark, spark.createDataFrame(big.to_pandas()), table, warehouse,
                              _request(2))
    latest = _latest(warehouse)
    assert [(f.name, str(f.type)) for f in latest.schema.fields] == [
        ("id", "BIGINT NOT NULL"), ("n", "BIGINT"), ("note", "STRING")]
    assert result.snapshot_ids == (2,)
    assert read(latest, sort_by=["id"]) == [
        {"id": 1, "n": 1, "note": None}, {"id": 2, "n": 2, "note": None},
        {"id": 3, "n": 2**40, "note": "x"}]
    # the request's flag overrides the table's option: off refuses
    more = pa.table({"id": [4], "n": [1], "note": ["y"], "extra": [1.0]})
    with pytest.raises(SchemaError, match=r"\['extra'\]"):
        ingest_dataframe(spark, spark.createDataFrame(more.to_pandas()), latest, warehouse,
                         _request(3, merge_schema=False))
    assert _latest(warehouse).schema.id == 1
