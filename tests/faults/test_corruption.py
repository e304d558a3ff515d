"""Damaged table files: a typed error naming the file, other snapshots still readable, and
nothing ever built on the damage.

Each case damages one file of the newest snapshot (3) of a three-snapshot table, then checks:

* reading snapshot 3 raises ``CorruptFileError`` whose message and ``.path`` name the file;
* snapshots 1 and 2 (which do not need the file) still read exactly as before;
* where the damage is in metadata (snapshot file, manifest), a writer committing on top of it
  (a fresh writer, and messages prepared before the damage) raises ``CorruptFileError`` and
  creates no snapshot; orphan-file removal refuses to run instead of treating the files the
  unreadable metadata names as orphans; a compaction over a missing or truncated data file
  fails the same way and leaves nothing behind.

The LATEST / EARLIEST hints are hints (as in Paimon): a hint past the end, empty, garbage,
stale or naming a deleted snapshot is ignored and the snapshot directory listed instead, so
reads and commits go on from the true latest snapshot.

A damaged index manifest (HASH indexes, deletion vectors) is named the same way: no commit is
built on it (a plain data commit decodes it too, since it carries it forward) and orphan
removal refuses to run.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import CommitMessage
from lakecore.errors import CorruptFileError
from lakecore.format.index_manifest import HASH_INDEX, IndexFileMeta
from lakecore.maintenance import remove_orphan_files
from lakecore.store import manifest_cache
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, table_files
from tests.faults.harness import read_rows

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])
USER = "corruption-test"
LATER = datetime.now() + timedelta(days=1)


def batch(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "dt": ["a"] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def commit(table: FileStoreTable, data: pa.Table, identifier: int) -> tuple[int, ...]:
    wb = table.new_stream_write_builder().with_commit_user(USER)
    w = wb.new_write()
    w.write_arrow(data)
    result = wb.new_commit().commit(w.prepare_commit(), identifier)
    w.close()
    return result.snapshot_ids


def prepare(table: FileStoreTable, data: pa.Table) -> list[Any]:
    w = table.new_stream_write_builder().with_commit_user(USER).new_write()
    w.write_arrow(data)
    return w.prepare_commit()


def reopen(table: FileStoreTable, warehouse: Path) -> FileStoreTable:
    """The table as a new process sees it (no cached snapshot, no decoded manifest)."""
    manifest_cache.clear()
    return CatalogFactory.create({"warehouse": str(warehouse)}).get_table("db.t")


@pytest.fixture
def t(tmp_path: Path) -> FileStoreTable:
    table = make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                       options={"bucket": "1", "write-only": "true"})
    for i, ids in enumerate([[1, 2], [3], [4]], start=1):
        assert commit(table, batch(ids, i), i) == (i,)
    return table


def _delta_manifest(t: FileStoreTable, sid: int) -> str:
    snap = t.snapshot_manager.snapshot(sid)
    return t.manifest_io().read_manifest_list(snap.delta_manifest_list)[0].file_name


def _data_file(t: FileStoreTable, sid: int) -> str:
    """The path of the one data file snapshot ``sid`` added."""
    [entry] = t.manifest_io().read_manifest(_delta_manifest(t, sid))
    return t.paths.data_file_path(("a",), entry.bucket, entry.file.file_name)


# -- the damage: each returns the path the error must name --------------------------------
def truncate_snapshot(t: FileStoreTable) -> str:
    path = t.paths.snapshot_path(3)
    with open(path, "r+b") as f:
        f.truncate(20)
    return path


def empty_snapshot(t: FileStoreTable) -> str:
    path = t.paths.snapshot_path(3)
    open(path, "wb").close()
    return path


def bad_avro_block(t: FileStoreTable) -> str:
    """Flip bytes inside the data block of snapshot 3's delta manifest (header intact)."""
    path = t.paths.manifest_path(_delta_manifest(t, 3))
    raw = bytearray(Path(path).read_bytes())
    for i in range(len(raw) - 40, len(raw) - 20):
        raw[i] ^= 0xFF
    Path(path).write_bytes(bytes(raw))
    return path


def truncated_manifest(t: FileStoreTable) -> str:
    path = t.paths.manifest_path(_delta_manifest(t, 3))
    raw = Path(path).read_bytes()
    Path(path).write_bytes(raw[: len(raw) // 2])
    return path


def missing_manifest_list(t: FileStoreTable) -> str:
    path = t.paths.manifest_path(t.snapshot_manager.snapshot(3).delta_manifest_list)
    os.remove(path)
    return path


def missing_data_file(t: FileStoreTable) -> str:
    path = _data_file(t, 3)
    os.remove(path)
    return path


def truncated_data_file(t: FileStoreTable) -> str:
    path = _data_file(t, 3)
    with open(path, "r+b") as f:
        f.truncate(30)
    return path


METADATA_DAMAGE: list[Callable[[FileStoreTable], str]] = [
    truncate_snapshot, empty_snapshot, bad_avro_block, truncated_manifest, missing_manifest_list]
DATA_DAMAGE: list[Callable[[FileStoreTable], str]] = [missing_data_file, truncated_data_file]


def _raises_naming(path: str, fn: Callable[[], Any]) -> CorruptFileError:
    with pytest.raises(CorruptFileError) as info:
        fn()
    name = os.path.basename(path)
    assert name in str(info.value), f"{info.value!r} does not name {name}"
    assert os.path.basename(info.value.path) == name
    return info.value


@pytest.mark.parametrize("damage", METADATA_DAMAGE + DATA_DAMAGE, ids=lambda f: f.__name__)
def test_damaged_file_is_named_and_older_snapshots_still_read(t, tmp_path, damage):
    before = {sid: read_rows(t, sid) for sid in (1, 2)}
    path = damage(t)
    t = reopen(t, tmp_path)
    _raises_naming(path, lambda: read_rows(t))
    _raises_naming(path, lambda: read_rows(t, 3))
    assert {sid: read_rows(t, sid) for sid in (1, 2)} == before


@pytest.mark.parametrize("damage", METADATA_DAMAGE, ids=lambda f: f.__name__)
def test_a_writer_never_builds_on_damaged_metadata(t, tmp_path, damage):
    path = damage(t)
    t = reopen(t, tmp_path)
    files = table_files(t)
    _raises_naming(path, lambda: commit(t, batch([6], 6), 6))  # fails before writing a file
    assert t.snapshot_manager.list_ids() == [1, 2, 3]
    assert table_files(t) == files


# a pure APPEND reads few manifests (see _try_commit_once): it still decodes the latest
# snapshot's changes, so files prepared before the damage (an executor's) are not committed on it
@pytest.mark.parametrize("damage", METADATA_DAMAGE, ids=lambda f: f.__name__)
def test_a_commit_of_prepared_files_never_builds_on_damaged_metadata(t, tmp_path, damage):
    prepared = prepare(t, batch([5], 5))  # an executor's files, committed after the damage
    path = damage(t)
    t = reopen(t, tmp_path)
    committer = t.new_stream_write_builder().with_commit_user(USER).new_commit()
    _raises_naming(path, lambda: committer.commit(prepared, 5))
    assert t.snapshot_manager.list_ids() == [1, 2, 3]
    assert t.snapshot_manager.latest_id() == 3


@pytest.mark.parametrize("damage", METADATA_DAMAGE, ids=lambda f: f.__name__)
def test_orphan_removal_refuses_to_run_on_damaged_metadata(t, tmp_path, damage):
    """It cannot tell what the damaged file references: nothing may be taken for an orphan."""
    prepare(t, batch([5], 5))  # a real orphan, older than the cut-off
    path = damage(t)
    t = reopen(t, tmp_path)
    files = table_files(t)
    _raises_naming(path, lambda: remove_orphan_files(t, older_than=timedelta(0), now=LATER,
                                                     dry_run=False))
    assert table_files(t) == files


@pytest.mark.parametrize("damage", DATA_DAMAGE, ids=lambda f: f.__name__)
def test_compaction_over_a_damaged_data_file_fails_and_leaves_nothing(t, tmp_path, damage):
    path = damage(t)
    t = reopen(t, tmp_path)
    files = table_files(t)
    _raises_naming(path, lambda: t.compact(full=True, commit_user="compactor"))
    assert t.snapshot_manager.list_ids() == [1, 2, 3]
    assert table_files(t) == files


def _set_hint(t: FileStoreTable, which: str, content: str | None) -> None:
    path = t.paths.latest_hint if which == "LATEST" else t.paths.earliest_hint
    if content is None:
        os.remove(path)
    else:
        Path(path).write_text(content)


@pytest.mark.parametrize("content", ["99", "", "garbage", "-1", "1", None],
                         ids=["past-the-end", "empty", "garbage", "negative", "stale", "absent"])
def test_bad_latest_hint_falls_back_to_listing(t, tmp_path, content):
    rows = read_rows(t)
    _set_hint(t, "LATEST", content)
    t = reopen(t, tmp_path)
    assert t.snapshot_manager.latest_id() == 3
    assert read_rows(t) == rows
    assert commit(t, batch([7], 7), 7) == (4,)  # the next id, not 100 and not 2
    assert t.snapshot_manager.list_ids() == [1, 2, 3, 4]
    assert Path(t.paths.latest_hint).read_text() == "4"


def test_latest_hint_naming_a_deleted_snapshot(t, tmp_path):
    """LATEST = 3 but snapshot-3 was deleted by hand: the latest is 2, and the next commit
    makes a new snapshot 3 (on snapshot 2's files)."""
    os.remove(t.paths.snapshot_path(3))
    t = reopen(t, tmp_path)
    assert Path(t.paths.latest_hint).read_text() == "3"
    assert t.snapshot_manager.latest_id() == 2
    assert read_rows(t) == read_rows(t, 2)
    assert commit(t, batch([8], 8), 8) == (3,)
    assert sorted(r["id"] for r in read_rows(t)) == [1, 2, 3, 8]


@pytest.mark.parametrize("content", ["0", "", "garbage", "99"],
                         ids=["zero", "empty", "garbage", "past-the-end"])
def test_bad_earliest_hint_falls_back_to_listing(t, tmp_path, content):
    _set_hint(t, "EARLIEST", content)
    t = reopen(t, tmp_path)
    assert t.snapshot_manager.earliest_id() == 1
    assert [s.id for s in t.snapshot_manager.snapshots_backward()] == [3, 2, 1]


# -- a damaged index manifest -------------------------------------------------------------
def _with_index(t: FileStoreTable) -> tuple[FileStoreTable, IndexFileMeta]:
    """Snapshot 4 adds a HASH index file for (dt=a, bucket 0): an index manifest to damage."""
    name = t.paths.new_index_file_name()
    t.file_io.write_bytes(t.paths.index_file_path(name), struct.pack(">ii", 1, 2))
    meta = IndexFileMeta(HASH_INDEX, name, 8, 2)
    FileStoreCommit(t, USER).commit([CommitMessage(("a",), 0, 1, new_index_files=(meta,))], 4)
    return t, meta


def truncated_index_manifest(t: FileStoreTable) -> str:
    path = t.paths.manifest_path(t.snapshot_manager.snapshot(4).index_manifest or "")
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    return path


def garbage_index_manifest(t: FileStoreTable) -> str:
    path = t.paths.manifest_path(t.snapshot_manager.snapshot(4).index_manifest or "")
    Path(path).write_bytes(b"Obj\x01 this is not an index manifest")
    return path


def missing_index_manifest(t: FileStoreTable) -> str:
    path = t.paths.manifest_path(t.snapshot_manager.snapshot(4).index_manifest or "")
    os.remove(path)
    return path


INDEX_DAMAGE = [truncated_index_manifest, garbage_index_manifest, missing_index_manifest]


@pytest.mark.parametrize("damage", INDEX_DAMAGE, ids=lambda f: f.__name__)
def test_a_damaged_index_manifest_is_named_and_nothing_is_built_on_it(t, tmp_path, damage):
    t, h0 = _with_index(t)
    before = read_rows(t, 3)
    prepared = prepare(t, batch([5], 5))  # an executor's files, committed after the damage
    path = damage(t)
    t = reopen(t, tmp_path)
    files = table_files(t)
    # a data commit (which carries the index manifest), an index change and an OVERWRITE
    # (which read it) all refuse, naming the file, and publish nothing
    committer = t.new_stream_write_builder().with_commit_user(USER).new_commit()
    _raises_naming(path, lambda: committer.commit(prepared, 5))
    name = t.paths.new_index_file_name()
    t.file_io.write_bytes(t.paths.index_file_path(name), struct.pack(">i", 3))
    replace = CommitMessage(("a",), 0, 1, deleted_index_files=(h0,),
                            new_index_files=(IndexFileMeta(HASH_INDEX, name, 4, 1),))
    _raises_naming(path, lambda: FileStoreCommit(t, USER).commit([replace], 6))
    _raises_naming(path, lambda: FileStoreCommit(t, USER).overwrite([], None, 7))
    assert t.snapshot_manager.list_ids() == [1, 2, 3, 4]
    new = set(table_files(t)) - set(files)
    assert {Path(f).name for f in new} == {name}  # only the writer's own file, kept for a retry
    # orphan removal cannot tell which index files the damaged manifest keeps: it refuses
    _raises_naming(path, lambda: remove_orphan_files(t, older_than=timedelta(0), now=LATER,
                                                     dry_run=False))
    assert set(table_files(t)) - set(files) == new
    # the snapshots before the index manifest still read as before
    assert read_rows(t, 3) == before
