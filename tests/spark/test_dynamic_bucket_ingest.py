"""The Spark ingest into a dynamic-bucket table (``bucket = -1``): rows are shuffled by
assigner channel, each write task assigns the buckets of its channel's keys with the
partition's HASH index, and the driver commits once."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.spark.ingest import IngestRequest, default_commit_user, ingest_dataframe
from tests.core.test_dynamic_bucket import index_files, keys_by_bucket
from tests.spark import helpers as h

pytestmark = pytest.mark.slow

TARGET = 20


def _ingest(spark, table, warehouse, data: pa.Table, ident: int, tmp_path, **kw):
    df = spark.read.parquet(h.write_parquet(str(tmp_path / "src"), f"b{ident}", data))
    request = IngestRequest(ident, default_commit_user("ingest", table.identifier, ident), **kw)
    return ingest_dataframe(spark, df, table, warehouse, request)


def test_ingest_assigns_dynamic_buckets_across_tasks(spark, warehouse, tmp_path):
    table = h.create(warehouse, "db.dyn", bucket="-1",
                     **{"dynamic-bucket.target-row-num": str(TARGET),
                        "dynamic-bucket.initial-buckets": "2"})
    data = h.batches(3, rows=300)
    owners: dict[tuple[str, int], int] = {}
    inserted: set[tuple[str, int]] = set()
    for ident, b in enumerate(data, start=1):
        result = _ingest(spark, table, warehouse, b, ident, tmp_path, parallelism=3)
        assert not result.skipped and len(result.snapshot_ids) == 1  # one commit per ingest
        inserted |= {(r["dt"], r["id"]) for r in b.to_pylist()}
        placed = keys_by_bucket(table)
        seen: dict[tuple[str, int], int] = {}
        for (dt, bucket), ids in placed.items():
            for i in ids:
                assert (dt, i) not in seen, f"{(dt, i)} in buckets {seen[(dt, i)]}, {bucket}"
                seen[(dt, i)] = bucket
        assert all(seen[k] == b_ for k, b_ in owners.items() if k in seen)  # no key moved
        owners.update(seen)
    assert h.rows(table) == h.model(data)
    # the index holds every key ever written (deleted ones keep their hash), none beyond
    # the target per bucket, and both assigners of each partition opened buckets
    idx = index_files(table)
    for dt in h.DTS:
        counts = {b: m.row_count for (d, b), m in idx.items() if d == dt}
        assert sum(counts.values()) == len({k for k in inserted if k[0] == dt})
        assert max(counts.values()) <= TARGET
        assert {b % 2 for b in counts} == {0, 1}


def test_partition_overwrite_of_a_dynamic_table(spark, warehouse, tmp_path):
    table = h.create(warehouse, "db.dynow", bucket="-1",
                     **{"dynamic-bucket.target-row-num": "10"})
    base = h.batches(1, rows=120)[0]
    _ingest(spark, table, warehouse, base, 1, tmp_path, parallelism=2)
    day = h.DTS[0]
    fresh = h.batch([(day, 5_000 + i, "+I") for i in range(15)], 9)
    _ingest(spark, table, warehouse, fresh, 2, tmp_path, parallelism=2,
            overwrite_partition={"dt": day})
    got = h.rows(table)
    assert [r for r in got if r["dt"] == day] == fresh.to_pylist()
    assert [r for r in got if r["dt"] != day] == [r for r in h.model([base]) if r["dt"] != day]
    placed = keys_by_bucket(table)
    assert sum(len(ids) for (dt, _), ids in placed.items() if dt == day) == 15
    # the next plain ingest still finds every key's bucket
    again = h.batch([(day, 5_000 + i, "+U") for i in range(15)], 10)
    _ingest(spark, table, warehouse, again, 3, tmp_path, parallelism=2)
    after = keys_by_bucket(table)
    assert {k: v for k, v in after.items() if k[0] == day} == \
        {k: v for k, v in placed.items() if k[0] == day}
    assert [r for r in h.rows(table) if r["dt"] == day] == again.to_pylist()
