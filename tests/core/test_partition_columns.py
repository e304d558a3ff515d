"""A partition's columns hold one value: the routing does not gather them, each slice gets
its partition's value repeated. What users see must not change: every row's partition
values, in the data files themselves (Paimon's readers take them from there), through
spills, changelog files and other merge engines, and a floating-point partition's ``-0.0``
(one partition with ``0.0``) stays ``-0.0``."""

from __future__ import annotations

import datetime as dt
import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("hr", pa.int32(), False),
                    pa.field("day", pa.date32(), False), pa.field("id", pa.int64(), False),
                    ("v", pa.string()), ("n", pa.int64())])


def _batch(seed: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 3, rows)
    return pa.table({
        "dt": pa.array([f"2026-11-{d + 1:02d}" for d in days]),
        "hr": pa.array(rng.integers(0, 2, rows), pa.int32()),
        "day": pa.array([dt.date(2026, 11, 1) + dt.timedelta(days=int(d) % 2) for d in days],
                        pa.date32()),
        "id": pa.array(rng.integers(0, rows // 2, rows), pa.int64()),
        "v": pa.array([f"s{seed}-{i}" for i in range(rows)]),
        "n": pa.array(rng.integers(0, 100, rows), pa.int64()),
    }, schema=SCHEMA)


def _model(batches: list[pa.Table], keys: list[str]) -> list[dict]:
    latest: dict[tuple, dict] = {}
    for b in batches:
        for row in b.to_pylist():
            latest[tuple(row[k] for k in keys)] = row
    return sorted(latest.values(), key=lambda r: tuple(r[k] for k in keys))


def _data_files_hold_their_partition(table) -> int:
    """Every data file's partition columns hold its partition's values, in every row."""
    checked = 0
    for split in table.new_read_builder().new_scan().plan().splits():
        values = dict(zip(table.partition_keys, split.partition))
        for f in split.files:
            path = table.paths.data_file_path(split.partition, split.bucket, f.file_name)
            data = pq.read_table(path, columns=list(values))
            for k, v in values.items():
                assert data.column(k).to_pylist() == [v] * data.num_rows, (path, k)
            checked += 1
    return checked


@pytest.mark.parametrize("options", [
    {},  # deduplicate, in memory
    {"write-buffer-size": "256 kb", "write-buffer-spillable": "true"},  # spilled runs
    {"changelog-producer": "input"},  # changelog files from the same buffer
    {"merge-engine": "partial-update"},  # a merge that folds values: columns kept
])
def test_partition_values_in_every_row_of_every_file(tmp_path, options):
    keys = ["dt", "hr", "day", "id"]
    table = make_table(str(tmp_path), SCHEMA, primary_keys=keys,
                       partition_keys=["dt", "hr", "day"], options={"bucket": "3", **options})
    batches = [_batch(seed, 20_000) for seed in (1, 2, 3)]
    write(table, batches[0], batches[1])
    write(table, batches[2])
    got = read(table, sort_by=keys)
    assert got == _model(batches, keys)
    assert _data_files_hold_their_partition(table) >= 3 * 2 * 3
    if options.get("changelog-producer") == "input":
        logs = glob.glob(os.path.join(table.table_path, "**", "changelog-*"), recursive=True)
        assert logs
        for path in logs:
            data = pq.read_table(path)
            assert pc.count_distinct(data.column("dt")).as_py() == 1
            assert data.column("dt")[0].as_py() in {"2026-11-01", "2026-11-02", "2026-11-03"}


def test_a_float_partition_keeps_the_sign_of_zero(tmp_path):
    """0.0 and -0.0 are one partition (one writer) but two values: each row keeps its own."""
    schema = pa.schema([pa.field("p", pa.float64(), False), pa.field("id", pa.int64(), False),
                        ("v", pa.int64())])
    table = make_table(str(tmp_path), schema, primary_keys=["p", "id"], partition_keys=["p"],
                       options={"bucket": "1", "write-buffer-size": "64 kb",
                                "write-buffer-spillable": "true"})
    n = 20_000
    zero = pa.table({"p": np.zeros(n), "id": np.arange(n), "v": np.arange(n)}, schema=schema)
    negative = pa.table({"p": -np.zeros(n), "id": np.arange(n, 2 * n), "v": np.arange(n)},
                        schema=schema)
    write(table, zero, negative)
    out = pa.Table.from_pylist(read(table), schema=schema)
    ids, p = out.column("id").to_numpy(), out.column("p").to_numpy()
    assert out.num_rows == 2 * n
    assert not np.signbit(p[ids < n]).any() and np.signbit(p[ids >= n]).all()
