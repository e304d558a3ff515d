"""Spark's own Parquet reader on files Java Paimon wrote (``read_table``'s native path): field
ids and Paimon's encodings in the footers, Java's deletion vectors. Rows equal Java's read and
lakecore's. One Java Paimon oracle JVM for the module (``tests/javapaimon``)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.spark import read_table
from lakecore.spark.read import plan_read
from tests.javapaimon.client import (
    JavaPaimon,
    at,
    from_rows,
    paimon_fields,
    to_rows,
)
from tests.javapaimon.conftest import java_or_skip

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), False), pa.field("p", pa.string(), False), ("v", pa.string()),
    ("i", pa.int32()), ("d", pa.decimal128(10, 2)), ("day", pa.date32()),
    ("ms", pa.timestamp("ms")), ("us", pa.timestamp("us")), ("ltz", pa.timestamp("us", "UTC")),
    ("f", pa.float64()),
])


@pytest.fixture(scope="module")
def java_paimon() -> Iterator[JavaPaimon]:
    java_or_skip()
    with JavaPaimon() as jp:
        yield jp


def _rows(ids, version):
    return pa.Table.from_pylist([{
        "id": i, "p": "x" if i % 3 else "y", "v": None if i % 5 == 0 else f"v{i}-{version}",
        "i": i * version, "d": decimal.Decimal(f"{i}.{version:02d}"),
        "day": dt.date(2026, 1 + i % 12, 1 + i % 28),
        "ms": dt.datetime(2026, 11, 1, 0, 0, i % 60, 1000 * version),
        "us": dt.datetime(2026, 11, 1, 0, 0, 0, i * 7 + version),
        "ltz": dt.datetime(2026, 11, 1, i % 24, 0, tzinfo=dt.UTC), "f": i / 8,
    } for i in ids], schema=SCHEMA)


def _canon(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=lambda r: (r[0], r[1]))


def _spark(df) -> pa.Table:
    got = df.toArrow()
    cols = [c.cast(f.type) if pa.types.is_timestamp(f.type) else c
            for c, f in zip(got.columns, SCHEMA)]
    return pa.Table.from_arrays(cols, schema=SCHEMA)


def _lakecore(wh: Path) -> pa.Table:
    table = CatalogFactory.create({"warehouse": str(wh)}).get_table("db.t")
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).cast(SCHEMA)


@pytest.mark.parametrize("dv,fmt", [("false", "parquet"), ("true", "parquet"),
                                    ("false", "orc"), ("true", "orc")])
def test_spark_reads_javas_compacted_files_natively(spark, java_paimon, tmp_path, dv, fmt):
    """Parquet files, with or without Java's deletion vectors, and ORC files without vectors
    are read by Spark's own readers; ORC files with vectors go the Python way (Spark gives
    an ORC row no ``_metadata.row_index``)."""
    jp, wh, t = java_paimon, tmp_path, at(tmp_path)
    jp.call("create", **t, fields=paimon_fields(SCHEMA), primary_keys=["id", "p"],
            partition_keys=["p"], options={"bucket": "2", "deletion-vectors.enabled": dv,
                                           "file.format": fmt})
    jp.call("write", **t, rows=to_rows(_rows(range(60), 1)))
    jp.call("compact", **t, full=True)
    changed = _rows([1, 3, 4, 70], 2)
    jp.call("write", **t, rows=to_rows(changed), row_kinds=["+U", "-D", "+U", "+I"])
    jp.call("compact", **t, full=dv == "false")  # DV: Java's vectors mark what changed
    if fmt == "orc":  # timestamps in ORC go the Python way (native_plan); the rest native
        no_ts = [f.name for f in SCHEMA if not pa.types.is_timestamp(f.type)]
        assert plan_read(str(wh), "db.t").plan.native_files == ()
        df = read_table(spark, str(wh), "db.t", projection=no_ts)
        java = from_rows(jp.call("read", **t), SCHEMA).select(no_ts)
        assert sorted(df.toArrow().to_pylist(), key=lambda r: (r["id"], r["p"])) \
            == sorted(java.to_pylist(), key=lambda r: (r["id"], r["p"]))
    plan = plan_read(str(wh), "db.t", projection=no_ts if fmt == "orc" else None).plan
    assert {f.format for f in plan.native_files} <= {fmt}
    if fmt == "orc" and dv == "true":
        assert plan.merge_splits and all(f.deletion_file is None for f in plan.native_files)
    else:
        assert plan.merge_splits == () and plan.groups
    if dv == "true" and fmt == "parquet":
        assert any(f.deletion_file is not None for f in plan.native_files)
    df = read_table(spark, str(wh), "db.t")
    java = from_rows(jp.call("read", **t), SCHEMA)
    got = _canon(_spark(df))
    assert got == _canon(java) == _canon(_lakecore(wh))
    assert len(got) == 60 and not any(r[0] == 3 for r in got)
