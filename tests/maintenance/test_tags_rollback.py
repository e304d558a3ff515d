"""Tags (create, list, delete, read by tag) and rollback to a snapshot or a tag."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from lakecore.errors import (
    MaintenanceError,
    SnapshotNotExistError,
    TagAlreadyExistError,
    TagNotExistError,
)
from lakecore.maintenance import (
    ExpireConfig,
    create_tag,
    delete_tag,
    expire_snapshots,
    list_tags,
    rollback_to,
)
from lakecore.maintenance.rollback import execute_rollback, plan_rollback
from lakecore.store.tags import scan_tag_snapshot, tag_snapshot
from tests.compat.pypaimon_runner import requires_paimon
from tests.core.helpers import read, table_files, write
from tests.maintenance.helpers import (
    assert_paimon_agrees,
    commit_n,
    data_files,
    full_compact,
    missing_referenced_files,
    pk_table,
    read_snapshot,
    read_views,
    rows,
    upgrade_single_files,
)

FUTURE = datetime.now() + timedelta(days=1)


def expire_all_but(t, n: int) -> None:
    expire_snapshots(t, dry_run=False, config=ExpireConfig(n, n, timedelta(0), 1000),
                     now=FUTURE)


def test_create_list_read_delete(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    info = create_tag(t, "nightly")  # latest
    assert (info.name, info.snapshot_id) == ("nightly", 3)
    create_tag(t, "first", 1)
    assert [(x.name, x.snapshot_id) for x in list_tags(t)] == [("first", 1), ("nightly", 3)]
    raw = t.file_io.read_text(t.paths.tag_path("first"))
    assert raw == t.file_io.read_text(t.paths.snapshot_path(1))  # the snapshot JSON
    assert scan_tag_snapshot(t.copy({"scan.tag-name": "first"})).id == 1
    assert scan_tag_snapshot(t) is None
    with pytest.raises(TagAlreadyExistError):
        create_tag(t, "first", 2)
    assert create_tag(t, "first", 2, ignore_if_exists=True).snapshot_id == 1
    report = delete_tag(t, "first")
    assert report.dry_run and t.file_io.exists(t.paths.tag_path("first"))
    report = delete_tag(t, "first", dry_run=False)
    assert report.files == () and "snapshot still exists" in report.note
    with pytest.raises(TagNotExistError):
        tag_snapshot(t, "first")
    with pytest.raises(SnapshotNotExistError):
        create_tag(t, "nope", 42)
    for bad in ("", " ", "a/b", "..", "x\n"):
        with pytest.raises(MaintenanceError):
            create_tag(t, bad)


def test_deleting_the_tag_of_an_expired_snapshot_frees_only_its_files(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))                                      # 1
    create_tag(t, "one", 1)
    write(t, rows([3], "b", 1))                                         # 2
    create_tag(t, "two", 2)
    write(t, rows([9], "a", 2), overwrite={"dt": "a"})                  # 3
    full_compact(t)                                                     # 4
    commit_n(t, 2, start=20)                                            # 5, 6
    expire_all_but(t, 1)
    assert [len(read_snapshot(t, tag_snapshot(t, n))) for n in ("one", "two")] == [2, 3]
    before = data_files(t)
    report = delete_tag(t, "two", dry_run=False)
    # tag one still holds the dt=a file, so only the dt=b file of snapshot 2 goes (plus
    # manifests only tag two used)
    gone = before - data_files(t)
    assert len(gone) == 1 and report.files_removed >= 1
    assert missing_referenced_files(t) == []
    assert read_views(t)[("tag", "one")] == [{"dt": "a", "id": 1, "v": 1},
                                             {"dt": "a", "id": 2, "v": 1}]
    delete_tag(t, "one", dry_run=False)
    remaining = read_views(t)
    assert list(remaining) == [("snapshot", 6)] and missing_referenced_files(t) == []


def test_rollback_to_snapshot(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2, 3], "a", 1))                                   # 1
    commit_n(t, 1, start=10)                                            # 2
    target = read_views(t)[("snapshot", 2)]
    before_files = table_files(t)
    write(t, rows([4], "c", 1))                                         # 3
    full_compact(t)                                                     # 4
    create_tag(t, "after", 4)
    create_tag(t, "keep", 1)
    dry = rollback_to(t, snapshot_id=2)
    assert dry.dry_run and dry.plan.snapshot_ids == (4, 3) and dry.plan.tags == ("after",)
    assert t.snapshot_manager.latest_id() == 4
    report = rollback_to(t, snapshot_id=2, dry_run=False)
    assert report.snapshots_removed == 2 and report.tags_removed == 1
    assert t.snapshot_manager.list_ids() == [1, 2]
    assert t.file_io.read_text(t.paths.latest_hint).strip() == "2"
    assert [x.name for x in list_tags(t)] == ["keep"]
    assert table_files(t) == sorted([*before_files, "tag/tag-keep"])  # later files all gone
    assert read_snapshot(t, t.snapshot_manager.latest()) == target
    (sid,) = write(t, rows([7], "d", 1))  # the table moves on from the rollback point
    assert sid == 3 and {r["dt"] for r in read(t)} == {"a", "2024-01-01", "d"}
    assert missing_referenced_files(t) == []
    assert rollback_to(t, snapshot_id=3, dry_run=False).snapshots_removed == 0  # no-op


def test_rollback_keeps_a_file_upgraded_after_the_target(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))                                      # 1
    (f,) = data_files(t)
    upgrade_single_files(t)                                             # 2: same file, level 5
    commit_n(t, 1)                                                      # 3
    rollback_to(t, snapshot_id=1, dry_run=False)
    assert f in data_files(t)
    assert read(t, ["id"]) == [{"id": 1, "dt": "a", "v": 1}, {"id": 2, "dt": "a", "v": 1}]
    assert missing_referenced_files(t) == []


def test_rollback_to_tag_of_expired_snapshot_restores_it(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 2)
    create_tag(t, "restore", 2)
    content = read_views(t)[("tag", "restore")]
    write(t, rows([1], "2024-01-01", 99), overwrite={"dt": "2024-01-01"})
    full_compact(t)
    commit_n(t, 3, start=30)
    expire_all_but(t, 1)
    assert t.snapshot_manager.list_ids() == [7]
    rollback_to(t, tag="restore", dry_run=False)
    assert t.snapshot_manager.list_ids() == [2]
    assert t.snapshot_manager.earliest_id() == 2
    assert t.file_io.read_text(t.paths.earliest_hint).strip() == "2"
    assert read_snapshot(t, t.snapshot_manager.latest()) == content
    assert missing_referenced_files(t) == []
    assert len(data_files(t)) == 2  # only the files of snapshot 2 are left


def test_rollback_refuses_a_table_that_moved_and_needs_one_target(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    plan = plan_rollback(t, snapshot_id=1)
    commit_n(t, 1, start=9)
    with pytest.raises(MaintenanceError, match="changed since"):
        execute_rollback(t, plan)
    with pytest.raises(MaintenanceError, match="exactly one"):
        rollback_to(t)
    with pytest.raises(MaintenanceError, match="exactly one"):
        rollback_to(t, snapshot_id=1, tag="x")


@requires_paimon
def test_pypaimon_after_tags_tag_deletion_and_rollback(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    create_tag(t, "t2", 2)
    write(t, rows([1], "2024-01-01", 7), overwrite={"dt": "2024-01-01"})
    full_compact(t)
    commit_n(t, 2, start=10)
    create_tag(t, "t6", 6)
    expire_all_but(t, 2)                       # snapshots 6, 7 stay; t2 outlives snapshot 2
    create_tag(t, "latest")
    assert_paimon_agrees(t, tmp_path)
    delete_tag(t, "t6", dry_run=False)         # snapshot 6 still exists
    rollback_to(t, snapshot_id=6, dry_run=False)
    assert_paimon_agrees(t, tmp_path)
    rollback_to(t, tag="t2", dry_run=False)    # restores the expired snapshot 2
    commit_n(t, 1, start=40)
    assert t.snapshot_manager.list_ids() == [2, 3]
    assert_paimon_agrees(t, tmp_path)
