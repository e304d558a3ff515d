"""``lakecore.spark.read_table``: executors read and merge, equal to the library's read."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from lakecore.spark import read_table
from tests.core.helpers import make_table, read, write
from tests.spark import helpers as h


def _sorted(df, keys):
    return sorted((r.asDict(recursive=True) for r in df.collect()),
                  key=lambda r: tuple(r[k] for k in keys))


def test_read_equals_library_with_time_travel_filter_projection(spark, warehouse):
    table = h.create(warehouse)
    data = h.batches(3, rows=120)
    for i, b in enumerate(data, start=1):
        h.library_commit(table, b, i, "lib")
    assert _sorted(read_table(spark, warehouse, "db.t"), h.KEY) == h.model(data)
    assert _sorted(read_table(spark, warehouse, "db.t", snapshot_id=1), h.KEY) == h.model(
        data[:1])
    day = h.DTS[1]
    got = _sorted(read_table(spark, warehouse, "db.t", filter=lambda pb: pb.equal("dt", day),
                             projection=["dt", "id", "v"]), h.KEY)
    assert got == [{"dt": r["dt"], "id": r["id"], "v": r["v"]} for r in h.model(data)
                   if r["dt"] == day]
    big = read_table(spark, warehouse, "db.t", filter=lambda pb: pb.greater_than("id", 100))
    assert sorted(r.id for r in big.collect()) == [r["id"] for r in sorted(
        h.model(data), key=lambda r: r["id"]) if r["id"] > 100]


def test_empty_table_reads_as_empty_dataframe_with_schema(spark, warehouse):
    h.create(warehouse)
    df = read_table(spark, warehouse, "db.t")
    assert df.columns == h.SCHEMA.names and df.count() == 0


def test_types_round_trip(spark, warehouse):
    schema = pa.schema([
        pa.field("k", pa.int32(), False), ("b", pa.bool_()), ("i8", pa.int8()),
        ("f", pa.float32()), ("d", pa.decimal128(12, 3)), ("s", pa.string()),
        ("bin", pa.binary()), ("day", pa.date32()), ("ts", pa.timestamp("us")),
        ("ltz", pa.timestamp("us", tz="UTC")),
    ])
    table = make_table(warehouse, schema, primary_keys=["k"], options={"bucket": "2"})
    row = {"k": 1, "b": True, "i8": -3, "f": 1.5, "d": decimal.Decimal("12.345"), "s": "é",
           "bin": b"\x00\x01", "day": dt.date(2026, 11, 1),
           "ts": dt.datetime(2026, 11, 1, 10, 0, 0, 123456),
           "ltz": dt.datetime(2026, 11, 1, 10, 0, tzinfo=dt.UTC)}
    empty = {k: None for k in row if k != "k"}
    write(table, pa.Table.from_pylist([row, {"k": 2, **empty}], schema=schema))
    got = read_table(spark, warehouse, "db.t").toArrow().sort_by("k")
    want = pa.Table.from_pylist(read(table, sort_by="k"), schema=schema)
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name), want.column(name)
        if pa.types.is_timestamp(w.type):
            g = g.cast(pa.timestamp("us", tz=w.type.tz))
        assert g.to_pylist() == w.to_pylist(), name


def test_read_across_schema_versions_and_time_travel(spark, warehouse):
    """Executors read each file through its own schema version; a snapshot from before an
    ALTER reads with the schema it was committed with, on the driver and the executors."""
    from lakecore import CatalogFactory, SchemaChange

    schema = pa.schema([pa.field("k", pa.int64(), False), ("a", pa.int32()), ("b", pa.string())])
    table = make_table(warehouse, schema, primary_keys=["k"], options={"bucket": "2"})
    write(table, pa.table({"k": [1, 2], "a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}))
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.alter_table("db.t", [SchemaChange.update_column_type("a", "BIGINT"),
                                 SchemaChange.rename_column("b", "label"),
                                 SchemaChange.add_column("c", "DOUBLE")])
    write(catalog.get_table("db.t"), pa.table({"k": [2, 3], "a": [5_000_000_000, 3],
                                               "label": ["y2", "z"], "c": [0.5, None]}))
    assert _sorted(read_table(spark, warehouse, "db.t"), ["k"]) == [
        {"k": 1, "a": 1, "label": "x", "c": None}, {"k": 2, "a": 5_000_000_000, "label": "y2",
                                                    "c": 0.5},
        {"k": 3, "a": 3, "label": "z", "c": None}]
    old = read_table(spark, warehouse, "db.t", snapshot_id=1)
    assert old.columns == ["k", "a", "b"]
    assert _sorted(old, ["k"]) == [{"k": 1, "a": 1, "b": "x"}, {"k": 2, "a": 2, "b": "y"}]
