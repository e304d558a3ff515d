"""A data file's statistics in its manifest entry: taken from the Parquet footer (as Paimon's
Java writer takes them), they must equal the minimum, maximum and null count of the rows the
file holds, for every atomic type, across row groups, beside nested columns, and where the
footer has none (long strings, all-NaN floats)."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore.format.binary_row import decode_row
from lakecore.format.manifest import DataFileMeta
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, write

N = 3000


def _columns(rng: np.random.Generator) -> dict[str, pa.Array]:
    """Every atomic type Paimon maps, with nulls; nested columns between them (their leaves
    shift the footer's column numbering)."""
    ints = rng.integers(-10**6, 10**6, N)
    nulls = rng.random(N) < 0.1
    base = dt.datetime(2024, 5, 1, 12, 0, 0)

    def arr(values, kind: pa.DataType) -> pa.Array:
        return pa.array(values, kind, mask=nulls)

    return {
        "tags": pa.array([[f"t{i % 7}"] if i % 3 else None for i in range(N)],
                         pa.list_(pa.string())),
        "i8": arr(ints % 100, pa.int8()),
        "i16": arr(ints % 30000, pa.int16()),
        "i32": arr(ints, pa.int32()),
        "rec": pa.array([{"a": i, "b": str(i)} for i in range(N)],
                        pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "i64": arr(ints * 10**9, pa.int64()),
        "f32": arr(ints / 7.0, pa.float32()),
        "f64": arr(rng.standard_normal(N), pa.float64()),
        "flag": arr(ints % 2 == 0, pa.bool_()),
        "s": arr([f"value-{v}" for v in ints], pa.string()),
        "bin": arr([v.to_bytes(8, "big", signed=True) for v in ints.tolist()], pa.binary()),
        "day": arr([dt.date(2020, 1, 1) + dt.timedelta(days=int(v) % 900) for v in ints],
                   pa.date32()),
        "ts3": arr([base + dt.timedelta(milliseconds=int(v)) for v in ints], pa.timestamp("ms")),
        "ts6": arr([base + dt.timedelta(microseconds=int(v)) for v in ints], pa.timestamp("us")),
        "ltz": arr([base + dt.timedelta(seconds=int(v)) for v in ints],
                   pa.timestamp("us", tz="UTC")),
        "d12": arr([decimal.Decimal(int(v)).scaleb(-2) for v in ints], pa.decimal128(12, 2)),
        "d38": arr([decimal.Decimal(int(v)).scaleb(-4) for v in ints], pa.decimal128(38, 4)),
        "empty": pa.nulls(N, pa.int32()),
    }


def _table(tmp_path, columns: dict[str, pa.Array], **options: str) -> FileStoreTable:
    fields = [pa.field("id", pa.int64(), False)] + [pa.field(n, a.type) for n, a in
                                                     columns.items()]
    return make_table(str(tmp_path), pa.schema(fields), primary_keys=["id"],
                      options={"bucket": "1", "metadata.stats-mode": "full", **options})


def _files(table: FileStoreTable) -> list[DataFileMeta]:
    return [f for split in table.new_read_builder().new_scan().plan().splits()
            for f in split.files]


def _expected(data: pa.Table, name: str) -> tuple:
    col = data.column(name)
    if col.null_count == len(col):
        return None, None, len(col)
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py(), col.null_count


def _stats(table: FileStoreTable, f: DataFileMeta) -> dict[str, tuple]:
    """Each stats column's (min, max, nulls), decoded from the file's manifest entry."""
    row_type = table.schema.row_type
    names = list(f.value_stats_cols or row_type.names)
    types = [row_type.field(n).type for n in names]
    mins = decode_row(f.value_stats.min_values, types)
    maxs = decode_row(f.value_stats.max_values, types)
    return {n: (mins[i], maxs[i], f.value_stats.null_counts[i]) for i, n in enumerate(names)}


def test_stats_of_every_atomic_type_equal_the_rows(tmp_path):
    columns = _columns(np.random.default_rng(7))
    table = _table(tmp_path, columns)
    ids = np.random.default_rng(8).permutation(N)  # shuffled keys: the writer sorts them
    data = pa.table({"id": pa.array(ids, pa.int64()), **columns})
    write(table, data)
    (f,) = _files(table)
    got = _stats(table, f)
    assert set(got) == {n for n in data.column_names if n not in ("tags", "rec")}
    for name in got:
        assert got[name] == _expected(data, name), name
    key_types = [table.schema.row_type.field("id").type]
    assert decode_row(f.key_stats.min_values, key_types) == (0,)
    assert decode_row(f.key_stats.max_values, key_types) == (N - 1,)
    assert f.key_stats.null_counts == (0,)
    assert (f.min_sequence_number, f.max_sequence_number) == (0, N - 1)


def test_stats_fold_every_row_group_of_a_file(tmp_path):
    rng = np.random.default_rng(3)
    rows = 60_000
    values = rng.integers(0, 50, rows)
    values[41_234] = -999  # the extremes sit in later row groups
    values[59_000] = 999
    text = pa.array([f"v{v:04d}" for v in values], pa.string())
    table = make_table(str(tmp_path), pa.schema([pa.field("id", pa.int64(), False),
                                                 ("n", pa.int64()), ("s", pa.string())]),
                       primary_keys=["id"],
                       options={"bucket": "1", "target-file-size": "1 mb"})
    data = pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                     "n": pa.array(values, pa.int64(), mask=values == 7), "s": text})
    write(table, data)
    (f,) = _files(table)
    path = table.paths.data_file_path((), 0, f.file_name, None)
    with table.file_io.open_input_file(path) as src:
        assert pq.ParquetFile(src).metadata.num_row_groups > 1
    got = _stats(table, f)
    assert got["n"] == (-999, 999, int(np.sum(values == 7)))
    assert got["s"] == ("v-999", "v0999", 0)
    assert (f.min_sequence_number, f.max_sequence_number, f.row_count) == (0, rows - 1, rows)


@pytest.mark.parametrize("mode, want_min, want_max", [
    ("full", "a" * 5000, "b"),
    ("truncate(16)", "a" * 16, "b"),
])
def test_columns_without_footer_min_max_are_measured(tmp_path, mode, want_min, want_max):
    """Arrow keeps no footer statistics for a value over 4 KiB, nor a min/max for all-NaN
    floats: those columns are measured from the written file instead."""
    long = pa.array(["a" * 5000, "b", None], pa.string())
    nan = pa.array([float("nan"), float("nan"), None], pa.float64())
    table = make_table(str(tmp_path), pa.schema([pa.field("id", pa.int64(), False),
                                                 ("long", pa.string()), ("nan", pa.float64())]),
                       primary_keys=["id"], options={"bucket": "1", "metadata.stats-mode": mode})
    write(table, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "long": long, "nan": nan}))
    (f,) = _files(table)
    got = _stats(table, f)
    assert got["long"] == (want_min, want_max, 1)
    lo, hi, nulls = got["nan"]
    assert np.isnan(lo) and np.isnan(hi) and nulls == 1


def test_retractions_counted_and_key_stats_of_a_two_field_key(tmp_path):
    schema = pa.schema([pa.field("a", pa.int32(), False), pa.field("b", pa.string(), False),
                        ("v", pa.int64()), ("op", pa.string())])
    table = make_table(str(tmp_path), schema, primary_keys=["a", "b"],
                       options={"bucket": "1", "rowkind.field": "op"})
    write(table, pa.table({"a": pa.array([3, 1, 2, 1], pa.int32()), "b": ["z", "y", "a", "b"],
                           "v": [1, 2, 3, 4], "op": ["+I", "-D", "+I", "-U"]}, schema=schema))
    (f,) = _files(table)
    assert f.delete_row_count == 2
    types = [table.schema.row_type.field(k).type for k in ("a", "b")]
    assert decode_row(f.key_stats.min_values, types) == (1, "a")  # per field, not the first key
    assert decode_row(f.key_stats.max_values, types) == (3, "z")
    assert decode_row(f.min_key, types) == (1, "b")
    assert decode_row(f.max_key, types) == (3, "z")
