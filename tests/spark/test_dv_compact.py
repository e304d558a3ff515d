"""Compaction of a deletion-vector table on Spark: executors mark vectors, the driver commits the
buckets' new index files with the COMPACT snapshot; the result equals the library's."""

from __future__ import annotations

from lakecore.compact.job import compact
from lakecore.format.index_manifest import DELETION_VECTORS_INDEX
from lakecore.spark import read_table
from lakecore.spark.compact import CompactRequest, compact_table
from tests.spark import helpers as h

DV = {"deletion-vectors.enabled": "true", "write-only": "true"}


def _filled(warehouse, name, data):
    table = h.create(warehouse, name, **DV)
    h.library_commit(table, data[0], 1, "lib")
    return table


def _vectors(table):
    entries = table.index_entries(table.snapshot_manager.latest(), DELETION_VECTORS_INDEX)
    return sorted((e.partition, e.bucket, r.cardinality) for e in entries
                  for r in (e.index_file.dv_ranges or {}).values())


def _small_changes(base, version, n=30):
    """Updates and deletes of a few keys of ``base``: small next to what is compacted."""
    keys = list(zip(base["dt"].to_pylist(), base["id"].to_pylist(), strict=True))
    picks = keys[version::max(1, len(keys) // n)][:n]
    return h.batch([(dt, i, "-D" if j % 4 == 0 else "+U") for j, (dt, i) in enumerate(picks)],
                   version)


def test_spark_compaction_marks_vectors_like_the_library(spark, warehouse):
    base = h.batches(1, rows=3000)[0]
    data = [base, _small_changes(base, 1), _small_changes(base, 2)]
    table = _filled(warehouse, "db.spark", data)
    twin = _filled(warehouse, "db.lib", data)
    assert h.rows(table) == []  # level 0 is invisible until compacted
    compact_table(spark, table, warehouse, CompactRequest())
    compact(twin)
    assert h.rows(table) == h.rows(twin) == h.model(data[:1])
    for i, b in enumerate(data[1:], start=2):
        h.library_commit(table, b, i, "lib")
        h.library_commit(twin, b, i, "lib")
        out = compact_table(spark, table, warehouse, CompactRequest())
        compact(twin)
        assert len(out.snapshot_ids) == 1
        assert h.rows(table) == h.rows(twin) == h.model(data[:i])
    assert _vectors(table) == _vectors(twin) != []
    # Spark executors read the splits with their vectors applied
    got = read_table(spark, warehouse, "db.spark").toPandas().to_dict("records")
    assert sorted((r["dt"], r["id"], r["v"]) for r in got) == [
        (r["dt"], r["id"], r["v"]) for r in h.model(data)]
