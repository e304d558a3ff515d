"""Tags: ``tag/tag-<name>`` holds the tagged snapshot's JSON, exactly as Paimon writes a tag
without a retention. A tag pins its snapshot: expiry keeps every file and manifest it needs.
Creating, listing and deleting tags is here; reading them is ``lakecore.store.tags``'s.

Deleting a tag whose snapshot has already expired also removes the files only that tag still
held (Paimon's ``TagManager.deleteTag``): its live files that neither neighbour — the previous
tag, and the earlier of the next tag and the earliest snapshot — holds; the same for its index
files and its index manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecore.errors import SnapshotNotExistError, TagAlreadyExistError
from lakecore.format.snapshot import Snapshot
from lakecore.maintenance.refs import (
    DataPaths,
    FileRef,
    added_entries,
    delete_files,
    entries_or_none,
    index_entries_or_none,
    index_names,
    list_or_none,
    list_ref,
    live_entries,
    live_file_keys,
    metadata_names,
    paths_report,
    snapshot_or_none,
)
from lakecore.store.file_store import FileStore
from lakecore.store.tags import check_tag_name, read_tags, tag_snapshot
from lakecore.utils.faults import CrashStep, maybe_crash


@dataclass(frozen=True)
class TagInfo:
    """One tag: its name and the snapshot it pins."""

    name: str
    snapshot_id: int
    commit_kind: str
    time_millis: int
    total_record_count: int

    @staticmethod
    def of(name: str, snap: Snapshot) -> TagInfo:
        return TagInfo(name, snap.id, snap.commit_kind.value, snap.time_millis,
                       snap.total_record_count)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def list_tags(table: FileStore) -> list[TagInfo]:
    """Every tag, ordered by snapshot id then name."""
    return [TagInfo.of(n, s) for n, s in read_tags(table)]


def create_tag(
    table: FileStore,
    name: str,
    snapshot_id: int | None = None,
    *,
    ignore_if_exists: bool = False,
) -> TagInfo:
    """Tag ``snapshot_id`` (default: the latest snapshot). Created atomically if absent."""
    check_tag_name(name)
    sm = table.snapshot_manager
    sid = snapshot_id if snapshot_id is not None else sm.latest_id()
    if sid is None:
        raise SnapshotNotExistError(f"{table.identifier} has no snapshot to tag")
    snap = sm.snapshot(sid)
    if not table.file_io.try_create(table.paths.tag_path(name), snap.to_json().encode()):
        if ignore_if_exists:
            return TagInfo.of(name, tag_snapshot(table, name))
        raise TagAlreadyExistError(f"tag {name!r} already exists in {table.identifier}")
    maybe_crash(CrashStep.TAG_AFTER_CREATE)
    return TagInfo.of(name, snap)


@dataclass(frozen=True)
class TagDeleteReport:
    """What deleting a tag removed: the tag and the files only it held."""

    dry_run: bool
    name: str
    snapshot_id: int
    files: tuple[FileRef, ...]
    files_removed: int
    bytes_removed: int
    note: str = ""

    def to_dict(self, paths: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": "delete-tag", "dry_run": self.dry_run,
                               "tag": self.name, "snapshot_id": self.snapshot_id,
                               "files_removed": self.files_removed,
                               "bytes_removed": self.bytes_removed, "note": self.note}
        if paths:
            out["paths"] = paths_report(self.files)
        return out


def plan_tag_cleanup(table: FileStore, name: str) -> tuple[Snapshot, list[FileRef], str]:
    """The files deleting tag ``name`` frees: none while its snapshot exists or another tag
    pins the same snapshot; otherwise what no neighbour holds."""
    snap = tag_snapshot(table, name)
    sm = table.snapshot_manager
    if snapshot_or_none(table, snap.id) is not None:
        return snap, [], "snapshot still exists; only the tag file goes"
    tags = read_tags(table)
    if sum(1 for _, s in tags if s.id == snap.id) > 1:
        return snap, [], "another tag pins the same snapshot; only the tag file goes"
    earliest = sm.earliest_id()
    if earliest is not None and earliest < snap.id:
        return snap, [], ("the tagged snapshot is missing but later than the earliest snapshot; "
                          "files left to orphan-file removal")
    left = [s for _, s in tags if s.id < snap.id]
    right = [s for _, s in tags if s.id > snap.id]
    neighbours = left[-1:]
    right_candidates = right[:1] + ([sm.snapshot(earliest)] if earliest is not None else [])
    if right_candidates:
        neighbours.append(min(right_candidates, key=lambda s: s.id))
    mio = table.manifest_io()
    keep_files = set().union(*(live_file_keys(mio, s) for s in neighbours))
    keep_meta = set().union(*(metadata_names(mio, s) for s in neighbours))
    keep_index = set().union(*(index_names(mio, s) for s in neighbours))
    paths = DataPaths(table)
    files: dict[str, FileRef] = {}
    for e in live_entries(mio, snap).values():
        if (e.partition, e.bucket, e.file.file_name) in keep_files:
            continue
        for ref in paths.refs(e.partition, e.bucket, e.file):
            files.setdefault(ref.path, ref)
    for e in added_entries(entries_or_none(mio, snap.changelog_manifest_list) or ()):
        for ref in paths.refs(e.partition, e.bucket, e.file):
            files.setdefault(ref.path, ref)
    for list_name, size in ((snap.base_manifest_list, snap.base_manifest_list_size),
                            (snap.delta_manifest_list, snap.delta_manifest_list_size),
                            (snap.changelog_manifest_list, snap.changelog_manifest_list_size)):
        if not list_name or list_name in keep_meta:
            continue
        for m in list_or_none(mio, list_name) or ():
            if m.file_name not in keep_meta:
                ref = FileRef(table.paths.manifest_path(m.file_name), m.file_size)
                files.setdefault(ref.path, ref)
        ref = list_ref(table, list_name, size)
        files.setdefault(ref.path, ref)
    if snap.index_manifest and snap.index_manifest not in keep_index:
        entries = index_entries_or_none(mio, snap.index_manifest) or []
        for path, ref in paths.index_refs(entries, keep_index).items():
            files.setdefault(path, ref)
        ref = list_ref(table, snap.index_manifest, None)
        files.setdefault(ref.path, ref)
    return snap, list(files.values()), ""


def delete_tag(table: FileStore, name: str, *, dry_run: bool = True) -> TagDeleteReport:
    """Delete a tag (the tag file first, then the files only it held)."""
    snap, files, note = plan_tag_cleanup(table, name)
    if dry_run:
        return TagDeleteReport(True, name, snap.id, tuple(files), len(files),
                               sum(f.size for f in files), note)
    table.file_io.delete_quietly(table.paths.tag_path(name))
    maybe_crash(CrashStep.TAG_DELETE_AFTER_TAG_FILE)
    n, size = delete_files(table, files, CrashStep.TAG_DELETE_MID_FILES)
    return TagDeleteReport(False, name, snap.id, tuple(files), n, size, note)


__all__ = ["TagDeleteReport", "TagInfo", "create_tag", "delete_tag", "list_tags",
           "plan_tag_cleanup"]
