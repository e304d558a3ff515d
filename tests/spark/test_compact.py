"""Compaction on Spark (library level, the shared session)."""

from __future__ import annotations

import contextlib

import pytest

from lakecore.compact.job import compact
from lakecore.format.snapshot import CommitKind
from lakecore.spark.compact import CompactRequest, compact_table, round_robin
from lakecore.spark.messages import SparkTaskError
from tests.core.helpers import table_files
from tests.spark import helpers as h


def _layout(table):
    """(partition, bucket, level) of every live file, sorted."""
    plan = table.new_read_builder().new_scan().plan()
    return sorted((s.partition, s.bucket, f.level) for s in plan.splits() for f in s.files)


def _filled(warehouse, name):
    table = h.create(warehouse, name)
    data = h.batches(4, rows=200)
    for i, b in enumerate(data, start=1):
        h.library_commit(table, b, i, "lib")
    return table, data


def test_full_compaction_equals_library_compaction(spark, warehouse):
    table, data = _filled(warehouse, "db.spark")
    twin, _ = _filled(warehouse, "db.lib")
    out = compact_table(spark, table, warehouse, CompactRequest(full=True))
    compact(twin, full=True)
    assert len(out.snapshot_ids) == 1 and out.buckets_planned == out.after.buckets == 9
    snap = table.snapshot_manager.snapshot(out.snapshot_ids[0])
    assert snap.commit_kind is CommitKind.COMPACT
    assert out.commit_identifier == out.base_snapshot_id == 4
    assert h.rows(table) == h.rows(twin) == h.model(data)
    top = table.options.num_levels - 1
    assert _layout(table) == _layout(twin)
    assert {level for _, _, level in _layout(table)} == {top}
    # nothing left to do: a second run plans nothing and commits nothing
    again = compact_table(spark, table, warehouse, CompactRequest(full=True))
    assert again.snapshot_ids == () and "no bucket needs compaction" in again.skipped_reason


def test_partition_filter_and_max_buckets(spark, warehouse):
    table, data = _filled(warehouse, "db.t")
    day = {"dt": h.DTS[0]}
    out = compact_table(spark, table, warehouse,
                        CompactRequest(partitions=(day,), full=True, max_buckets=2))
    assert out.buckets_planned == 2
    touched = {(p, b) for p, b, lvl in _layout(table) if lvl > 0}
    assert len(touched) == 2 and {p for p, _ in touched} == {(h.DTS[0],)}
    assert h.rows(table) == h.model(data)


def test_ingest_committing_meanwhile_does_not_conflict(spark, warehouse):
    table, data = _filled(warehouse, "db.t")
    extra = h.batches(5, rows=200)[4]

    @contextlib.contextmanager
    def stage(name):
        if name == "commit":  # another writer commits between plan and compaction commit
            h.library_commit(table, extra, 99, "ingest-meanwhile")
        yield

    out = compact_table(spark, table, warehouse, CompactRequest(full=True), stage=stage)
    kinds = [table.snapshot_manager.snapshot(i).commit_kind for i in (5, 6)]
    assert kinds == [CommitKind.APPEND, CommitKind.COMPACT] and out.snapshot_ids == (6,)
    assert h.rows(table) == h.model([*data, extra])


def test_failed_bucket_deletes_every_written_file(spark, warehouse, monkeypatch):
    table, data = _filled(warehouse, "db.t")
    before = table_files(table)
    # make one bucket's input unreadable: its task fails, the others' outputs are deleted
    victim = next(p for p in h.data_files(table) if "bucket-1" in p)
    with open(victim, "r+b") as f:
        f.truncate(10)
    with pytest.raises(SparkTaskError, match="compaction task failed"):
        compact_table(spark, table, warehouse, CompactRequest(full=True, parallelism=3))
    assert table_files(table) == before
    assert table.snapshot_manager.latest_id() == 4


def test_round_robin_spreads_big_buckets():
    assert round_robin(list(range(7)), 3) == [0, 3, 6, 1, 4, 2, 5]
