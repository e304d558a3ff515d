"""Postpone-bucket tables (``bucket = -2``): writes land in ``bucket-postpone`` and stay
invisible until the dedicated compaction assigns them to real buckets, as in Paimon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.compact.job import commit_compaction, compact, plan_compaction, run_task
from lakecore.compact.postpone import PostponeTask
from lakecore.errors import CorruptFileError, NullKeyError
from lakecore.format.bucket import POSTPONE_BUCKET, bucket_ids
from lakecore.format.manifest import FileKind
from lakecore.format.snapshot import CommitKind
from lakecore.schema.types import from_arrow
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string()),
                    ("n", pa.int64()), ("op", pa.string())])
KEY = ["dt", "id"]
DAYS = ["d1", "d2", "d3"]


def _table(tmp_path: Path, name: str = "db.t", **options: str):
    opts = {"bucket": "-2", "rowkind.field": "op", **options}
    return make_table(str(tmp_path), SCHEMA, primary_keys=KEY, partition_keys=["dt"],
                      options=opts, name=name)


def _batch(rng: np.random.Generator, version: int, n: int = 120) -> pa.Table:
    ids = rng.integers(0, 60, n)
    days = rng.integers(0, 2, n)
    ops = np.where(rng.random(n) < 0.15, "-D", "+I")
    return pa.table({"id": ids, "dt": [DAYS[d] for d in days],
                     "v": [f"v{version}-{i}" for i in range(n)], "n": np.full(n, version),
                     "op": ops}, schema=SCHEMA)


def _model(batches: list[pa.Table]) -> list[dict[str, Any]]:
    state: dict[tuple, dict[str, Any]] = {}
    for b in batches:
        for r in b.to_pylist():
            k = (r["dt"], r["id"])
            if r["op"] == "-D":
                state.pop(k, None)
            else:
                state[k] = {**r, "op": r["op"]}
    return [state[k] for k in sorted(state)]


def _live(table) -> list[tuple[tuple, int, int, int]]:
    """(partition, bucket, total buckets, level) of every live file, with postpone files."""
    snap = table.snapshot_manager.latest()
    mio = table.manifest_io()
    metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
        snap.delta_manifest_list)
    from lakecore.store.manifest_io import merge_entries

    return sorted((table.partition_codec.decode(e.partition), e.bucket, e.total_buckets,
                   e.file.level) for e in merge_entries(mio.read_entries(metas)).values())


def test_writes_are_invisible_until_the_compaction_assigns_buckets(tmp_path):
    t = _table(tmp_path, **{"postpone.default-bucket-num": "3"})
    rng = np.random.default_rng(1)
    batches = [_batch(rng, v) for v in range(3)]
    for b in batches:
        write(t, b)
    assert read(t) == []
    files = table_files(t)
    data = [f for f in files if "/bucket-" in f]
    assert data and all("/bucket-postpone/data--u-" in f and "-s-" in f for f in data)
    assert {b for _, b, _, _ in _live(t)} == {POSTPONE_BUCKET}
    assert {n for _, _, n, _ in _live(t)} == {POSTPONE_BUCKET}

    report = compact(t)
    snap = t.snapshot_manager.latest()
    assert snap.commit_kind is CommitKind.COMPACT and report.snapshot_ids == (snap.id,)
    assert read(t, sort_by=KEY) == _model(batches)
    live = _live(t)
    assert {(b, n) for _, b, n, _ in live} <= {(0, 3), (1, 3), (2, 3)}
    # the COMPACT snapshot deleted exactly the replayed postpone files
    mio = t.manifest_io()
    delta = mio.read_entries(mio.read_manifest_list(snap.delta_manifest_list))
    gone = {e.file.file_name for e in delta if e.kind is FileKind.DELETE}
    assert gone == {f.rsplit("/", 1)[-1] for f in data}
    assert all(e.bucket == POSTPONE_BUCKET for e in delta if e.kind is FileKind.DELETE)
    # nothing pending any more
    assert compact(t).skipped_reason is not None


def test_rows_sit_in_the_bucket_paimons_hash_gives_them(tmp_path):
    t = _table(tmp_path, **{"postpone.default-bucket-num": "4"})
    data = _batch(np.random.default_rng(2), 0)
    write(t, data)
    compact(t)
    key_types = [from_arrow(pa.int64(), False)]
    for split in t.new_read_builder().new_scan().plan().splits():
        for f in split.files:
            path = t.paths.data_file_path(split.partition, split.bucket, f.file_name)
            ids = pq.read_table(path, columns=["id"]).column("id")
            assert set(bucket_ids([ids], key_types, 4)) == {split.bucket}


def test_known_bucket_count_wins_over_the_default_and_later_writes_merge(tmp_path):
    t = _table(tmp_path, **{"postpone.default-bucket-num": "2"})
    rng = np.random.default_rng(3)
    first = [_batch(rng, 0)]
    write(t, first[0])
    compact(t)
    # a new default applies to new partitions only; d1/d2 keep their 2 buckets
    t2 = t.copy({"postpone.default-bucket-num": "5"})
    later = [_batch(rng, v) for v in (1, 2)]
    later.append(pa.table({"id": [7], "dt": ["d3"], "v": ["new"], "n": [9], "op": ["+I"]},
                          schema=SCHEMA))
    for b in later:
        write(t2, b)
    assert read(t2, sort_by=KEY) == _model(first)  # not visible yet
    compact(t2)
    assert read(t2, sort_by=KEY) == _model(first + later)
    counts = {(p, n) for p, b, n, _ in _live(t2)}
    assert counts == {(("d1",), 2), (("d2",), 2), (("d3",), 5)}


def test_target_row_num_per_bucket_sizes_new_partitions(tmp_path):
    t = _table(tmp_path, **{"postpone.target-row-num-per-bucket": "25"})
    data = pa.table({"id": list(range(60)), "dt": ["d1"] * 60, "v": ["x"] * 60,
                     "n": [0] * 60, "op": ["+I"] * 60}, schema=SCHEMA)
    write(t, data)
    compact(t)
    assert {n for _, _, n, _ in _live(t)} == {3}  # ceil(60 / 25)
    assert len(read(t)) == 60


def test_full_compaction_leaves_one_sorted_run_per_bucket(tmp_path):
    t = _table(tmp_path, **{"postpone.default-bucket-num": "2"})
    rng = np.random.default_rng(4)
    batches = [_batch(rng, v) for v in range(4)]
    for b in batches[:2]:
        write(t, b)
    compact(t)
    for b in batches[2:]:
        write(t, b)
    compact(t, full=True)
    top = t.options.num_levels - 1
    assert {lvl for _, _, _, lvl in _live(t)} == {top}
    assert read(t, sort_by=KEY) == _model(batches)


def test_files_written_while_the_compaction_runs_stay_pending(tmp_path):
    t = _table(tmp_path)
    rng = np.random.default_rng(5)
    b1, b2 = _batch(rng, 1), _batch(rng, 2)
    write(t, b1)
    plan = plan_compaction(t)
    assert all(isinstance(task, PostponeTask) for task in plan.tasks)
    messages = [m for task in plan.tasks for m in run_task(t, task, False)]
    write(t, b2)  # lands between the plan and the commit
    commit_compaction(t, messages, base_snapshot_id=plan.snapshot_id)
    assert read(t, sort_by=KEY) == _model([b1])
    assert POSTPONE_BUCKET in {b for _, b, _, _ in _live(t)}
    compact(t)
    assert read(t, sort_by=KEY) == _model([b1, b2])


def test_partial_update_replays_in_write_order(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"],
                   options={"bucket": "-2", "merge-engine": "partial-update"})
    write(t, pa.table({"id": [1, 2], "a": ["a1", None], "b": [None, "b2"]}, schema=schema))
    write(t, pa.table({"id": [1, 2], "a": [None, "a2"], "b": ["b1", None]}, schema=schema))
    write(t, pa.table({"id": [1], "a": ["a1-new"], "b": [None]}, schema=schema))
    compact(t)
    assert read(t, sort_by="id") == [{"id": 1, "a": "a1-new", "b": "b1"},
                                     {"id": 2, "a": "a2", "b": "b2"}]


def test_input_changelog_is_the_replayed_records(tmp_path):
    t = _table(tmp_path, **{"changelog-producer": "input"})
    data = pa.table({"id": [1, 2, 1], "dt": ["d1"] * 3, "v": ["a", "b", "c"], "n": [0, 0, 1],
                     "op": ["+I", "+I", "-D"]}, schema=SCHEMA)
    before = write(t, data)[-1]
    after = compact(t).snapshot_ids[-1]
    rb = t.copy({"incremental-between": f"{before},{after}"}).new_read_builder()
    log = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    # the records as the postpone files hold them (a writer merges one commit's rows per key)
    assert sorted(zip(log.column("id").to_pylist(), log.column("_ROW_KIND").to_pylist())) == [
        (1, "-D"), (2, "+I")]
    assert read(t) == [{"id": 2, "dt": "d1", "v": "b", "n": 0, "op": "+I"}]


def test_expiry_and_orphan_removal_know_the_postpone_directory(tmp_path):
    t = _table(tmp_path, **{"snapshot.num-retained.min": "1",
                            "snapshot.num-retained.max": "1"})
    write(t, _batch(np.random.default_rng(6), 0))
    pending = [f for f in table_files(t) if "bucket-postpone" in f]
    from datetime import timedelta

    t.remove_orphan_files(older_than=timedelta(0), dry_run=False)
    assert [f for f in table_files(t) if "bucket-postpone" in f] == pending  # live: kept
    compact(t)
    t.expire_snapshots(dry_run=False)
    assert [f for f in table_files(t) if "bucket-postpone/" in f] == []  # replayed: deleted
    assert read(t)


def test_corrupt_postpone_file_fails_the_compaction_and_changes_nothing(tmp_path):
    t = _table(tmp_path)
    write(t, _batch(np.random.default_rng(7), 0))
    victim = next(f for f in table_files(t) if "bucket-postpone" in f)
    path = f"{t.table_path}/{victim}"
    with open(path, "r+b") as fh:
        fh.truncate(40)
    before = table_files(t)
    latest = t.snapshot_manager.latest_id()
    with pytest.raises(CorruptFileError, match="bucket-postpone"):
        compact(t)
    assert table_files(t) == before
    assert t.snapshot_manager.latest_id() == latest


def test_null_key_is_a_typed_error_and_the_table_is_unchanged(tmp_path):
    t = _table(tmp_path)
    bad = pa.table({"id": [1, None], "dt": ["d1", "d1"], "v": ["a", "b"], "n": [0, 0],
                    "op": ["+I", "+I"]}, schema=SCHEMA)
    before = table_files(t)
    with pytest.raises(NullKeyError, match="'id'") as info:
        write(t, bad)
    assert info.value.column == "id" and info.value.count == 1
    assert table_files(t) == before
    assert t.snapshot_manager.latest_id() is None


def test_overwrite_replaces_the_partition_once_the_compaction_runs(tmp_path):
    """An overwrite deletes the partition's files (real and pending) and writes pending ones:
    readers see the partition empty until the compaction, then exactly the new rows, in the
    default bucket count (the old buckets are gone with their files)."""
    t = _table(tmp_path, **{"postpone.default-bucket-num": "2"})
    rng = np.random.default_rng(8)
    old = _batch(rng, 0)
    write(t, old)
    compact(t.copy({"postpone.default-bucket-num": "3"}))
    new = pa.table({"id": [1, 2], "dt": ["d1", "d1"], "v": ["n1", "n2"], "n": [5, 5],
                    "op": ["+I", "+I"]}, schema=SCHEMA)
    write(t, new, overwrite={"dt": "d1"})
    kept = [r for r in _model([old]) if r["dt"] != "d1"]
    assert read(t, sort_by=KEY) == kept
    compact(t)
    assert read(t, sort_by=KEY) == sorted(kept + new.to_pylist(),
                                          key=lambda r: (r["dt"], r["id"]))
    assert {(p, n) for p, _, n, _ in _live(t)} == {(("d1",), 2), (("d2",), 3)}
