"""Data files other writers make: their own nullability and encodings, Avro and ORC.

Real files throughout: a lakecore table whose data files are rewritten the way other Parquet
writers lay them out, and Avro / ORC files written with fastavro and pyarrow."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from lakecore.errors import CorruptFileError, UnsupportedFeatureError
from lakecore.io.avro_file import iter_avro_file
from lakecore.io.formats import conform_chunk, format_of, read_schema
from lakecore.io.orc_file import iter_orc_file
from lakecore.schema.types import RowType, from_arrow
from lakecore.store.file_io import FileIO
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), False),
    pa.field("dt", pa.string(), False),
    ("i8", pa.int8()),
    ("s", pa.string()),
    ("ts", pa.timestamp("ms")),
    ("tags", pa.list_(pa.int32())),
    ("m", pa.decimal128(10, 2)),
    ("st", pa.struct([("a", pa.int32()), ("b", pa.string())])),
])
KEY = ["dt", "id"]


def _rows(version: int, ids: range) -> pa.Table:
    return pa.Table.from_pylist([
        {"id": i, "dt": "d1" if i % 2 else "d2", "i8": (i * 7 + version) % 100 - 50,
         "s": None if i % 5 == 0 else f"s{i % 3}-{version}",
         "ts": dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=i * 1001 + version),
         "tags": [i, version] if i % 4 else None,
         "m": decimal.Decimal(i * 13 + version).scaleb(-2),
         "st": {"a": i, "b": f"b{version}"}}
        for i in ids], schema=SCHEMA)


def _foreign_layout(t: pa.Table) -> pa.Table:
    """The same rows as another writer lays them out: every column declared nullable (the
    value copy of the key included, as pypaimon does), strings dictionary-encoded or large,
    a TINYINT stored as int32, milliseconds as microseconds, the list element named
    ``element`` (parquet-mr's spelling)."""
    cols, fields = [], []
    for name, col in zip(t.column_names, t.columns):
        if name == "s":
            col = col.dictionary_encode()
        elif name == "dt":
            col = col.cast(pa.large_string())
        elif name == "i8":
            col = col.cast(pa.int32())
        elif name == "ts":
            col = col.cast(pa.timestamp("us"))
        elif name == "tags":
            col = col.cast(pa.list_(pa.field("element", pa.int32())))
        cols.append(col)
        fields.append(pa.field(name, col.type, True))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def _data_files(table) -> list[str]:
    return [f"{table.paths.data_file_path(s.partition, s.bucket, f.file_name)}"
            for s in table.new_read_builder().new_scan().plan().splits() for f in s.files]


@pytest.mark.parametrize("store_schema", [True, False], ids=["arrow-schema", "bare-parquet"])
def test_other_writers_parquet_layout_reads_and_compacts(tmp_path: Path, store_schema: bool):
    t = make_table(str(tmp_path), SCHEMA, primary_keys=KEY, partition_keys=["dt"],
                   options={"bucket": "2", "write-only": "true"})
    write(t, _rows(1, range(40)))
    write(t, _rows(2, range(0, 40, 3)))
    want = read(t, sort_by=KEY)
    for path in _data_files(t):
        foreign = _foreign_layout(pq.read_table(path))
        pq.write_table(foreign, path, store_schema=store_schema)
        assert pq.read_schema(path).field("_KEY_id").nullable
    assert read(t, sort_by=KEY) == want
    t.compact(full=True)
    assert read(t, sort_by=KEY) == want
    # the compacted files are lakecore's own layout again
    from lakecore.io.specs import file_writer_spec

    spec = file_writer_spec(t)
    for path in _data_files(t):
        assert pq.read_schema(path).remove_metadata() == spec.file_schema


def test_a_null_where_the_table_says_not_null_is_a_corrupt_file(tmp_path: Path):
    t = make_table(str(tmp_path), SCHEMA, primary_keys=KEY, partition_keys=["dt"],
                   options={"bucket": "1"})
    write(t, _rows(1, range(10)))
    write(t, _rows(2, range(10)))  # two overlapping runs: the compaction must rewrite
    path = _data_files(t)[0]
    data = _foreign_layout(pq.read_table(path))
    nulls = pa.array([None] * data.num_rows, pa.int64())
    for name in ("_KEY_id", "id"):
        i = data.column_names.index(name)
        data = data.set_column(i, pa.field(name, pa.int64()), nulls)
    pq.write_table(data, path)
    with pytest.raises(CorruptFileError, match="id' is NOT NULL in the table"):
        read(t)
    with pytest.raises(CorruptFileError, match=path.rsplit("/", 1)[-1]):
        t.compact(full=True)


JAVA_AVRO = {  # the layout Paimon's AvroSchemaConverter gives these types
    "type": "record", "name": "record", "namespace": "org.apache.paimon.avro.generated",
    "fields": [
        {"name": "_KEY_k", "type": "long"},
        {"name": "_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_VALUE_KIND", "type": "int"},
        {"name": "k", "type": "long"},
        {"name": "sm", "type": ["null", "int"]},
        {"name": "d", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                        "precision": 10, "scale": 2}]},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "lts", "type": ["null", {"type": "long",
                                          "logicalType": "local-timestamp-millis"}]},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "tm", "type": ["null", {"type": "int", "logicalType": "time-millis"}]},
        {"name": "fx", "type": ["null", {"type": "fixed", "name": "fx4", "size": 4}]},
        {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "int"]}]},
        {"name": "m", "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "record_m", "fields": [
                {"name": "key", "type": "int"},
                {"name": "value", "type": ["null", "string"]}]}}]},
        {"name": "sm2", "type": ["null", {"type": "map", "values": "long"}]},
        {"name": "r", "type": ["null", {"type": "record", "name": "record_r", "fields": [
            {"name": "a", "type": ["null", "int"]}]}]},
    ],
}
TABLE_TYPES = pa.schema([
    pa.field("k", pa.int64(), False), ("sm", pa.int16()), ("d", pa.decimal128(10, 2)),
    ("ts", pa.timestamp("us")), ("lts", pa.timestamp("ms", tz="UTC")), ("day", pa.date32()),
    ("tm", pa.time32("ms")), ("fx", pa.binary(4)), ("tags", pa.list_(pa.int32())),
    ("m", pa.map_(pa.int32(), pa.string())), ("sm2", pa.map_(pa.string(), pa.int64())),
    ("r", pa.struct([("a", pa.int32())])),
])


def _avro_records(n: int) -> list[dict]:
    t0 = dt.datetime(2024, 5, 1, 8, 30, tzinfo=dt.UTC)
    return [{
        "_KEY_k": i, "_SEQUENCE_NUMBER": 100 + i, "_VALUE_KIND": 0 if i % 3 else 3, "k": i,
        "sm": None if i == 2 else -i,
        "d": decimal.Decimal(i * 101).scaleb(-2),
        "ts": t0 + dt.timedelta(microseconds=i * 1_000_001),
        "lts": dt.datetime(2024, 5, 1, 8, 30) + dt.timedelta(milliseconds=i),
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "tm": dt.time(12, 0, i % 60),
        "fx": bytes([i % 256]) * 4,
        "tags": [i, None] if i % 2 else None,
        "m": [{"key": i, "value": "x"}, {"key": -i, "value": None}],
        "sm2": {"a": i},
        "r": {"a": i},
    } for i in range(n)]


def test_avro_files_in_paimons_layout_read_as_the_table_types(tmp_path: Path):
    path = str(tmp_path / "data-1.avro")
    records = _avro_records(7)
    with open(path, "wb") as fh:
        fastavro.writer(fh, JAVA_AVRO, records, codec="deflate")
    row_type = RowType(from_arrow(pa.struct(list(TABLE_TYPES))).fields)
    columns = ["_KEY_k", "_SEQUENCE_NUMBER", "_VALUE_KIND", *TABLE_TYPES.names]
    target = read_schema(row_type, columns)
    fio = FileIO(pafs.LocalFileSystem())
    chunks = [conform_chunk(c, target, path)
              for c in iter_avro_file(fio, path, columns, chunk_rows=3, targets=target)]
    assert [c.num_rows for c in chunks] == [3, 3, 1]
    got = pa.concat_tables(chunks)
    assert got.schema.field("_VALUE_KIND").type == pa.int8()
    assert got.select(TABLE_TYPES.names).schema.equals(
        pa.schema([target.field(n) for n in TABLE_TYPES.names]))
    rows = got.to_pylist()
    assert rows[1]["ts"] == dt.datetime(2024, 5, 1, 8, 30, 1, 1)  # the instant, naive UTC
    assert rows[3]["lts"] == dt.datetime(2024, 5, 1, 8, 30, 0, 3000, tzinfo=dt.UTC)
    assert rows[2]["sm"] is None and rows[3]["sm"] == -3
    assert rows[4]["m"] == [(4, "x"), (-4, None)]
    assert rows[5]["sm2"] == [("a", 5)]
    assert rows[5]["tags"] == [5, None] and rows[4]["tags"] is None
    assert rows[6]["d"] == decimal.Decimal("6.06") and rows[6]["fx"] == b"\x06" * 4
    assert [r["_VALUE_KIND"] for r in rows] == [3, 0, 0, 3, 0, 0, 3]
    # only the asked-for columns, in the asked-for order; an absent one is left out
    fewer = next(iter_avro_file(fio, path, ["k", "nope", "sm"], chunk_rows=None))
    assert fewer.column_names == ["k", "sm"] and fewer.num_rows == 7


def test_broken_avro_file_is_a_corrupt_file(tmp_path: Path):
    path = tmp_path / "data-1.avro"
    path.write_bytes(b"Obj\x01 not really avro")
    fio = FileIO(pafs.LocalFileSystem())
    with pytest.raises(CorruptFileError, match="Avro"):
        list(iter_avro_file(fio, str(path), ["k"], chunk_rows=10))


def test_orc_files_are_read_stripe_by_stripe(tmp_path: Path):
    path = str(tmp_path / "data-1.orc")
    n = 50_000
    data = pa.table({"k": pa.array(range(n), pa.int64()),
                     "s": [f"value-{i}" for i in range(n)],
                     "ts": pa.array(range(n), pa.timestamp("ms"))})
    orc.write_table(data, path, stripe_size=64 * 1024)
    assert orc.ORCFile(path).nstripes > 1
    fio = FileIO(pafs.LocalFileSystem())
    chunks = list(iter_orc_file(fio, path, ["ts", "k"], chunk_rows=4000))
    assert all(0 < c.num_rows <= 4000 for c in chunks)
    got = pa.concat_tables(chunks)
    assert got.column_names == ["ts", "k"] and got.column("k").to_pylist() == list(range(n))
    target = pa.schema([pa.field("ts", pa.timestamp("ms")), pa.field("k", pa.int64(), False)])
    assert conform_chunk(got, target, path).schema == target  # ORC's nanoseconds cast back
    whole = list(iter_orc_file(fio, path, ["k"], chunk_rows=None))
    assert len(whole) == 1 and whole[0].num_rows == n


@pytest.mark.parametrize("name", ["data-1.json", "data-1", "data-1.lance"])
def test_formats_lakecore_cannot_read_are_named(name: str):
    with pytest.raises(UnsupportedFeatureError, match="parquet, orc, avro"):
        format_of(f"/t/bucket-0/{name}")
    assert format_of("/t/bucket-0/data-1.PARQUET") == "parquet"
