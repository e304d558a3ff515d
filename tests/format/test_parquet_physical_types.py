"""The Parquet types lakecore writes, per Paimon type and precision: Paimon's
(``ParquetSchemaConverter``, ``ParquetRowDataWriter``), restated here from Paimon's rules, not
from lakecore's. Then round trips through lakecore (writes, compaction, rolled files), the
statistics and filter pushdown on such columns, the INT96 bytes against Paimon's arithmetic, the
footer codec, and files lakecore wrote before (every DECIMAL as FIXED_LEN_BYTE_ARRAY,
TIMESTAMP(p > 6) as INT64 nanoseconds, TIME(p > 3) as INT64, BINARY(n) as FIXED_LEN_BYTE_ARRAY),
which still read. Java Paimon reading and filtering these files: tests/javapaimon/
test_parquet_types_java.py.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.format.binary_row import decode_row
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io import parquet_footer
from lakecore.io.data_file_writer import FileWriterSpec, RollingFileWriter
from lakecore.io.parquet_layout import ParquetLayout, int96_values, parquet_layout
from lakecore.io.specs import file_writer_spec
from lakecore.schema.types import DataField, DataType, TypeRoot, arrow_schema, parse_type
from lakecore.table import FileStoreTable

D = decimal.Decimal
NS = pd.Timestamp


# ------------------------------------------------------------------ Paimon's rules, restated

def min_bytes(precision: int) -> int:
    """ParquetSchemaConverter.computeMinBytesForDecimalPrecision."""
    n = 1
    while math.pow(2.0, 8 * n - 1) < math.pow(10.0, precision):
        n += 1
    return n


def paimon_parquet_type(t: DataType) -> tuple[str, dict[str, Any], int | None]:
    """(physical type, logical annotation as pyarrow's JSON, FLBA length) Paimon 1.4.2 writes
    for an atomic type."""
    r = t.root
    none: dict[str, Any] = {"Type": "None"}
    if r is TypeRoot.DECIMAL:
        p, s = t.precision or 0, t.scale or 0
        ann = {"Type": "Decimal", "precision": p, "scale": s}
        if p <= 9:
            return "INT32", ann, None
        if p <= 18:
            return "INT64", ann, None
        return "FIXED_LEN_BYTE_ARRAY", ann, min_bytes(p)
    if r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        p = t.precision or 0
        if p > 6:
            return "INT96", none, None
        return "INT64", {"Type": "Timestamp",
                         "isAdjustedToUTC": r is TypeRoot.TIMESTAMP_LTZ,
                         "timeUnit": "milliseconds" if p <= 3 else "microseconds",
                         "is_from_converted_type": False,
                         "force_set_converted_type": False}, None
    if r is TypeRoot.TIME:
        # Paimon annotates TIME(MILLIS) with isAdjustedToUTC=true; Arrow 26 writes false (see
        # test_time_annotation_differs_only_in_its_utc_flag)
        return "INT32", {"Type": "Time", "isAdjustedToUTC": False,
                         "timeUnit": "milliseconds"}, None
    if r in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        return "BYTE_ARRAY", none, None
    if r in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        return "BYTE_ARRAY", {"Type": "String"}, None
    simple = {TypeRoot.BOOLEAN: ("BOOLEAN", none), TypeRoot.INT: ("INT32", none),
              TypeRoot.BIGINT: ("INT64", none), TypeRoot.FLOAT: ("FLOAT", none),
              TypeRoot.DOUBLE: ("DOUBLE", none), TypeRoot.DATE: ("INT32", {"Type": "Date"}),
              TypeRoot.TINYINT: ("INT32", {"Type": "Int", "bitWidth": 8, "isSigned": True}),
              TypeRoot.SMALLINT: ("INT32", {"Type": "Int", "bitWidth": 16, "isSigned": True})}
    physical, ann = simple[r]
    return physical, ann, None


# every precision of DECIMAL, TIMESTAMP, TIMESTAMP_LTZ and TIME, and the other atomic types
ATOMIC = (
    [(f"d{p}", f"DECIMAL({p}, {min(p, 2)})") for p in range(1, 39)]
    + [(f"ts{p}", f"TIMESTAMP({p})") for p in range(10)]
    + [(f"ltz{p}", f"TIMESTAMP({p}) WITH LOCAL TIME ZONE") for p in range(10)]
    + [(f"t{p}", f"TIME({p})") for p in range(10)]
    + [("bin4", "BINARY(4)"), ("vbin", "BYTES"), ("c3", "CHAR(3)"), ("s", "STRING"),
       ("b", "BOOLEAN"), ("i8", "TINYINT"), ("i16", "SMALLINT"), ("i32", "INT"),
       ("f32", "FLOAT"), ("f64", "DOUBLE"), ("day", "DATE")]
)


def _nested() -> list[tuple[str, DataType]]:
    ts9, d52, d184 = (parse_type(s) for s in ("TIMESTAMP(9)", "DECIMAL(5, 2)",
                                             "DECIMAL(18, 4)"))
    return [
        ("a_ts9", DataType(TypeRoot.ARRAY, element=ts9)),
        ("m_d52", DataType(TypeRoot.MAP, key=parse_type("INT NOT NULL"), value=d52)),
        ("r", DataType(TypeRoot.ROW, fields=(
            DataField(100, "x", ts9), DataField(101, "y", d184),
            DataField(102, "z", parse_type("TIMESTAMP(3)"))))),
    ]


def make(wh: Path, columns: list[tuple[str, DataType]], pk: tuple[str, ...] = ("id",),
         name: str = "db.t", **options: str) -> FileStoreTable:
    catalog = CatalogFactory.create({"warehouse": str(wh)})
    catalog.create_database("db", ignore_if_exists=True)
    fields = [DataField(0, "id", parse_type("BIGINT NOT NULL"))]
    fields += [DataField(i + 1, n, t) for i, (n, t) in enumerate(columns)]
    opts = {"bucket": "1"} if pk else {}
    catalog.create_table(name, Schema(tuple(fields), primary_keys=pk,
                                      options={**opts, **options}))
    return catalog.get_table(name)


def write(table: FileStoreTable, rows: list[dict[str, Any]]) -> None:
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    try:
        w.write_arrow(pa.Table.from_pylist(rows, schema=arrow_schema(
            table.schema.row_type.fields)))
        wb.new_commit().commit(w.prepare_commit())
    finally:
        w.close()


def read(table: FileStoreTable, predicate: Any = None) -> list[dict[str, Any]]:
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate(rb.new_predicate_builder()))
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def files(table: FileStoreTable, predicate: Any = None) -> list[DataFileMeta]:
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate(rb.new_predicate_builder()))
    return [f for s in rb.new_scan().plan().splits() for f in s.files]


def file_paths(table: FileStoreTable) -> list[str]:
    return [table.paths.data_file_path((), 0, f.file_name, None) for f in files(table)]


def parquet_columns(path: Any) -> dict[str, tuple[str, dict[str, Any], int | None]]:
    """Each leaf column's (physical type, logical annotation, FLBA length), by dotted path."""
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        c = schema.column(i)
        length = c.length if c.physical_type == "FIXED_LEN_BYTE_ARRAY" else None
        out[c.path] = (c.physical_type, json.loads(c.logical_type.to_json()), length)
    return out


# ------------------------------------------------------------------ physical types

@pytest.mark.parametrize("pk", [("id",), ()], ids=["primary-key", "append"])
def test_every_type_and_precision_gets_paimons_parquet_type(tmp_path: Path,
                                                            pk: tuple[str, ...]) -> None:
    columns = [(n, parse_type(t)) for n, t in ATOMIC] + _nested()
    table = make(tmp_path, columns, pk=pk)
    write(table, [{"id": 1}])
    (path,) = file_paths(table)
    got = parquet_columns(path)
    for name, t in columns[:len(ATOMIC)]:
        assert got[name] == paimon_parquet_type(t), name
    ts9 = paimon_parquet_type(parse_type("TIMESTAMP(9)"))
    assert got["a_ts9.list.element"] == ts9
    assert got["m_d52.key_value.value"] == paimon_parquet_type(parse_type("DECIMAL(5, 2)"))
    assert got["r.x"] == ts9
    assert got["r.y"] == paimon_parquet_type(parse_type("DECIMAL(18, 4)"))
    assert got["r.z"] == paimon_parquet_type(parse_type("TIMESTAMP(3)"))
    if pk:
        assert got["_KEY_id"] == ("INT64", {"Type": "None"}, None)
    # INT96 columns have no Parquet statistics (parquet-mr writes no min/max for them);
    # every other column keeps Arrow's
    meta = pq.ParquetFile(path).metadata.row_group(0)
    for i in range(meta.num_columns):
        c = meta.column(i)
        assert (c.statistics is None) == (c.physical_type == "INT96"), c.path_in_schema


def test_a_file_with_int96_and_int64_timestamps_keeps_each_columns_type(tmp_path: Path
                                                                      ) -> None:
    """Arrow's INT96 switch is per file: a TIMESTAMP(3), a TIMESTAMP(6) and a TIMESTAMP(9)
    column side by side each keep Paimon's type, and Arrow's stored schema is the table's."""
    columns = [(n, parse_type(t)) for n, t in [
        ("ts3", "TIMESTAMP(3)"), ("ts9", "TIMESTAMP(9)"), ("ts6", "TIMESTAMP(6)"),
        ("ltz9", "TIMESTAMP(9) WITH LOCAL TIME ZONE"),
        ("ltz3", "TIMESTAMP(3) WITH LOCAL TIME ZONE")]]
    table = make(tmp_path, columns, pk=())
    value = NS("2024-01-02 03:04:05.123456789")
    write(table, [{"id": 1, "ts3": value.floor("ms"), "ts9": value, "ts6": value.floor("us"),
                   "ltz9": value.tz_localize("UTC"), "ltz3": value.floor("ms").tz_localize("UTC")}])
    (path,) = file_paths(table)
    got = {k: v[0] for k, v in parquet_columns(path).items()}
    assert got == {"id": "INT64", "ts3": "INT64", "ts9": "INT96", "ts6": "INT64",
                   "ltz9": "INT96", "ltz3": "INT64"}
    stored = pq.ParquetFile(path).metadata.metadata[b"ARROW:schema"]
    assert pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored))).equals(
        arrow_schema(table.schema.row_type.fields))
    back = pq.read_table(path)  # INT96 reads as timestamp[ns] (no time zone: Arrow's rule)
    assert back.schema.field("ts9").type == back.schema.field("ltz9").type == pa.timestamp("ns")
    assert back.column("ts9")[0].as_py() == back.column("ltz9")[0].as_py() == value
    assert read(table)[0]["ltz9"] == value.tz_localize("UTC")


def test_decimal_fixed_lengths_are_paimons_for_every_wide_precision() -> None:
    schema = pa.schema([(f"d{p}", pa.decimal128(p, 0)) for p in range(19, 39)])
    buf = pa.BufferOutputStream()
    layout = parquet_layout(schema)
    with pq.ParquetWriter(buf, layout.schema,
                          store_decimal_as_integer=layout.decimals_as_integers) as w:
        w.write_table(pa.Table.from_pylist([{}], schema=schema))
    got = parquet_columns(pa.BufferReader(buf.getvalue()))
    assert {n: c[2] for n, c in got.items()} == {f"d{p}": min_bytes(p) for p in range(19, 39)}


# ------------------------------------------------------------------ round trips

def _values(i: int) -> dict[str, Any]:
    """Row ``i``: extreme and pre-1970 values per precision (ns timestamps within Arrow's
    range), nulls in row 2."""
    if i == 2:
        return {"id": 2}
    sign = -1 if i % 2 else 1
    row: dict[str, Any] = {"id": i}
    for p in range(1, 39):
        s = min(p, 2)
        digits = 10 ** p - 1 - i  # the widest value of the precision, then smaller ones
        row[f"d{p}"] = D(f"{sign * digits}E-{s}")
    base = NS("1969-12-31 23:59:59.999999999") if i % 2 else NS("2261-12-31 12:34:56.987654321")
    base = base - pd.Timedelta(days=400 * i, nanoseconds=i)
    for p in range(10):
        unit = "s" if p == 0 else "ms" if p <= 3 else "us" if p <= 6 else "ns"
        v = base.floor(unit) if unit != "ns" else base
        row[f"ts{p}"] = v
        row[f"ltz{p}"] = v.tz_localize("UTC")
        micros = 999_999 - i if p > 3 else 999_000 - 1000 * i  # TIME(p <= 3): time32[ms]
        row[f"t{p}"] = dt.time(23, 59, 59 - i, micros)
    row.update(bin4=bytes([i, 0, 255, 7]), vbin=b"\x00" * i, c3="abc", s="héllo", b=bool(i % 2),
               i8=-128 + i, i16=32767 - i, i32=-(2 ** 31) + i, f32=1.5 * i, f64=-2.25 * i,
               day=dt.date(1, 1, 1) + dt.timedelta(days=i),
               a_ts9=[base, None, NS("1970-01-01")], m_d52=[(1, D("-999.99")), (2, None)],
               r={"x": base, "y": D("-99999999999999.9999"), "z": base.floor("ms")})
    return row


def _expected(row: dict[str, Any]) -> dict[str, Any]:
    """What a read returns: TIME keeps milliseconds (Paimon's TIME is a millisecond of the
    day), everything else as written."""
    out = {name: None for name, _ in ATOMIC}
    out.update(a_ts9=None, m_d52=None, r=None)
    out.update(row)
    for p in range(10):
        t = out[f"t{p}"]
        if t is not None:
            out[f"t{p}"] = t.replace(microsecond=t.microsecond // 1000 * 1000)
    return out


def _normal(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with timestamps as pandas' (a datetime and an equal Timestamp compare equal, but a
    Timestamp keeps nanoseconds)."""
    def norm(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return NS(v)
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, tuple):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v
    return [norm(r) for r in rows]


@pytest.mark.parametrize("pk", [("id",), ()], ids=["primary-key", "append"])
def test_round_trip_of_every_type_and_precision(tmp_path: Path, pk: tuple[str, ...]) -> None:
    columns = [(n, parse_type(t)) for n, t in ATOMIC] + _nested()
    table = make(tmp_path, columns, pk=pk)
    rows = [_values(i) for i in range(4)]
    write(table, rows[:2])
    write(table, rows[2:])
    want = _normal([_expected(r) for r in rows])
    assert _normal(read(table)) == want
    if pk:
        table.compact(full=True)  # read INT96 / INT32 / INT64 columns, written again
        assert len(files(table)) == 1
        assert _normal(read(table)) == want
        (path,) = file_paths(table)
        assert parquet_columns(path)["ts9"][0] == "INT96"


def test_rolled_files_and_row_groups_with_int96_keys(tmp_path: Path) -> None:
    """A TIMESTAMP(9) primary key over many row groups and rolled files: every footer is
    rewritten (one INT96 key column, one INT96 value column), every row reads back, and each
    file's key range, key statistics and value statistics hold its rows."""
    table = make(tmp_path, [("ts", parse_type("TIMESTAMP(9) NOT NULL")),
                            ("v", parse_type("TIMESTAMP(9) WITH LOCAL TIME ZONE")),
                            ("d", parse_type("DECIMAL(9, 3)"))],
                 pk=("ts",), **{"target-file-size": "256 kb", "metadata.stats-mode": "full"})
    n = 30_000
    start = NS("1969-12-31 23:59:59.999").value
    stamps = pd.to_datetime(start + np.arange(n, dtype=np.int64) * 999_999_937)
    rows = [{"id": i, "ts": stamps[i], "v": None if i % 5 == 0 else stamps[n - 1 - i]
             .tz_localize("UTC"), "d": D(i).scaleb(-3)} for i in range(n)]
    write(table, rows)
    fs = files(table)
    assert len(fs) > 1
    groups = 0
    for path in file_paths(table):
        md = pq.ParquetFile(path).metadata
        assert md.schema.column(0).physical_type == "INT96"
        groups += md.num_row_groups
    assert groups > len(fs)
    back = read(table)
    assert [r["ts"] for r in sorted(back, key=lambda r: r["ts"])] == list(stamps)
    by_id = {r["id"]: r for r in back}
    assert all(by_id[r["id"]]["v"] == r["v"] for r in rows)
    types = {f.name: f.type for f in table.schema.row_type.fields}
    key_type = [types["ts"]]
    for f in fs:
        path = table.paths.data_file_path((), 0, f.file_name, None)
        data = pq.read_table(path, columns=["ts", "v"])
        lo, hi = data.column("ts")[0].as_py(), data.column("ts")[-1].as_py()
        assert decode_row(f.min_key, key_type) == (lo,) == decode_row(f.key_stats.min_values,
                                                                       key_type)
        assert decode_row(f.max_key, key_type) == (hi,) == decode_row(f.key_stats.max_values,
                                                                       key_type)
        names = list(f.value_stats_cols or table.schema.row_type.names)
        at = names.index("v")
        vtypes = [types[x] for x in names]
        v = data.column("v")
        lo, hi = (NS(x.as_py()).tz_localize("UTC") for x in (pc.min(v), pc.max(v)))
        assert decode_row(f.value_stats.min_values, vtypes)[at] == lo
        assert decode_row(f.value_stats.max_values, vtypes)[at] == hi
        assert f.value_stats.null_counts[at] == v.null_count


def test_an_aborted_int96_file_is_deleted_and_a_closed_one_reads(tmp_path: Path) -> None:
    """The writer's INT96 path (footer held back and rewritten) on an append table: an abort
    mid-file leaves nothing behind; a file closed after it reads back."""
    table = make(tmp_path, [("ts9", parse_type("TIMESTAMP(9)"))], pk=())
    spec = file_writer_spec(table)
    chunk = pa.table({"id": pa.array([1, 2], pa.int64()),
                      "ts9": pa.array([NS("1900-01-01 00:00:00.000000001"), None],
                                      pa.timestamp("ns"))}, schema=spec.file_schema)
    w = RollingFileWriter(table.file_io, table.paths, (), 0, spec, level=0,
                          file_source=FileSource.APPEND)
    w.write(chunk)
    w._flush_pending()  # the chunk reaches the (held-back) Parquet writer
    w._wait()
    assert len(w.written_paths) == 1
    path = w.written_paths[0]
    w.abort()
    assert not table.file_io.exists(path)
    w = RollingFileWriter(table.file_io, table.paths, (), 0, spec, level=0,
                          file_source=FileSource.APPEND)
    w.write(chunk)
    (meta,) = w.close()
    back = pq.read_table(w.written_paths[0])
    assert back.column("ts9").to_pylist() == [NS("1900-01-01 00:00:00.000000001"), None]
    assert meta.file_size == os.path.getsize(w.written_paths[0]) and meta.row_count == 2


# ------------------------------------------------------------------ statistics and pushdown

STATS_COLUMNS = [(n, parse_type(t)) for n, t in [
    ("d52", "DECIMAL(5, 2)"), ("d94", "DECIMAL(9, 4)"), ("d184", "DECIMAL(18, 4)"),
    ("d3810", "DECIMAL(38, 10)"), ("ts9", "TIMESTAMP(9)"),
    ("ltz9", "TIMESTAMP(9) WITH LOCAL TIME ZONE"),
    ("ts3", "TIMESTAMP(3)"), ("t6", "TIME(6)"), ("bin4", "BINARY(4)")]]


def _stats_row(i: int, g: int) -> dict[str, Any]:
    ts = NS("1969-12-31 23:59:59.000000001") + pd.Timedelta(days=1000 * g, nanoseconds=i)
    return {"id": 100 * g + i, "d52": D(f"{-500 + 300 * g + i}.0{i}"),
            "d94": D(f"{-99999 + 90000 * g + i}.1234"),
            "d184": D(f"-{g}1234567890123.{i:04d}"),
            "d3810": D(f"{g}234567890123456789012345678.{i:010d}"),
            "ts9": ts, "ltz9": None if i == 1 else ts.tz_localize("UTC"),
            "ts3": (ts.floor("ms") + pd.Timedelta(milliseconds=i)).to_pydatetime(),
            "t6": dt.time(g, i, 0, 123456), "bin4": bytes([g, i, 0, 1])}


def _file_stats(table: FileStoreTable, f: DataFileMeta) -> dict[str, tuple[Any, Any, int]]:
    row_type = table.schema.row_type
    names = list(f.value_stats_cols or row_type.names)
    types = [row_type.field(n).type for n in names]
    mins = decode_row(f.value_stats.min_values, types)
    maxs = decode_row(f.value_stats.max_values, types)
    return {n: (mins[i], maxs[i], f.value_stats.null_counts[i]) for i, n in enumerate(names)}


def test_statistics_and_pushdown_on_decimal_int96_time_and_binary_columns(tmp_path: Path
                                                                          ) -> None:
    """Each commit's file has its rows' minimum, maximum and null count per column (INT32 /
    INT64 decimals from the footer, INT96 timestamps measured from the rows, TIME at
    milliseconds), and a filter on any of these columns skips the other commit's file."""
    table = make(tmp_path, STATS_COLUMNS, pk=(), **{"metadata.stats-mode": "full"})
    groups = {g: [_stats_row(i, g) for i in range(3)] for g in (1, 2)}
    for g in (1, 2):
        write(table, groups[g])
    by_group = {}
    for f in files(table):
        stats = _file_stats(table, f)
        g = 1 if stats["d52"][0] < D(0) else 2
        by_group[g] = f
        rows = groups[g]
        for name, _ in STATS_COLUMNS:
            values = [r[name] for r in rows if r[name] is not None]
            if name == "t6":
                values = [v.replace(microsecond=v.microsecond // 1000 * 1000) for v in values]
            want = (min(values), max(values), sum(r[name] is None for r in rows))
            assert stats[name] == want, (name, g)
    assert set(by_group) == {1, 2}
    for name, _ in STATS_COLUMNS:
        value = groups[2][1][name] if name != "ltz9" else groups[2][2][name]
        if name == "t6":
            value = value.replace(microsecond=value.microsecond // 1000 * 1000)
        eq = files(table, lambda pb, n=name, v=value: pb.equal(n, v))
        assert [f.file_name for f in eq] == [by_group[2].file_name], name
        if name in ("ts9", "ltz9"):
            continue  # rows: test_row_filter_keeps_a_literals_nanoseconds
        got = read(table, lambda pb, n=name, v=value: pb.equal(n, v))
        assert [r["id"] for r in got] == [201], name
    low = files(table, lambda pb: pb.less_than("d184", D("-20000000000000")))
    assert [f.file_name for f in low] == [by_group[2].file_name]
    late = files(table, lambda pb: pb.greater_than("ts9", NS("1975-01-01")))
    assert [f.file_name for f in late] == [by_group[2].file_name]


# ------------------------------------------------------------------ INT96 and the footer

def java_int96(nanos: int) -> bytes:
    """ParquetRowDataWriter.timestampToInt96 of Timestamp.fromEpochNanos-like values: the
    floored epoch millisecond, its nano-of-millisecond, Java's truncating / and %."""
    millis, nano_of_milli = nanos // 1_000_000, nanos % 1_000_000
    day = millis // 86_400_000 if millis >= 0 else -((-millis) // 86_400_000)
    rest = millis - day * 86_400_000
    return struct.pack("<qi", rest * 1_000_000 + nano_of_milli, day + 2_440_588)


def test_int96_bytes_are_paimons() -> None:
    rng = np.random.default_rng(5)
    nanos = [0, -1, 1, -86_400_000_000_000, -86_399_999_999_500, 86_400_000_000_000 - 1,
             NS("1677-09-22").value, NS("2262-04-11").value,
             *rng.integers(-(2 ** 62), 2 ** 62, 500).tolist()]
    arr = pa.array(nanos + [None], pa.timestamp("ns"))
    got = int96_values(arr)
    assert got.type == pa.binary(12) and got.null_count == 1
    assert got.to_pylist()[:-1] == [java_int96(n) for n in nanos]
    assert int96_values(arr.slice(3, 2)).to_pylist() == [java_int96(n) for n in nanos[3:5]]
    # and Arrow decodes them back, whatever the sign of the nanosecond of the day
    layout = parquet_layout(pa.schema([("t", pa.timestamp("ns", tz="UTC"))]))
    buf = pa.BufferOutputStream()
    sink = parquet_footer.HoldingSink(buf)
    w = pq.ParquetWriter(sink, layout.schema, write_statistics=layout.statistics_columns())
    w.write_table(layout.convert(pa.table({"t": arr.cast(pa.timestamp("ns", tz="UTC"))})))
    sink.hold()
    w.close()
    sink.finish(lambda f: parquet_footer.patch_footer(
        f, layout.int96_leaves, parquet_footer.arrow_schema_value(layout.file_schema)))
    back = pq.read_table(pa.BufferReader(buf.getvalue()))
    assert back.column("t").cast(pa.int64()).to_pylist() == nanos + [None]


def test_footer_codec_round_trips_arrows_footers(tmp_path: Path) -> None:
    """Decoding and re-encoding a footer changes nothing (every field kept, in order), for a
    file with nested columns, several row groups, dictionaries and statistics."""
    columns = [(n, parse_type(t)) for n, t in ATOMIC[::7]] + _nested()
    table = make(tmp_path, columns, pk=())
    data = arrow_schema(table.schema.row_type.fields)
    rows = [{"id": i, **{k: v for k, v in _values(i % 4).items() if k in data.names and k != "id"}}
            for i in range(40)]
    buf = pa.BufferOutputStream()
    with pq.ParquetWriter(buf, parquet_layout(data).schema) as w:
        t = parquet_layout(data).convert(pa.Table.from_pylist(rows, schema=data))
        w.write_table(t, row_group_size=16)
    raw = buf.getvalue().to_pybytes()
    (length,) = struct.unpack("<i", raw[-8:-4])
    footer = raw[-8 - length:-8]
    md = parquet_footer.decode(footer)
    assert parquet_footer.encode(md) == footer
    assert len(md.get(4).items) == 3  # row groups
    patched = parquet_footer.patch_footer(footer, [], None)
    assert patched == footer


def test_footer_patch_refuses_a_column_that_is_not_12_bytes() -> None:
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": pa.array([b"abc"], pa.binary(3))}), buf)
    raw = buf.getvalue().to_pybytes()
    (length,) = struct.unpack("<i", raw[-8:-4])
    with pytest.raises(ValueError, match="not FIXED_LEN_BYTE_ARRAY"):
        parquet_footer.patch_footer(raw[-8 - length:-8], [0], None)


# ------------------------------------------------------------------ older lakecore files

def legacy_layout(spec: FileWriterSpec) -> ParquetLayout:
    """How lakecore wrote files before: Arrow's defaults for the table's Arrow types."""
    layout = parquet_layout(spec.file_schema)
    return dataclasses.replace(layout, schema=spec.file_schema, int96_leaves=(),
                               int96_paths=(), int96_columns=(), decimals_as_integers=False)


def _legacy_expected(compacted: bool) -> list[dict[str, Any]]:
    want = [_stats_row(i, g) for g in (1, 2) for i in range(3)]
    for r in want:
        if r["id"] >= 200 or compacted:  # the old file kept TIME(6)'s microseconds
            r["t6"] = r["t6"].replace(microsecond=r["t6"].microsecond // 1000 * 1000)
        r["ts3"] = NS(r["ts3"])
    return want


def test_files_lakecore_wrote_before_still_read(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose first commit has the old encodings (FLBA decimals, INT64 nanosecond
    timestamps, INT64 TIME(6), FLBA BINARY(4)), then one in Paimon's: reads, filters (the old
    file's statistics came from its FLBA footer) and a full compaction, which rewrites both in
    Paimon's types."""
    table = make(tmp_path, STATS_COLUMNS, **{"metadata.stats-mode": "full"})
    with monkeypatch.context() as m:
        m.setattr(FileWriterSpec, "layout", property(legacy_layout))
        write(table, [_stats_row(i, 1) for i in range(3)])
    (old,) = file_paths(table)
    kinds = {k: (v[0], v[1]["Type"]) for k, v in parquet_columns(old).items()}
    assert kinds["d52"] == kinds["d184"] == ("FIXED_LEN_BYTE_ARRAY", "Decimal")
    assert kinds["ts9"] == kinds["ltz9"] == ("INT64", "Timestamp")
    assert kinds["t6"] == ("INT64", "Time") and kinds["bin4"] == ("FIXED_LEN_BYTE_ARRAY", "None")
    (meta,) = files(table)
    stats = _file_stats(table, meta)  # the old file's statistics: from its footer
    old_rows = [_stats_row(i, 1) for i in range(3)]
    for name in ("d52", "d184", "ts9", "bin4"):
        assert stats[name][:2] == (min(r[name] for r in old_rows),
                                   max(r[name] for r in old_rows)), name
    write(table, [_stats_row(i, 2) for i in range(3)])
    assert _normal(read(table)) == _legacy_expected(compacted=False)
    for g in (1, 2):
        row = _stats_row(1, g)
        for name in ("d52", "d94", "d184", "d3810", "ts3", "bin4"):
            got = read(table, lambda pb, n=name, v=row[name]: pb.equal(n, v))
            assert [r["id"] for r in got] == [row["id"]], (name, g)
    table.compact(full=True)
    (new,) = file_paths(table)
    kinds = {k: v[0] for k, v in parquet_columns(new).items()}
    assert (kinds["d52"], kinds["d184"], kinds["ts9"], kinds["t6"], kinds["bin4"]) == (
        "INT32", "INT64", "INT96", "INT32", "BYTE_ARRAY")
    assert _normal(read(table)) == _legacy_expected(compacted=True)


def test_row_filter_keeps_a_literals_nanoseconds(tmp_path: Path) -> None:
    """A pandas.Timestamp literal keeps its nanoseconds in the row filter: pyarrow would make a
    microsecond scalar of it, and an equality on a TIMESTAMP(9) value with sub-microsecond
    digits would match no row (read/predicate.py builds a nanosecond scalar)."""
    table = make(tmp_path, [("ts9", parse_type("TIMESTAMP(9)"))], pk=())
    value = NS("2024-01-02 03:04:05.123456789")
    write(table, [{"id": 1, "ts9": value}, {"id": 2, "ts9": value.floor("us")}])
    assert [f.file_name for f in files(table, lambda pb: pb.equal("ts9", value))]
    assert [r["id"] for r in read(table, lambda pb: pb.equal("ts9", value))] == [1]


def test_time_annotation_differs_only_in_its_utc_flag(tmp_path: Path) -> None:
    """Paimon annotates TIME columns TIME(MILLIS, isAdjustedToUTC=true); Arrow 26 writes
    isAdjustedToUTC=false for every time32 column. Java Paimon reads TIME by its INT32 values
    alone (ParquetVectorUpdaterFactory.visit(TimeType): an IntegerUpdater) and filters it as
    an int column, so the flag changes nothing for it; kept as Arrow writes it."""
    table = make(tmp_path, [("t", parse_type("TIME(3)"))], pk=())
    write(table, [{"id": 1, "t": dt.time(1, 2, 3, 4000)}])
    (path,) = file_paths(table)
    assert parquet_columns(path)["t"] == ("INT32", {"Type": "Time", "isAdjustedToUTC": False,
                                                    "timeUnit": "milliseconds"}, None)
