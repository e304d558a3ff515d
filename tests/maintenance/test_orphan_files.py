"""Orphan-file removal: what counts as orphan, the age guard, dry run, refusals."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta

import pytest

from lakecore.errors import MaintenanceError
from lakecore.maintenance import (
    ExpireConfig,
    create_tag,
    expire_partitions,
    expire_snapshots,
    remove_orphan_files,
)
from lakecore.maintenance.refs import live_entries
from tests.compat.pypaimon_runner import requires_paimon
from tests.core.helpers import table_files, write
from tests.maintenance.helpers import (
    assert_paimon_agrees,
    commit_n,
    full_compact,
    pk_table,
    read_views,
    rows,
)

FUTURE = datetime.now() + timedelta(days=3)
OLD = (datetime.now() - timedelta(days=2)).timestamp()


def age(*paths: str) -> None:
    for p in paths:
        os.utime(p, (OLD, OLD))


def history(tmp_path, **opts):
    """Compaction, a tag, an overwrite, partition expiry state and snapshot expiry."""
    t = pk_table(tmp_path, **{"partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyyMMdd", **opts})
    commit_n(t, 3, dt="20230101")
    create_tag(t, "t1", 1)
    full_compact(t)
    write(t, rows([5], "20230102", 1), overwrite={"dt": "20230102"})
    commit_n(t, 2, start=10, dt="20230103")
    expire_partitions(t, now=datetime(2023, 1, 3), dry_run=False)  # drops 20230101
    expire_snapshots(t, dry_run=False, config=ExpireConfig(2, 2, timedelta(0), 100),
                     now=FUTURE)
    return t


def test_a_consistent_table_has_no_orphans(tmp_path):
    t = history(tmp_path)
    before = table_files(t)
    report = remove_orphan_files(t, older_than=timedelta(0), now=FUTURE, dry_run=False)
    assert report.files == () and table_files(t) == before


def test_orphans_are_listed_by_default_and_removed_on_request(tmp_path):
    t = history(tmp_path)
    latest = t.snapshot_manager.latest()
    e = next(iter(live_entries(t.manifest_io(), latest).values()))
    bucket = t.paths.bucket_path(t.partition_codec.decode(e.partition), e.bucket)
    orphans = [f"{bucket}/data-orphan-0.parquet", f"{t.paths.manifest_dir}/manifest-orphan-0",
               f"{t.paths.manifest_dir}/manifest-list-orphan-0",
               f"{t.paths.snapshot_dir}/.snapshot-9.leftover.tmp",
               f"{t.paths.tag_dir}/.tag-x.leftover.tmp"]
    shutil.copy(f"{bucket}/{e.file.file_name}", orphans[0])
    for p in orphans[1:]:
        with open(p, "wb") as f:
            f.write(b"x" * 7)
    young = f"{bucket}/data-being-written-0.parquet"
    shutil.copy(orphans[0], young)
    age(*orphans, *(s.path for s in t.file_io.list_status(t.table_path, recursive=True)
                    if not s.is_dir and s.path != young))
    before = read_views(t)
    listed = remove_orphan_files(t)  # default: dry run, 1 day
    assert listed.dry_run and sorted(f.path for f in listed.files) == sorted(orphans)
    assert all(os.path.exists(p) for p in orphans)
    assert listed.bytes_removed == sum(os.path.getsize(p) for p in orphans)
    assert {"path", "size"} <= set(listed.to_dict()["paths"][0])
    done = remove_orphan_files(t, dry_run=False)
    assert done.files_removed == len(orphans)
    assert not any(os.path.exists(p) for p in orphans) and os.path.exists(young)
    assert read_views(t) == before
    # never touched: schema, snapshot/tag files and hints, lakecore's own state
    rest = table_files(t)
    for kept in ("schema/schema-0", "snapshot/LATEST", "snapshot/EARLIEST", "tag/tag-t1"):
        assert kept in rest
    assert any(p.startswith("_lakecore/expired-partitions/") for p in rest)


def test_uncommitted_writer_files_become_orphans_once_old(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1], "a", 1))
    w = t.new_batch_write_builder().new_write()
    w.write_arrow(rows([2, 3], "a", 2))
    msgs = w.prepare_commit()  # a job that died before committing
    (name,) = [f.file_name for m in msgs for f in m.new_files]
    assert remove_orphan_files(t, dry_run=False).files == ()  # young: a commit may be running
    report = remove_orphan_files(t, older_than=timedelta(0), now=FUTURE, dry_run=False)
    assert [f.path.rsplit("/", 1)[-1] for f in report.files] == [name]


def test_files_of_tags_and_of_delete_entries_are_kept(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2], "a", 1))
    create_tag(t, "first", 1)
    write(t, rows([3], "a", 2), overwrite={"dt": "a"})
    expire_snapshots(t, dry_run=False, config=ExpireConfig(1, 1, timedelta(0), 10), now=FUTURE)
    before = table_files(t)
    assert remove_orphan_files(t, older_than=timedelta(0), now=FUTURE).files == ()
    assert table_files(t) == before


def test_cut_off_in_the_future_or_negative_age_is_refused(tmp_path):
    t = pk_table(tmp_path)
    with pytest.raises(MaintenanceError, match="later than now"):
        remove_orphan_files(t, older_than=datetime.now() + timedelta(hours=1))
    with pytest.raises(MaintenanceError, match="negative"):
        remove_orphan_files(t, older_than=timedelta(hours=-1))


def test_tables_with_branches_are_refused(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1], "a", 1))
    os.makedirs(f"{t.table_path}/branch/branch-dev/snapshot")
    with pytest.raises(MaintenanceError, match="branches"):
        remove_orphan_files(t)


@requires_paimon
def test_pypaimon_reads_after_orphan_removal(tmp_path):
    t = history(tmp_path)
    for s in t.file_io.list_status(t.table_path, recursive=True):
        if not s.is_dir:
            age(s.path)
    remove_orphan_files(t, dry_run=False)
    assert_paimon_agrees(t, tmp_path)
