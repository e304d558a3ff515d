"""Snapshot expiry on real tables: what is and is not deleted, idempotence, gaps, concurrent
expirers, and pypaimon reading every retained snapshot and tag afterwards."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.maintenance import ExpireConfig, create_tag, expire_snapshots, plan_expire_snapshots
from lakecore.maintenance.expire_snapshots import execute_expire_plan
from lakecore.maintenance.refs import live_entries
from tests.compat.pypaimon_runner import requires_paimon
from tests.core.helpers import table_files, write
from tests.maintenance.helpers import (
    assert_paimon_agrees,
    commit_n,
    data_files,
    full_compact,
    missing_referenced_files,
    pk_table,
    read_views,
    rows,
    upgrade_single_files,
)

LATER = datetime.now() + timedelta(days=1)


def keep(n: int, limit: int = 1000) -> ExpireConfig:
    """Keep the newest ``n`` snapshots, no time protection."""
    return ExpireConfig(retain_min=n, retain_max=n, time_retained=timedelta(0),
                        max_deletes=limit)


def live_names(table) -> set[str]:
    latest = table.snapshot_manager.latest()
    return {e.file.file_name for e in live_entries(table.manifest_io(), latest).values()}


def assert_intact(table, before) -> None:
    after = read_views(table)
    for key, content in after.items():
        assert content == before[key], key
    assert missing_referenced_files(table) == []


def test_default_retention_keeps_an_hour_then_ten(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 15)
    assert expire_snapshots(t, dry_run=False).snapshots_removed == 0  # all younger than 1 h
    report = expire_snapshots(t, dry_run=False, now=datetime.now() + timedelta(hours=2))
    assert report.snapshots_removed == 5 and report.plan.end_snapshot_id == 6
    assert t.snapshot_manager.list_ids() == list(range(6, 16))
    assert t.file_io.read_text(t.paths.earliest_hint).strip() == "6"


def test_dry_run_deletes_nothing_and_reports_the_plan(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))
    write(t, rows([1, 2], "a", 2), overwrite={"dt": "a"})
    commit_n(t, 3)
    files = table_files(t)
    report = expire_snapshots(t, config=keep(1), now=LATER)
    assert report.dry_run and report.snapshots_removed == 4
    assert report.files_removed == len(report.plan.files) > 0
    assert report.bytes_removed == sum(f.size for f in report.plan.files) > 0
    assert table_files(t) == files
    assert {"path", "size"} <= set(report.to_dict(paths=True)["plan"]["paths"][0])


def test_overwritten_files_go_only_when_no_kept_snapshot_needs_them(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))                       # 1
    write(t, rows([3], "a", 1))                          # 2
    first = live_names(t)
    write(t, rows([9], "a", 2), overwrite={"dt": "a"})   # 3 deletes both files of dt=a
    commit_n(t, 2, dt="b")                               # 4, 5
    before = read_views(t)
    expire_snapshots(t, dry_run=False, config=keep(4), now=LATER)  # expire 1 only
    assert first <= data_files(t)                        # snapshot 2 still needs them
    expire_snapshots(t, dry_run=False, config=keep(3), now=LATER)  # expire 2; 3 is kept
    assert not first & data_files(t)                     # 3 no longer has them: gone
    assert_intact(t, before)


def test_full_compaction_inputs_go_and_output_stays(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 4)
    inputs = live_names(t)
    full_compact(t)                                      # 5
    outputs = live_names(t)
    commit_n(t, 1, start=10)                             # 6
    before = read_views(t)
    report = expire_snapshots(t, dry_run=False, config=keep(1), now=LATER)
    assert report.plan.snapshot_ids == (1, 2, 3, 4, 5)
    assert not inputs & data_files(t) and outputs <= data_files(t)
    assert_intact(t, before)


def test_upgraded_file_shared_across_snapshots_is_kept(tmp_path):
    # Paimon testExpireWithUpgradedFile: a COMPACT commit that only moves f to level 5 has
    # DELETE f@0 and ADD f@5 in one delta; expiring the snapshot before it must keep f.
    t = pk_table(tmp_path)
    write(t, rows([1, 2, 3], "a", 1))                    # 1: f at level 0
    (f,) = live_names(t)
    upgrade_single_files(t)                              # 2: f at level 5
    latest = t.snapshot_manager.latest()
    assert {e.file.level for e in live_entries(t.manifest_io(), latest).values()} == {5}
    write(t, rows([4], "b", 1))                          # 3
    before = read_views(t)
    report = expire_snapshots(t, dry_run=False, config=keep(1), now=LATER)
    assert report.snapshots_removed == 2 and f in data_files(t)
    assert_intact(t, before)


def test_tag_keeps_files_of_expired_snapshots(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))                       # 1
    create_tag(t, "restore-point", 1)
    tagged = live_names(t)
    write(t, rows([7], "a", 2), overwrite={"dt": "a"})   # 2 deletes the tagged file
    full_compact(t)                                      # 3
    commit_n(t, 2, start=20)                             # 4, 5
    before = read_views(t)
    expire_snapshots(t, dry_run=False, config=keep(1), now=LATER)
    assert t.snapshot_manager.list_ids() == [5]
    assert tagged <= data_files(t)
    assert_intact(t, before)  # includes reading the tag


def test_changelog_files_go_with_their_snapshot_even_when_tagged(tmp_path):
    # Paimon's ExpireSnapshotsImpl deletes the changelog of every expired snapshot, tagged or
    # not (a tag keeps data, not changelog); the tag still reads
    t = pk_table(tmp_path, **{"changelog-producer": "input"})
    commit_n(t, 4)
    sm, mio = t.snapshot_manager, t.manifest_io()

    def logs(sid: int) -> set[str]:
        return {e.file.file_name for e in mio.read_entries(
            mio.read_manifest_list(sm.snapshot(sid).changelog_manifest_list))}

    log1, log2 = logs(1), logs(2)
    assert log1 and all(n.startswith("changelog-") for n in log1)
    create_tag(t, "two", 2)
    before = read_views(t)
    report = expire_snapshots(t, dry_run=False, config=keep(1), now=LATER)
    assert len(report.plan.changelog_files) == 3  # snapshots 1, 2 (tagged) and 3
    assert not (log1 | log2) & data_files(t)
    tag_log = t.snapshot_manager.snapshot(4).changelog_manifest_list
    assert t.file_io.exists(t.paths.manifest_path(tag_log))  # the kept snapshot's
    assert_intact(t, before)


def test_expire_limit_and_rerun_are_idempotent(tmp_path):
    t = pk_table(tmp_path, **{"snapshot.expire.limit": "3", "snapshot.num-retained.min": "2",
                              "snapshot.time-retained": "1 ms"})
    commit_n(t, 10)
    assert expire_snapshots(t, dry_run=False, now=LATER).plan.snapshot_ids == (1, 2, 3)
    assert expire_snapshots(t, dry_run=False, now=LATER).plan.snapshot_ids == (4, 5, 6)
    plan = plan_expire_snapshots(t, now=LATER)
    first = execute_expire_plan(t, plan)
    again = execute_expire_plan(t, plan)  # a rerun of the same plan only finds nothing to do
    assert first.snapshots_removed == 2 and again.snapshots_removed == 0
    assert again.files_removed == 0
    assert t.snapshot_manager.list_ids() == [9, 10]


def test_gap_left_by_hand_deleted_snapshot_is_tolerated(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    full_compact(t)                                      # 4
    commit_n(t, 3, start=10)                             # 5-7
    t.file_io.delete(t.paths.snapshot_path(3))
    t.file_io.delete(t.paths.earliest_hint)
    before = read_views(t)
    report = expire_snapshots(t, dry_run=False, config=keep(2), now=LATER)
    assert report.plan.snapshot_ids == (1, 2, 4, 5)
    assert t.snapshot_manager.list_ids() == [6, 7]
    assert_intact(t, before)


def test_two_expirers_interleaved(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    full_compact(t)                                      # 4
    commit_n(t, 4, start=10)                             # 5-8
    full_compact(t)                                      # 9
    commit_n(t, 2, start=20)                             # 10, 11
    before = read_views(t)
    slow = plan_expire_snapshots(t, config=keep(7), now=LATER)   # planned first ...
    fast = plan_expire_snapshots(t, config=keep(2), now=LATER)
    execute_expire_plan(t, fast)
    execute_expire_plan(t, slow)                                   # ... executed last
    assert t.snapshot_manager.list_ids() == [10, 11]
    assert t.snapshot_manager.earliest_id() == 10
    assert t.file_io.read_text(t.paths.earliest_hint).strip() == "10"
    assert_intact(t, before)


def test_clean_empty_directories(tmp_path):
    t = pk_table(tmp_path, **{"snapshot.clean-empty-directories": "true"})
    write(t, rows([1], "gone", 1))
    write(t, rows([2], "stays", 1))
    FileStoreCommit(t, "dropper").overwrite([], partition_filter=lambda p: p == ("gone",))
    commit_n(t, 1, dt="stays")
    expire_snapshots(t, dry_run=False, config=keep(1), now=LATER)
    assert not t.file_io.exists(f"{t.table_path}/dt=gone")
    assert t.file_io.exists(f"{t.table_path}/dt=stays/bucket-0")


@requires_paimon
def test_pypaimon_reads_every_retained_snapshot_and_tag_after_expiry(tmp_path):
    t = pk_table(tmp_path, **{"changelog-producer": "input"})
    commit_n(t, 3)
    create_tag(t, "t3", 3)
    write(t, rows([1, 50], "2024-01-01", 9), overwrite={"dt": "2024-01-01"})
    commit_n(t, 2, start=30, dt="2024-01-02")
    upgrade_single_files(t)
    full_compact(t)
    create_tag(t, "compacted")
    commit_n(t, 4, start=40)
    before = read_views(t)
    expire_snapshots(t, dry_run=False, config=keep(3), now=LATER)
    assert_intact(t, before)
    assert_paimon_agrees(t, tmp_path)


@pytest.mark.parametrize("limit", [1, 2])
def test_plan_is_a_value(tmp_path, limit):
    t = pk_table(tmp_path)
    commit_n(t, 4)
    plan = plan_expire_snapshots(t, config=keep(1, limit), now=LATER)
    assert plan == plan_expire_snapshots(t, config=keep(1, limit), now=LATER)
    assert plan.snapshot_ids == tuple(range(1, 1 + limit))


def test_after_commit_hook_skips_write_only_and_applies_the_table_policy(tmp_path):
    from lakecore.maintenance import after_commit

    t = pk_table(tmp_path, **{"snapshot.num-retained.min": "2",
                              "partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyyMMdd"})
    write(t, rows([1], "20230101", 1))
    commit_n(t, 3, dt="20990101")
    assert after_commit(t, now=LATER) is None  # write-only: a maintenance job does it
    writer_view = t.copy({"write-only": "false"})
    report = after_commit(writer_view, now=LATER)
    assert report is not None and report.partitions is not None
    assert report.partitions.plan.expired == ({"dt": "20230101"},)
    assert report.snapshots.snapshots_removed == 3  # 5 snapshots now, 2 kept
    assert after_commit(writer_view, now=LATER).partitions is None  # inside the interval
    assert report.to_dict()["snapshots"]["operation"] == "expire-snapshots"
