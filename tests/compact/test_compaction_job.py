"""Dedicated compaction end to end: real files, real commits, results equal to the model."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore.cli.main import main as cli_main
from lakecore.compact.job import compact, plan_compaction, run_bucket_task
from lakecore.errors import CommitConflictError
from lakecore.format.snapshot import CommitKind
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64()), ("op", pa.string())])


def table(tmp_path, **opts):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": "2", "rowkind.field": "op", "write-only": "true", **opts})


def batch(ids, dt, v, op="+I"):
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids),
                     "op": [op] * len(ids)}, schema=SCHEMA)


def live_files(t):
    return [f for s in t.new_read_builder().new_scan().plan().splits() for f in s.files]


def fill(t, commits=6):
    model = {}
    rng = np.random.default_rng(3)
    for i in range(commits):
        ids = rng.choice(500, 120, replace=False)
        write(t, batch(ids, "a", i), batch(ids[:40], "b", i))
        model.update({("a", int(k)): i for k in ids})
        model.update({("b", int(k)): i for k in ids[:40]})
    dels = [k for (d, k) in model if d == "a"][:30]
    write(t, batch(dels, "a", None, "-D"))
    for k in dels:
        model.pop(("a", k))
    return model


def as_model(t):
    return {(r["dt"], r["id"]): r["v"] for r in read(t)}


def test_full_compaction_leaves_one_sorted_run_at_max_level(tmp_path):
    t = table(tmp_path)
    model = fill(t)
    report = t.compact(full=True)
    assert report.snapshot_ids and report.files_after < report.files_before
    snap = t.snapshot_manager.snapshot(report.snapshot_ids[0])
    assert snap.commit_kind is CommitKind.COMPACT
    assert as_model(t) == model
    max_level = t.options.num_levels - 1
    for s in t.new_read_builder().new_scan().plan().splits():
        assert {f.level for f in s.files} == {max_level}
        # deletes are dropped at the max level
        assert all(f.delete_row_count == 0 for f in s.files)
    # nothing left to do
    assert plan_compaction(t, full=True).tasks == ()
    assert compact(t, full=True).skipped_reason


def test_universal_compaction_triggers_on_run_count(tmp_path):
    t = table(tmp_path, **{"num-sorted-run.compaction-trigger": "3"})
    write(t, batch(range(10), "a", 1))
    write(t, batch(range(5, 15), "a", 2))
    assert plan_compaction(t).tasks == ()  # two runs < trigger
    write(t, batch(range(12, 20), "a", 3))
    plan = plan_compaction(t)
    assert plan.tasks
    t.compact()
    assert {f.level for f in live_files(t)} - {0}  # moved up
    assert as_model(t) == {("a", i): (1 if i < 5 else 2 if i < 12 else 3) for i in range(20)}


def test_compaction_of_a_partition_only(tmp_path):
    t = table(tmp_path)
    model = fill(t, 3)
    t.compact(partitions=[{"dt": "b"}], full=True)
    levels = {(s.partition, f.level) for s in t.new_read_builder().new_scan().plan().splits()
              for f in s.files}
    assert {lv for (p, lv) in levels if p == ("a",)} == {0}
    assert {lv for (p, lv) in levels if p == ("b",)} == {t.options.num_levels - 1}
    assert as_model(t) == model


def test_concurrent_ingest_between_plan_and_commit_is_not_a_conflict(tmp_path):
    t = table(tmp_path)
    model = fill(t, 3)
    plan = plan_compaction(t, full=True)
    msgs = [m for m in (run_bucket_task(t, task, True) for task in plan.tasks) if m]
    write(t, batch(range(1000, 1010), "a", 99))  # unrelated new level-0 files
    model.update({("a", i): 99 for i in range(1000, 1010)})
    from lakecore.compact.job import commit_compaction

    commit_compaction(t, msgs, "compactor", base_snapshot_id=plan.snapshot_id)
    assert as_model(t) == model


def test_two_compactions_of_the_same_files_conflict_and_the_loser_cleans_up(tmp_path):
    t = table(tmp_path)
    model = fill(t, 3)
    from lakecore.compact.job import commit_compaction

    plan = plan_compaction(t, full=True)
    first = [m for m in (run_bucket_task(t, task, True) for task in plan.tasks) if m]
    second = [m for m in (run_bucket_task(t, task, True) for task in plan.tasks) if m]
    commit_compaction(t, first, "compactor-1", base_snapshot_id=plan.snapshot_id)
    before = table_files(t)
    with pytest.raises(CommitConflictError, match="compactor-2.*compactor-1"):
        commit_compaction(t, second, "compactor-2", base_snapshot_id=plan.snapshot_id)
    written = {f.file_name for m in second for f in m.compact_after}
    assert not [f for f in table_files(t) if f.rsplit("/", 1)[-1] in written]
    assert len(table_files(t)) == len(before) - len(written)
    assert as_model(t) == model


def test_compaction_streams_buckets_larger_than_a_chunk(tmp_path):
    t = table(tmp_path, bucket="1")
    n = 60_000
    for i in range(4):
        write(t, batch(range(i * 1000, n + i * 1000), "a", i))
    from lakecore.compact.executor import BucketCompactor

    split = t.new_read_builder().new_scan().plan().splits()[0]
    # tiny chunks force many merge rounds over the four runs
    bc = BucketCompactor(t, split.partition, split.bucket, split.files, chunk_rows=4096)
    result = bc.compact(full=True)
    assert sum(f.row_count for f in result.after) == n + 3000
    from lakecore.commit.message import CommitMessage
    from lakecore.compact.job import commit_compaction

    commit_compaction(t, [CommitMessage(split.partition, split.bucket, 1,
                                        compact_before=result.before,
                                        compact_after=result.after)])
    got = {r["id"]: r["v"] for r in read(t)}
    assert len(got) == n + 3000
    assert got[0] == 0 and got[n + 2999] == 3 and got[30_000] == 3


def test_append_table_bin_packing(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, options={"bucket": "-1"})
    for i in range(6):
        write(t, pa.table({"k": [i] * 10, "v": [str(i)] * 10}, schema=schema))
    before = sorted((r["k"], r["v"]) for r in read(t))
    report = t.compact()
    assert report.files_before == 6 and report.files_after == 1
    assert sorted((r["k"], r["v"]) for r in read(t)) == before


def test_cli_compact(tmp_path, capsys):
    t = table(tmp_path)
    model = fill(t, 2)
    rc = cli_main(["compact", "--warehouse", str(tmp_path), "--table", "db.t", "--full",
                   "--partition", "dt=a", "--json"])
    assert rc == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["buckets"] == 2 and out["snapshot_ids"]
    assert as_model(t) == model


def test_inline_compaction_when_not_write_only(tmp_path):
    t = table(tmp_path, **{"write-only": "false", "num-sorted-run.compaction-trigger": "3"})
    for i in range(3):
        (sid, *rest) = write(t, batch(range(i * 5, i * 5 + 10), "a", i))
    # the third commit reached the trigger: APPEND then COMPACT
    kinds = [t.snapshot_manager.snapshot(s).commit_kind for s in t.snapshot_manager.list_ids()]
    assert kinds == [CommitKind.APPEND] * 3 + [CommitKind.COMPACT]
    assert {f.level for f in live_files(t)} != {0}
    assert as_model(t) == {("a", i): (0 if i < 5 else 1 if i < 10 else 2) for i in range(20)}


def test_write_only_writers_never_compact(tmp_path):
    t = table(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    for i in range(4):
        write(t, batch(range(10), "a", i))
    kinds = {t.snapshot_manager.snapshot(s).commit_kind for s in t.snapshot_manager.list_ids()}
    assert kinds == {CommitKind.APPEND}
    assert {f.level for f in live_files(t)} == {0}


def test_full_compaction_delta_commits(tmp_path):
    t = table(tmp_path, **{"write-only": "false", "full-compaction.delta-commits": "2"})
    sb = t.new_stream_write_builder().with_commit_user("stream")
    w = sb.new_write()
    c = sb.new_commit()
    for i in range(4):
        w.write_arrow(batch(range(10), "a", i))
        c.commit(w.prepare_commit(i), i)
    max_level = t.options.num_levels - 1
    assert {f.level for f in live_files(t)} == {max_level}
    assert as_model(t) == {("a", i): 3 for i in range(10)}


def test_inline_compaction_conflict_keeps_the_appended_files(tmp_path):
    """APPEND lands, then another compactor rewrites the same files before our COMPACT: our
    COMPACT is dropped (the commit succeeds with ``compaction_dropped``, issue 15 item 4),
    only its own outputs are deleted, and no committed row is lost."""
    t = table(tmp_path, **{"write-only": "false", "num-sorted-run.compaction-trigger": "2"})
    write(t, batch(range(10), "a", 1))
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(batch(range(5, 15), "a", 2))
    msgs = w.prepare_commit()
    assert any(m.compact_before for m in msgs)
    from lakecore.commit.file_store_commit import FileStoreCommit

    commit = FileStoreCommit(t, "inline-writer")
    real = commit._publish

    def publish(latest, snapshot):
        if snapshot.commit_kind is CommitKind.COMPACT:
            t.copy({}).compact(full=True)  # a dedicated compactor wins the race
        return real(latest, snapshot)

    commit._publish = publish
    result = commit.commit(msgs)
    assert result.compaction_dropped and len(result.snapshot_ids) == 1
    assert as_model(t) == {("a", i): (1 if i < 5 else 2) for i in range(15)}
    ours = {f.file_name for m in msgs for f in m.compacted_files()}
    assert not [f for f in table_files(t) if f.rsplit("/", 1)[-1] in ours]


def test_stream_writer_recompacts_from_the_latest_snapshot_after_a_lost_compaction(tmp_path):
    t = table(tmp_path, **{"write-only": "false", "num-sorted-run.compaction-trigger": "2"})
    sb = t.new_stream_write_builder().with_commit_user("stream")
    w = sb.new_write()
    w.write_arrow(batch(range(10), "a", 0))
    sb.new_commit().commit(w.prepare_commit(0), 0)
    t.copy({}).compact(full=True)  # someone else compacts: our writer's view is stale now
    for i in range(1, 4):
        w.write_arrow(batch(range(10), "a", i))
        sb.new_commit().commit(w.prepare_commit(i), i)  # no conflict: it re-reads the files
    assert as_model(t) == {("a", k): 3 for k in range(10)}
