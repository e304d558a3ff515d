"""``dev.lakecore.oracle.Bench`` (the Java side of bench/java_paimon.py) at a tiny size.

Three Parquet commits and an upsert, one round of the three table kinds the benchmark runs (a
fixed-bucket primary-key table, a deletion-vector table with dedicated compactions, a
dynamic-bucket table): every read's checksum must be the one of the expected merge (the upsert
replaces base rows by id), and the tables must hold data files afterwards.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.javapaimon.client import JAR
from tests.javapaimon.conftest import java_or_skip

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("i32", pa.int32()),
    pa.field("i64", pa.int64()),
    pa.field("f64", pa.float64()),
    pa.field("s", pa.string()),
    pa.field("ts", pa.timestamp("us")),
])
FORMAT = {"file.format": "parquet", "file.compression": "zstd",
          "file.compression.zstd-level": "1", "target-file-size": "128 mb"}
PK_PHASES = ["write", "upsert", "read", "compact", "read_compacted"]
DV_PHASES = ["write", "compact", "upsert", "compact_minor", "read"]
WORKLOADS = [
    {"name": "pk_b2", "options": {**FORMAT, "bucket": "2", "write-only": "true"},
     "phases": PK_PHASES},
    {"name": "dv_b2", "options": {**FORMAT, "bucket": "2", "deletion-vectors.enabled": "true",
                                  "write-only": "true"}, "phases": DV_PHASES},
    # a small target row count: the 3,000 keys spread over several dynamic buckets
    {"name": "dyn", "options": {**FORMAT, "bucket": "-1", "write-only": "true",
                                "dynamic-bucket.target-row-num": "1000"}, "phases": PK_PHASES},
]


def rows(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    null = rng.random(n) < 0.1
    words = ["", "a", "lake", "Straße", "湖", "emoji 🙂"]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "i32": pa.array(rng.integers(-2**31, 2**31, n), pa.int32(), mask=null),
        # large values: the sums wrap around, on both sides
        "i64": pa.array(rng.integers(-2**62, 2**62, n), pa.int64(), mask=rng.random(n) < 0.1),
        "f64": pa.array(rng.normal(size=n), pa.float64(), mask=rng.random(n) < 0.1),
        "s": pa.array([None if rng.random() < 0.1 else f"{words[i % 6]}-{i}" for i in ids],
                      pa.string()),
        "ts": pa.array(1_700_000_000_000_000 + rng.integers(0, 10**12, n), pa.int64(),
                       mask=rng.random(n) < 0.1).cast(pa.timestamp("us")),
    }, schema=SCHEMA)


def wrap(n: int) -> int:
    """A sum as a Java long (and an Arrow int64 sum): two's complement, wrapped."""
    return (n + 2**63) % 2**64 - 2**63


def expected_checksum(t: pa.Table) -> dict[str, Any]:
    def total(col: str) -> int:
        return wrap(sum(v for v in t[col].to_pylist() if v is not None))

    ts = t["ts"].cast(pa.int64())
    return {
        "rows": t.num_rows,
        "sum_id": total("id"),
        "sum_i32": total("i32"),
        "non_null_i32": t.num_rows - t["i32"].null_count,
        "sum_i64": total("i64"),
        "non_null_i64": t.num_rows - t["i64"].null_count,
        "non_null_f64": t.num_rows - t["f64"].null_count,
        "non_null_s": t.num_rows - t["s"].null_count,
        "s_bytes": int(pc.sum(pc.binary_length(t["s"])).as_py()),
        "sum_ts_us": wrap(sum(v for v in ts.to_pylist() if v is not None)),
        "non_null_ts": t.num_rows - t["ts"].null_count,
    }


def test_bench_main(tmp_path: Path) -> None:
    java_or_skip()
    rng = np.random.default_rng(7)
    base = rows(rng.permutation(3000).astype(np.int64), rng)
    upsert = rows(rng.choice(3000, size=500, replace=False).astype(np.int64), rng)
    commits = []
    for i in range(3):
        commits.append(str(tmp_path / f"c{i}.parquet"))
        pq.write_table(base.slice(i * 1000, 1000), commits[-1])
    pq.write_table(upsert, tmp_path / "upsert.parquet")
    spec = {"warehouse": str(tmp_path / "wh"), "rounds": 1, "commits": commits,
            "upsert": str(tmp_path / "upsert.parquet"), "workloads": WORKLOADS}
    (tmp_path / "spec.json").write_text(json.dumps(spec))

    proc = subprocess.run(
        ["java", "-Xmx1g", "-cp", str(JAR), "dev.lakecore.oracle.Bench",
         str(tmp_path / "spec.json")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.stdout.strip().count("\n") == 0, "stdout must carry the result only"

    merged = pa.concat_tables(
        [base.filter(pc.invert(pc.is_in(base["id"], value_set=upsert["id"]))), upsert])
    want = expected_checksum(merged)
    want_f64 = pc.sum(merged["f64"]).as_py()
    assert out["rows_loaded"] == 3500
    assert out["load_s"] >= 0 and out["jvm_uptime_at_main_s"] > 0
    assert len(out["round_wall_s"]) == 1
    assert [r["workload"] for r in out["results"]] == [w["name"] for w in WORKLOADS]
    for res, w in zip(out["results"], WORKLOADS):
        name = res["workload"]
        assert res["round"] == 0
        assert list(res["phases"]) == w["phases"], name
        assert all(s > 0 for s in res["phases"].values()), name
        reads = [p for p in w["phases"] if p.startswith("read")]
        assert sorted(res["checksums"]) == sorted(reads), name
        for phase in reads:
            got = res["checksums"][phase]
            assert {k: got[k] for k in want} == want, (name, phase)
            assert got["sum_f64"] == pytest.approx(want_f64, rel=1e-9, abs=1e-9), (name, phase)
        assert res["files"]["count"] > 0 and res["files"]["bytes"] > 0, name
        # 3 base commits + the upsert + the compactions' commits
        compactions = [p for p in w["phases"] if p.startswith("compact")]
        assert res["snapshots"] == 4 + len(compactions), name
        assert all(c["new_snapshot"] for c in res["compactions"].values()), name
    by_name = {r["workload"]: r for r in out["results"]}
    assert by_name["dyn"]["bucket_mode"] == "HASH_DYNAMIC"
    # the dynamic table has several buckets; after the full compaction, one file each
    assert by_name["dyn"]["compactions"]["compact"]["buckets"] >= 3
    assert by_name["dyn"]["files"]["count"] == by_name["dyn"]["compactions"]["compact"]["buckets"]
    assert by_name["pk_b2"]["files"]["count"] == 2
    # the deletion-vector table: Paimon's own picks after the upsert mark old rows in deletion
    # vectors instead of rewriting the compacted files
    assert by_name["dv_b2"]["files"]["with_deletion_vector"] > 0
