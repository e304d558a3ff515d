"""Bucket function: lakecore's vectorized hash against pypaimon (run in .venv-paimon).

pypaimon computes each row's ``BinaryRow.hashCode()`` and bucket with its own writer code
(``RowKeyExtractor._binary_row_hash_code`` / ``_bucket_from_hash``); the strongest check
writes real primary-key tables with pypaimon and reads back which ``bucket-<N>`` directory
every key landed in.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.errors import SchemaError
from lakecore.format.bucket import (
    bucket_ids,
    bucket_of_hash,
    hash_bytes_by_words,
    hash_row,
    hash_rows,
)
from lakecore.schema.types import DataType, parse_type, to_arrow

REPO_ROOT = Path(__file__).resolve().parents[2]
PAIMON_PYTHON = Path(
    os.environ.get("LAKECORE_PAIMON_PYTHON") or REPO_ROOT / ".venv-paimon" / "bin" / "python"
)
SKIP_REASON = f"pypaimon interpreter not found at {PAIMON_PYTHON}"
BUCKET_COUNTS = (1, 3, 16, 128)
UTC = dt.UTC

ORACLE = r"""
import json, sys
import pyarrow as pa, pyarrow.ipc
from pypaimon.schema.data_types import DataField, DataTypeParser
from pypaimon.write.row_key_extractor import RowKeyExtractor, _bucket_from_hash

out = {}
for case in json.load(open(sys.argv[1])):
    table = pa.ipc.open_file(case["ipc"]).read_all()
    fields = [DataField(i, f"c{i}", DataTypeParser.parse_data_type(t))
              for i, t in enumerate(case["types"])]
    hashes, buckets = [], {str(n): [] for n in case["buckets"]}
    for row in table.to_pylist():
        h = RowKeyExtractor._binary_row_hash_code(tuple(row[f.name] for f in fields), fields)
        hashes.append(h - (1 << 32) if h >= 1 << 31 else h)
        for n in case["buckets"]:
            buckets[str(n)].append(_bucket_from_hash(h, n))
    out[case["name"]] = {"hashes": hashes, "buckets": buckets}
json.dump(out, sys.stdout)
"""

TABLES = r"""
import json, sys
import pyarrow as pa, pyarrow.ipc
from pypaimon import CatalogFactory, Schema

spec = json.load(open(sys.argv[1]))
catalog = CatalogFactory.create({"warehouse": spec["warehouse"]})
catalog.create_database("db", True)
for t in spec["tables"]:
    data = pa.ipc.open_file(t["ipc"]).read_all()
    schema = Schema.from_pyarrow_schema(
        data.schema, partition_keys=t["partition_keys"], primary_keys=t["primary_keys"],
        options=t["options"])
    catalog.create_table("db." + t["name"], schema, False)
    table = catalog.get_table("db." + t["name"])
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
print("{}")
"""


def _run(script: str, arg: Path, tmp: Path) -> Any:
    if not PAIMON_PYTHON.is_file():
        pytest.skip(SKIP_REASON)
    path = tmp / "oracle_script.py"
    path.write_text(script)
    proc = subprocess.run(
        [str(PAIMON_PYTHON), str(path), str(arg)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _write_ipc(path: Path, table: pa.Table) -> None:
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table)


def _rand_strings(rng: np.random.Generator, n: int, max_len: int) -> list[str]:
    alphabet = list("abcdefghijklmnopqrstuvwxyz0123456789-_") + ["é", "ß", "✓", "😀"]
    lens = rng.integers(0, max_len + 1, n)
    return ["".join(rng.choice(alphabet, int(k))) for k in lens]


@functools.cache
def _cases() -> dict[str, tuple[list[str], list[list[Any]]]]:
    """name -> (type specs, columns of Python values)."""
    rng = np.random.default_rng(20240601)
    n = 10_000
    ints = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64).tolist()
    ints[:6] = [0, 1, -1, 2**63 - 1, -(2**63), 42]
    strs = _rand_strings(rng, n, 40)
    strs[:6] = ["", "a" * 7, "b" * 8, "c" * 100, "é" * 4, "1234567"]
    small = 500
    return {
        "bigint_10k": (["BIGINT NOT NULL"], [ints]),
        "string_10k": (["STRING NOT NULL"], [strs]),
        "int_string": (
            ["INT NOT NULL", "STRING NOT NULL"],
            [rng.integers(-(2**31), 2**31, n).tolist(), _rand_strings(rng, n, 20)],
        ),
        "two_long_strings": (
            ["STRING", "VARCHAR(64)", "BIGINT"],
            [_rand_strings(rng, small, 30), _rand_strings(rng, small, 30), list(range(small))],
        ),
        "small_ints": (
            ["BOOLEAN", "TINYINT", "SMALLINT", "INT"],
            [
                [bool(x) for x in rng.integers(0, 2, small)],
                rng.integers(-128, 128, small).tolist(),
                rng.integers(-(2**15), 2**15, small).tolist(),
                rng.integers(-(2**31), 2**31, small).tolist(),
            ],
        ),
        "floats": (
            ["FLOAT", "DOUBLE"],
            [
                [float(np.float32(x)) for x in rng.normal(0, 1e6, small)],
                rng.normal(0, 1e100, small).tolist(),
            ],
        ),
        "temporal": (
            ["DATE", "TIME", "TIMESTAMP(3)", "TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP(0)"],
            [
                [
                    dt.date(1970, 1, 1) + dt.timedelta(days=int(d))
                    for d in rng.integers(-30000, 30000, small)
                ],
                [
                    dt.time(0) if i % 2 else dt.time(int(i % 24), 59, 1, 123000)
                    for i in range(small)
                ],
                [
                    dt.datetime(1960, 1, 1) + dt.timedelta(milliseconds=int(x))
                    for x in rng.integers(0, 2**41, small)
                ],
                [
                    dt.datetime(1960, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=int(x))
                    for x in rng.integers(0, 2**41, small)
                ],
                [
                    dt.datetime(1960, 1, 1) + dt.timedelta(seconds=int(x))
                    for x in rng.integers(0, 2**31, small)
                ],
            ],
        ),
        "timestamp_big": (
            ["TIMESTAMP(6) NOT NULL", "TIMESTAMP(6) WITH LOCAL TIME ZONE NOT NULL"],
            [
                [
                    dt.datetime(1960, 1, 1) + dt.timedelta(microseconds=int(x))
                    for x in rng.integers(0, 2**51, small)
                ],
                [
                    dt.datetime(1960, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=int(x))
                    for x in rng.integers(0, 2**51, small)
                ],
            ],
        ),
        "decimals": (
            ["DECIMAL(10, 2) NOT NULL", "DECIMAL(18, 0) NOT NULL", "DECIMAL(38, 4) NOT NULL"],
            [
                [Decimal(int(x)).scaleb(-2) for x in rng.integers(-(10**10) + 1, 10**10, small)],
                [Decimal(int(x)) for x in rng.integers(-(10**18) + 1, 10**18, small)],
                # wide range of byte lengths, avoiding -2**(8k-1) where pypaimon != Java
                [
                    Decimal(int(x) * 3 ** int(e) + 1).scaleb(-4)
                    for x, e in zip(
                        rng.integers(-(2**62), 2**62, small), rng.integers(0, 40, small)
                    )
                ],
            ],
        ),
        "binary": (
            ["BYTES", "BINARY(4)"],
            [
                [
                    bytes(rng.integers(0, 256, int(k), dtype=np.uint8))
                    for k in rng.integers(0, 20, small)
                ],
                [bytes(rng.integers(0, 256, 4, dtype=np.uint8)) for _ in range(small)],
            ],
        ),
        "nulls": (
            ["INT", "STRING", "BIGINT", "DECIMAL(10, 2)", "TIMESTAMP(3)"],
            [
                [None if i % 3 == 0 else i for i in range(small)],
                [None if i % 4 == 0 else "s" * (i % 13) for i in range(small)],
                [None if i % 5 == 0 else -i for i in range(small)],
                [None if i % 2 == 0 else Decimal(i).scaleb(-2) for i in range(small)],
                [
                    None if i % 7 == 0 else dt.datetime(2000, 1, 1, 0, 0, i % 60)
                    for i in range(small)
                ],
            ],
        ),
        "wide_nulls": (
            ["INT"] * 60,
            [[None if (i + j) % 9 == 0 else i * j for i in range(200)] for j in range(60)],
        ),
    }


def _arrow_columns(specs: list[str], cols: list[list[Any]]) -> list[pa.Array]:
    return [pa.array(c, type=to_arrow(parse_type(s))) for s, c in zip(specs, cols)]


def _types(specs: list[str]) -> list[DataType]:
    return [parse_type(s) for s in specs]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not PAIMON_PYTHON.is_file():
        pytest.skip(SKIP_REASON)
    tmp = tmp_path_factory.mktemp("bucket")
    manifest = []
    for name, (specs, cols) in _cases().items():
        table = pa.table({f"c{i}": a for i, a in enumerate(_arrow_columns(specs, cols))})
        _write_ipc(tmp / f"{name}.arrow", table)
        manifest.append(
            {
                "name": name,
                "ipc": str(tmp / f"{name}.arrow"),
                "types": [parse_type(s).to_json() for s in specs],
                "buckets": list(BUCKET_COUNTS),
            }
        )
    (tmp / "cases.json").write_text(json.dumps(manifest))
    return _run(ORACLE, tmp / "cases.json", tmp)


@pytest.mark.compat
@pytest.mark.parametrize("name", list(_cases()))
def test_hash_and_buckets_match_pypaimon(oracle: dict[str, Any], name: str) -> None:
    specs, cols = _cases()[name]
    columns, types = _arrow_columns(specs, cols), _types(specs)
    expected = np.array(oracle[name]["hashes"], dtype=np.int32)
    np.testing.assert_array_equal(hash_rows(columns, types), expected)
    for n in BUCKET_COUNTS:
        np.testing.assert_array_equal(
            bucket_ids(columns, types, n), np.array(oracle[name]["buckets"][str(n)])
        )


def _pk_tables(rng: np.random.Generator) -> list[dict[str, Any]]:
    n = 400
    keys = _rand_strings(rng, n, 24)
    keys[:4] = ["", "seven77", "eight888", "x" * 100]
    return [
        {
            "name": "composite",
            "data": pa.table(
                {
                    "k_str": pa.array(keys, pa.string()),
                    "k_int": pa.array(rng.integers(-1000, 1000, n), pa.int32()),
                    "v": pa.array(range(n), pa.int64()),
                }
            ),
            "partition_keys": [],
            "primary_keys": ["k_str", "k_int"],
            "options": {"bucket": "4"},
            "bucket_key": ["k_str", "k_int"],
            "num_buckets": 4,
        },
        {
            # the bucket key is the trimmed primary key: `id`, not (`dt`, `id`)
            "name": "partitioned",
            "data": pa.table(
                {
                    "dt": pa.array([f"2024-01-0{i % 3 + 1}" for i in range(n)], pa.string()),
                    "id": pa.array(rng.integers(-(2**40), 2**40, n), pa.int64()),
                    "v": pa.array(keys, pa.string()),
                }
            ),
            "partition_keys": ["dt"],
            "primary_keys": ["dt", "id"],
            "options": {"bucket": "3"},
            "bucket_key": ["id"],
            "num_buckets": 3,
        },
        {
            "name": "ts_key",
            "data": pa.table(
                {
                    "ts": pa.array(
                        [
                            dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=int(x) * 7919)
                            for x in range(n)
                        ],
                        pa.timestamp("us"),
                    ),
                    "v": pa.array(range(n), pa.int64()),
                }
            ),
            "partition_keys": [],
            "primary_keys": ["ts"],
            "options": {"bucket": "5"},
            "bucket_key": ["ts"],
            "num_buckets": 5,
        },
    ]


@pytest.mark.compat
@pytest.mark.slow
def test_pypaimon_table_bucket_directories(tmp_path: Path) -> None:
    if not PAIMON_PYTHON.is_file():
        pytest.skip(SKIP_REASON)
    tables = _pk_tables(np.random.default_rng(7))
    spec = {"warehouse": str(tmp_path / "wh"), "tables": []}
    for t in tables:
        _write_ipc(tmp_path / f"{t['name']}.arrow", t["data"])
        spec["tables"].append(
            {
                "name": t["name"],
                "ipc": str(tmp_path / f"{t['name']}.arrow"),
                "partition_keys": t["partition_keys"],
                "primary_keys": t["primary_keys"],
                "options": t["options"],
            }
        )
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    _run(TABLES, tmp_path / "spec.json", tmp_path)

    for t in tables:
        root = tmp_path / "wh" / "db.db" / t["name"]
        files = sorted(root.rglob("bucket-*/data-*.parquet"))
        assert files, f"pypaimon wrote no data files under {root}"
        seen = 0
        for f in files:
            bucket = int(f.parent.name.removeprefix("bucket-"))
            data = pq.read_table(f, columns=t["bucket_key"])
            key_types = [parse_type(x).copy(nullable=False) for x in _key_type_specs(t)]
            got = bucket_ids([data.column(k) for k in t["bucket_key"]], key_types, t["num_buckets"])
            assert (got == bucket).all(), (t["name"], f, np.flatnonzero(got != bucket)[:5])
            seen += data.num_rows
        distinct = t["data"].group_by(t["primary_keys"]).aggregate([]).num_rows
        assert seen == distinct  # every written key found, in the bucket we predict
        assert len(files) > 1  # keys really spread over several buckets


def _key_type_specs(t: dict[str, Any]) -> list[str]:
    spec = {"k_str": "STRING", "k_int": "INT", "id": "BIGINT", "ts": "TIMESTAMP(6)"}
    return [spec[k] for k in t["bucket_key"]]


def test_chunked_sliced_and_scalar_agree() -> None:
    rng = np.random.default_rng(3)
    strs = _rand_strings(rng, 3000, 30)
    ints = rng.integers(-(2**31), 2**31, 3000).tolist()
    types = [parse_type("STRING"), parse_type("INT")]
    cols = [pa.array(strs), pa.array(ints, pa.int32())]
    whole = hash_rows(cols, types)
    chunked = [pa.chunked_array([c[:1000], c[1000:1001], c[1001:]]) for c in cols]
    np.testing.assert_array_equal(hash_rows(chunked, types), whole)
    np.testing.assert_array_equal(hash_rows([c[500:2500] for c in cols], types), whole[500:2500])
    # large_string / int64 inputs are coerced to the key type's representation
    coerced = [pa.array(strs, pa.large_string()), pa.array(ints, pa.int64())]
    np.testing.assert_array_equal(hash_rows(coerced, types), whole)
    for i in rng.integers(0, 3000, 50).tolist():
        assert hash_row([strs[i], ints[i]], types) == whole[i]
    # one very long row among short ones (the scalar tail path)
    strs[17] = "L" * 5000
    long_cols = [pa.array(strs), cols[1]]
    h = hash_rows(long_cols, types)
    assert h[17] == hash_row([strs[17], ints[17]], types)
    np.testing.assert_array_equal(np.delete(h, 17), np.delete(whole, 17))


def test_bucket_of_hash_java_semantics() -> None:
    for h in (-(2**31), -(2**31) + 1, -7, -1, 0, 1, 7, 2**31 - 1):
        for n in (1, 3, 16, 128, 7):
            java = abs(int(np.fmod(np.int64(h), n)))
            assert bucket_of_hash(h, n) == java
    cols = [pa.array([1, 2, 3], pa.int64())]
    with pytest.raises(SchemaError):
        bucket_ids(cols, [parse_type("BIGINT")], 0)
    assert hash_bytes_by_words(b"") == hash_bytes_by_words(b"", 42)
    assert bucket_ids(cols, [parse_type("BIGINT")], 1).tolist() == [0, 0, 0]
    assert hash_rows([pa.array([], pa.int64())], [parse_type("BIGINT")]).shape == (0,)


def test_speed_1m_int64() -> None:
    col = pa.array(np.random.default_rng(0).integers(-(2**63), 2**63 - 1, 1_000_000))
    types = [parse_type("BIGINT NOT NULL")]
    bucket_ids([col], types, 16)
    best = min(_timed(lambda: bucket_ids([col], types, 16)) for _ in range(3))
    assert best < 0.5, f"bucket_ids on 1M int64 took {best:.3f}s"


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_vectorized_matches_scalar_encoder() -> None:
    """Types and values where only Java (not pypaimon) is the reference: the scalar encoder
    pins them byte for byte (test_binary_row); the vectorized rows must hash identically."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(11)
    n = 300
    specs = [
        "DECIMAL(38, 0)",
        "TIMESTAMP(9)",
        "STRING",
        "TIMESTAMP(6) WITH LOCAL TIME ZONE",
        "BINARY(9)",
        "TIME(6)",
        "DECIMAL(20, 2)",
    ]
    big = [-128, -(2**15), 2**100, -(2**120), 10**38 - 1, 0]
    cols: list[list[Any]] = [
        [None if i % 5 == 1 else Decimal(big[i % 6] * (1 if i % 2 else -1)) for i in range(n)],
        [
            None if i % 6 == 0 else pd.Timestamp(int(x), unit="ns")
            for i, x in enumerate(rng.integers(-(2**62), 2**62, n))
        ],
        [None if i % 4 == 0 else "k" * (i % 40) for i in range(n)],
        [
            None if i % 3 == 0 else dt.datetime(1969, 12, 31, 23, 59, 59, i, tzinfo=UTC)
            for i in range(n)
        ],
        [None if i % 7 == 0 else bytes([i % 256]) * 9 for i in range(n)],
        [dt.time(i % 24, 1, 2, (i * 7919) % 1_000_000) for i in range(n)],
        [None if i % 2 else Decimal(i).scaleb(-2) for i in range(n)],
    ]
    types = _types(specs)
    columns = _arrow_columns(specs, cols)
    got = hash_rows(columns, types)
    rows = pa.table({f"c{i}": c for i, c in enumerate(columns)}).to_pylist()
    expected = [hash_row(list(r.values()), types) for r in rows]
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.int32))
    sliced = hash_rows([c[37:250] for c in columns], types)
    np.testing.assert_array_equal(sliced, got[37:250])


def test_fixed_width_keys_hash_as_their_binary_rows() -> None:
    """Keys whose values fit their slots hash straight from the columns (no rows laid out);
    every type of that path, with nulls in some rows and a second header word (65 fields),
    against the scalar encoder's bytes."""
    rng = np.random.default_rng(5)
    n = 400
    specs = ["TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "BOOLEAN", "DATE",
             "TIME(3)", "DECIMAL(18, 4)", "TIMESTAMP(3)", "TIMESTAMP(0) WITH LOCAL TIME ZONE"]
    values: list[list[Any]] = [
        rng.integers(-128, 128, n).tolist(),
        rng.integers(-(2**15), 2**15, n).tolist(),
        rng.integers(-(2**31), 2**31, n).tolist(),
        rng.integers(-(2**63), 2**63 - 1, n).tolist(),
        rng.standard_normal(n).astype(np.float32).tolist(),
        (rng.standard_normal(n) * 1e300).tolist(),
        (rng.random(n) < 0.5).tolist(),
        [dt.date(1960, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 40_000, n)],
        [dt.time(int(h), 7, 9, int(u) * 1000) for h, u in zip(rng.integers(0, 24, n),
                                                               rng.integers(0, 1000, n))],
        [Decimal(int(v)).scaleb(-4) for v in rng.integers(-(10**17), 10**17, n)],
        [dt.datetime(1969, 12, 31, 23, 59, 59) + dt.timedelta(milliseconds=int(v))
         for v in rng.integers(-(10**9), 10**9, n)],
        [dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=int(v))
         for v in rng.integers(-(10**8), 10**8, n)],
    ]
    cols = [[None if (i + j) % 7 == 0 else v for i, v in enumerate(c)]
            for j, c in enumerate(values)]
    types = _types(specs)
    columns = _arrow_columns(specs, cols)
    rows = pa.table({f"c{i}": c for i, c in enumerate(columns)}).to_pylist()
    expected = np.array([hash_row(list(r.values()), types) for r in rows], dtype=np.int32)
    np.testing.assert_array_equal(hash_rows(columns, types), expected)
    for j in range(len(specs)):  # each type alone, null-free: the header mixed as a scalar
        alone = [pa.array(values[j], type=to_arrow(types[j]))]
        np.testing.assert_array_equal(
            hash_rows(alone, [types[j]]),
            np.array([hash_row([v], [types[j]]) for v in alone[0].to_pylist()], np.int32))
    wide = [pa.array([None if (i * k) % 11 == 3 else i - k for i in range(n)], pa.int32())
            for k in range(65)]
    wide_types = _types(["INT"] * 65)
    rows = pa.table({f"c{i}": c for i, c in enumerate(wide)}).to_pylist()
    np.testing.assert_array_equal(
        hash_rows(wide, wide_types),
        np.array([hash_row(list(r.values()), wide_types) for r in rows], np.int32))
