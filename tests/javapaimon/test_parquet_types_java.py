"""Java Paimon (1.4.2) and lakecore on the Parquet types of DECIMAL, TIMESTAMP, TIMESTAMP_LTZ,
TIME and BINARY columns (lakecore/io/parquet_layout.py).

Java writes the same table as lakecore and the two files' Parquet column types are compared;
Java reads lakecore's files whole and through a filter on each such column (its filter pushdown
builds an Integer / Long / Binary predicate from the column's Paimon type, which parquet-mr
checks against the file's physical type); lakecore reads Java's INT96 timestamps and integer
decimals, compacts them and Java reads the result; and files lakecore wrote before (FIXED_LEN
decimals, INT64-nanosecond timestamps), which Java cannot filter, become filterable once
lakecore's full compaction rewrites them. One JVM for the module (the ``java_paimon`` fixture).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.io.data_file_writer import FileWriterSpec
from lakecore.io.parquet_layout import ParquetLayout, parquet_layout
from lakecore.schema.types import DataField, DataType, TypeRoot, arrow_schema, parse_type
from lakecore.table import FileStoreTable
from tests.javapaimon.client import JavaPaimon, JavaPaimonError

D = decimal.Decimal
NS = pd.Timestamp

TYPES = [
    ("id", "BIGINT NOT NULL"),
    ("d52", "DECIMAL(5, 2)"), ("d94", "DECIMAL(9, 4)"), ("d10", "DECIMAL(10, 0)"),
    ("d184", "DECIMAL(18, 4)"), ("d19", "DECIMAL(19, 3)"), ("d3810", "DECIMAL(38, 10)"),
    ("ts0", "TIMESTAMP(0)"), ("ts3", "TIMESTAMP(3)"), ("ts4", "TIMESTAMP(4)"),
    ("ts6", "TIMESTAMP(6)"), ("ts7", "TIMESTAMP(7)"), ("ts9", "TIMESTAMP(9)"),
    ("ltz3", "TIMESTAMP(3) WITH LOCAL TIME ZONE"), ("ltz6", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("ltz9", "TIMESTAMP(9) WITH LOCAL TIME ZONE"),
    ("t0", "TIME(0)"), ("t3", "TIME(3)"), ("t6", "TIME(6)"),
    ("bin4", "BINARY(4)"), ("vbin", "BYTES"),
    ("a_ts9", "ARRAY<TIMESTAMP(9)>"), ("m_d52", "MAP<INT NOT NULL, DECIMAL(5, 2)>"),
    ("r", "ROW<`x` TIMESTAMP(9), `y` DECIMAL(18, 4), `z` TIMESTAMP(3)>"),
]
ATOMIC = [n for n, t in TYPES if "<" not in t]


def _lakecore_type(text: str) -> DataType:
    """A Paimon type string as lakecore's DataType (the nested ones of TYPES built here)."""
    if text.startswith("ARRAY<"):
        return DataType(TypeRoot.ARRAY, element=parse_type(text[6:-1]))
    if text.startswith("MAP<"):
        return DataType(TypeRoot.MAP, key=parse_type("INT NOT NULL"),
                        value=parse_type("DECIMAL(5, 2)"))
    if text.startswith("ROW<"):
        return DataType(TypeRoot.ROW, fields=(
            DataField(100, "x", parse_type("TIMESTAMP(9)")),
            DataField(101, "y", parse_type("DECIMAL(18, 4)")),
            DataField(102, "z", parse_type("TIMESTAMP(3)"))))
    return parse_type(text)


class Lake:
    def __init__(self, wh: Path) -> None:
        self.wh = wh
        self.catalog = CatalogFactory.create({"warehouse": str(wh)})
        self.catalog.create_database("db", ignore_if_exists=True)

    def create(self, name: str, **options: str) -> FileStoreTable:
        fields = tuple(DataField(i, n, _lakecore_type(t)) for i, (n, t) in enumerate(TYPES))
        self.catalog.create_table(f"db.{name}", Schema(fields, primary_keys=("id",),
                                                       options={"bucket": "1", **options}))
        return self.table(name)

    def table(self, name: str) -> FileStoreTable:
        return self.catalog.get_table(f"db.{name}")

    def write(self, name: str, rows: list[dict[str, Any]]) -> None:
        t = self.table(name)
        wb = t.new_batch_write_builder()
        w = wb.new_write()
        try:
            w.write_arrow(pa.Table.from_pylist(rows, schema=arrow_schema(
                t.schema.row_type.fields)))
            wb.new_commit().commit(w.prepare_commit())
        finally:
            w.close()

    def read(self, name: str) -> list[dict[str, Any]]:
        rb = self.table(name).new_read_builder()
        rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
        return sorted(rows, key=lambda r: r["id"])

    def at(self, name: str) -> dict[str, str]:
        return {"warehouse": str(self.wh), "table": f"db.{name}"}

    def data_files(self, name: str) -> list[str]:
        """The live data files of the table's latest snapshot."""
        t = self.table(name)
        return [t.paths.data_file_path((), 0, f.file_name, None)
                for s in t.new_read_builder().new_scan().plan().splits() for f in s.files]


def legacy_layout(spec: FileWriterSpec) -> ParquetLayout:
    """How lakecore wrote files before: Arrow's defaults for the table's Arrow types."""
    return dataclasses.replace(parquet_layout(spec.file_schema), schema=spec.file_schema,
                               int96_leaves=(), int96_paths=(), int96_columns=(),
                               decimals_as_integers=False)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "wh")


def row(i: int, g: int = 0) -> dict[str, Any]:
    """Row ``i`` of commit ``g``: pre-1970 and sub-microsecond timestamps, negative decimals
    at their precision's width; row 3 is null but for its key."""
    if i == 3:
        return {"id": 3 + 10 * g}
    ts = NS("1969-12-31 23:59:59.123456789") + pd.Timedelta(days=700 * i + 3000 * g,
                                                             nanoseconds=i)
    neg = -1 if i % 2 else 1
    return {
        "id": i + 10 * g, "d52": D(neg * (99999 - i - 100 * g)).scaleb(-2),
        "d94": D(neg * (999999999 - i - 1000 * g)).scaleb(-4),
        "d10": D(neg * (9999999999 - i - 1000 * g)),
        "d184": D(f"{neg * (10**18 - 1 - i - g)}E-4"),
        "d19": D(f"{neg * (10**19 - 1 - i - g)}E-3"),
        "d3810": D(f"{neg * (10**38 - 1 - i - g)}E-10"),
        "ts0": ts.floor("s"), "ts3": ts.floor("ms"), "ts4": ts.floor("us"), "ts6": ts.floor("us"),
        "ts7": ts, "ts9": ts, "ltz3": ts.floor("ms").tz_localize("UTC"),
        "ltz6": ts.floor("us").tz_localize("UTC"), "ltz9": ts.tz_localize("UTC"),
        "t0": dt.time(i, 2, 3), "t3": dt.time(i, 2, 3, 4000 + g * 1000),
        "t6": dt.time(i, 2, 3, 4567 + g * 1000),
        "bin4": bytes([i, g, 0, 255]), "vbin": bytes([g]) * i,
        "a_ts9": [ts, None], "m_d52": [(i, D("-999.99")), (i + 1, None)],
        "r": {"x": ts, "y": D("-99999999999999.9999"), "z": ts.floor("ms")},
    }


# ------------------------------------------------------------------ values in Java's text

def java_text(v: Any, t: str) -> Any:
    """A value as the oracle writes and prints it (TIMESTAMP to microseconds, TIME to
    milliseconds, DECIMAL plain, bytes base64); ``java_input`` keeps every digit."""
    if v is None:
        return None
    if t.startswith("ARRAY<"):
        return [java_text(x, t[6:-1]) for x in v]
    if t.startswith("MAP<"):
        return [[k, java_text(x, "DECIMAL(5, 2)")] for k, x in v]
    if t.startswith("ROW<"):
        return [java_text(v["x"], "TIMESTAMP(9)"), java_text(v["y"], "DECIMAL(18, 4)"),
                java_text(v["z"], "TIMESTAMP(3)")]
    if t.startswith("DECIMAL"):
        return format(v, "f")
    if t.startswith("TIMESTAMP"):
        v = NS(v).tz_convert(None) if NS(v).tzinfo is not None else NS(v)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond:06d}"
    if t.startswith("TIME"):
        return v.isoformat(timespec="milliseconds")
    if t.startswith(("BINARY", "BYTES")):
        return base64.b64encode(v).decode()
    return v


def java_input(v: Any, t: str) -> Any:
    """A value for the oracle's rows or filters: timestamps with all nine digits."""
    if v is not None and t.startswith("TIMESTAMP"):
        v = NS(v).tz_convert(None) if NS(v).tzinfo is not None else NS(v)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond:06d}{v.nanosecond:03d}"
    if t.startswith("ARRAY<") and v is not None:
        return [java_input(x, t[6:-1]) for x in v]
    if t.startswith("ROW<") and v is not None:
        return [java_input(v["x"], "TIMESTAMP(9)"), java_text(v["y"], "DECIMAL(18, 4)"),
                java_input(v["z"], "TIMESTAMP(3)")]
    return java_text(v, t)


def java_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return sorted(([java_text(r.get(n), t) for n, t in TYPES] for r in rows),
                  key=lambda r: r[0])


def parquet_columns(path: Any) -> dict[str, tuple[str, dict[str, Any], int | None]]:
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        c = schema.column(i)
        length = c.length if c.physical_type == "FIXED_LEN_BYTE_ARRAY" else None
        logical = json.loads(c.logical_type.to_json())
        logical.pop("force_set_converted_type", None)  # pyarrow's bookkeeping, not the file's
        out[c.path] = (c.physical_type, logical, length)
    return out


# ------------------------------------------------------------------ tests

def test_java_writes_the_parquet_types_lakecore_writes(java_paimon: JavaPaimon, lake: Lake,
                                                       tmp_path: Path) -> None:
    """The same table, one row, written by Java and by lakecore: every leaf column has the same
    physical type, annotation and length, but TIME's isAdjustedToUTC flag (Paimon: true; Arrow
    26 writes false and Java reads TIME by its INT32 values alone)."""
    jp = java_paimon
    lake.create("t")
    lake.write("t", [row(1)])
    java_wh = tmp_path / "java"
    at = {"warehouse": str(java_wh), "table": "db.t"}
    jp.call("create", **at, fields=[{"name": n, "type": t} for n, t in TYPES],
            primary_keys=["id"], options={"bucket": "1"})
    jp.call("write", **at, rows=[[java_input(row(1).get(n), t) for n, t in TYPES]])
    (ours,) = lake.data_files("t")
    (theirs,) = sorted((java_wh / "db.db" / "t" / "bucket-0").glob("*.parquet"))
    mine, java = parquet_columns(ours), parquet_columns(str(theirs))
    assert list(mine) == list(java)
    for path in java:
        if java[path][1].get("Type") == "Time":
            assert java[path][1]["isAdjustedToUTC"] is True
            assert mine[path][1] == {**java[path][1], "isAdjustedToUTC": False}, path
            assert mine[path][0] == java[path][0] == "INT32"
            continue
        assert mine[path] == java[path], path
    assert java["ts9"][0] == java["ltz9"][0] == java["r.x"][0] == "INT96"
    assert (java["d52"][0], java["d184"][0], java["d19"][0]) == (
        "INT32", "INT64", "FIXED_LEN_BYTE_ARRAY")


def test_java_reads_and_filters_every_such_column(java_paimon: JavaPaimon, lake: Lake) -> None:
    """Two commits (the second upserts key 1): Java reads what lakecore reads, and an equality
    filter on each column finds exactly lakecore's rows with that value (TIMESTAMP(7..9) and
    TIMESTAMP_LTZ(9) compared with all nine digits, so Java decodes lakecore's INT96 exactly);
    range filters on the INT32 / INT64 decimals prune and select as lakecore's values say."""
    jp = java_paimon
    lake.create("t")
    first = [row(i) for i in range(4)]
    second = [row(1, 1) | {"id": 1}, row(5, 1)]
    lake.write("t", first)
    lake.write("t", second)
    ours = lake.read("t")
    java = jp.call("read", **lake.at("t"))
    assert sorted(java["rows"], key=lambda r: r[0]) == java_rows(ours)
    by_id = {r["id"]: r for r in ours}
    types = dict(TYPES)
    for name in ATOMIC[1:]:
        target = by_id[2][name]
        want = sorted(i for i, r in by_id.items() if r[name] == target)
        got = jp.call("read", **lake.at("t"), filter={"equal": [name, java_input(target,
                                                                                types[name])]})
        assert sorted(r[0] for r in got["rows"]) == want, name
    for name in ("ts7", "ts9", "ltz9"):
        off = NS(by_id[2][name]) + pd.Timedelta(nanoseconds=1)
        got = jp.call("read", **lake.at("t"), filter={"equal": [name, java_input(off,
                                                                             types[name])]})
        assert got["rows"] == [], name
    for name in ("d52", "d94", "d10", "d184"):
        got = jp.call("read", **lake.at("t"), filter={"less_than": [name, "0"]})
        assert sorted(r[0] for r in got["rows"]) == sorted(
            i for i, r in by_id.items() if r[name] is not None and r[name] < 0), name


def test_lakecore_reads_and_compacts_javas_int96_and_integer_decimals(
        java_paimon: JavaPaimon, lake: Lake, tmp_path: Path) -> None:
    """Java writes the table (INT96 timestamps with nanoseconds before and after 1970, INT32 /
    INT64 decimals); lakecore reads every digit, its full compaction rewrites the files, and
    Java reads (and filters) lakecore's rewrite to the nanosecond."""
    jp = java_paimon
    lake.create("t")
    rows = [row(i) for i in range(4)]
    jp.call("write", **lake.at("t"), rows=[[java_input(r.get(n), t) for n, t in TYPES]
                                           for r in rows])
    want = [{n: r.get(n) for n, _ in TYPES} for r in rows]
    for r in want:  # Paimon's TIME is a millisecond of the day
        if r["t6"] is not None:
            r["t6"] = r["t6"].replace(microsecond=r["t6"].microsecond // 1000 * 1000)

    def normal(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in rs:
            r = dict(r)
            for n in ("ts0", "ts3", "ts4", "ts6", "ts7", "ts9", "ltz3", "ltz6", "ltz9"):
                r[n] = None if r[n] is None else NS(r[n])
            if r["a_ts9"] is not None:
                r["a_ts9"] = [None if x is None else NS(x) for x in r["a_ts9"]]
            if r["r"] is not None:
                r["r"] = {**r["r"], "x": NS(r["r"]["x"]), "z": NS(r["r"]["z"])}
            out.append(r)
        return out

    assert normal(lake.read("t")) == normal(want)
    lake.table("t").compact(full=True)
    (path,) = lake.data_files("t")
    assert parquet_columns(path)["ts9"][0] == "INT96"
    assert normal(lake.read("t")) == normal(want)
    types = dict(TYPES)
    for name in ("ts9", "ltz9", "ts7", "d52", "d184", "t6", "bin4"):
        value = java_input(rows[1][name], types[name])
        got = jp.call("read", **lake.at("t"), filter={"equal": [name, value]})
        assert [r[0] for r in got["rows"]] == [1], name


def test_old_lakecore_files_filter_in_java_once_compacted(java_paimon: JavaPaimon, lake: Lake,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A table written by the lakecore before this layout (DECIMAL(5, 2) as FIXED_LEN_BYTE_ARRAY,
    TIME(6) as INT64, BINARY(4) as FIXED_LEN_BYTE_ARRAY(4), TIMESTAMP(9) as INT64 nanoseconds):
    Java's filters on the decimal and the time fail the read, its filter on the binary finds
    nothing and it misreads the timestamps; lakecore reads it right, and after lakecore's full
    compaction Java filters and reads it right. (A full compaction that only lifts a lone old
    file to the top level, as Paimon's does, leaves it as it is: a second commit overlaps it.)"""
    jp = java_paimon
    lake.create("t")
    rows = [row(i) for i in range(3)]
    with monkeypatch.context() as m:
        m.setattr(FileWriterSpec, "layout", property(legacy_layout))
        lake.write("t", rows)
    with pytest.raises(JavaPaimonError) as e:
        jp.call("read", **lake.at("t"), filter={"equal": ["d52", java_text(rows[2]["d52"],
                                                                          "DECIMAL(5, 2)")]})
    assert "FIXED_LEN_BYTE_ARRAY" in str(e.value.root_cause)
    t6 = java_text(rows[1]["t6"], "TIME(6)")
    with pytest.raises(JavaPaimonError) as e:  # TIME(6) as INT64: an Integer predicate too
        jp.call("read", **lake.at("t"), filter={"equal": ["t6", t6]})
    assert "Column t6 is of type: INT64" in str(e.value.root_cause)
    bin4 = java_text(rows[1]["bin4"], "BINARY(4)")
    # BINARY(4) as FIXED_LEN_BYTE_ARRAY(4): Java's filter finds nothing, silently
    assert jp.call("read", **lake.at("t"), filter={"equal": ["bin4", bin4]},
                   projection=["id"])["rows"] == []  # (LTZ(9) as INT64 fails any read of it)
    java = jp.call("read", **lake.at("t"), projection=["id", "ts9"])["rows"]
    assert sorted(java)[0] != [0, java_text(rows[0]["ts9"], "TIMESTAMP(9)")]
    lake.write("t", [row(0, 1) | {"id": 0}])  # an overlapping file: compaction rewrites both
    ours = lake.read("t")
    lake.table("t").compact(full=True)
    (path,) = lake.data_files("t")
    assert parquet_columns(path)["d52"][0] == "INT32"
    for r in ours:  # the old file kept TIME(6)'s microseconds; Paimon's TIME has milliseconds
        if r["t6"] is not None:
            r["t6"] = r["t6"].replace(microsecond=r["t6"].microsecond // 1000 * 1000)
    assert lake.read("t") == ours
    got = jp.call("read", **lake.at("t"), filter={"equal": ["d52", java_text(rows[2]["d52"],
                                                                              "DECIMAL(5, 2)")]})
    assert [r[0] for r in got["rows"]] == [2]
    for name, value in (("t6", t6), ("bin4", bin4)):
        got = jp.call("read", **lake.at("t"), filter={"equal": [name, value]})
        assert [r[0] for r in got["rows"]] == [1], name
    java = jp.call("read", **lake.at("t"))
    assert sorted(java["rows"], key=lambda r: r[0]) == java_rows(ours)
