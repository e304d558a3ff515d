"""Rollback: make a snapshot (or a tag's snapshot) the latest again.

Later snapshots are deleted newest first under the catalog lock (the table stays a readable
prefix at every step), the LATEST hint moves to the target, tags of later snapshots go (their
ids will be reused by new commits, as in Paimon's ``RollbackHelper``), and then the data,
changelog and manifest files only the removed snapshots and tags used are deleted, and so are the
index files and index manifests only they listed (the target's and the kept tags' are kept).
Rolling back
to a tag whose snapshot already expired first writes the tag's JSON back as the snapshot file.

A crash after the snapshot files are gone but before the files are deleted leaves those files
unreferenced; ``remove_orphan_files`` collects them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lakecore.errors import MaintenanceError
from lakecore.format.snapshot import Snapshot
from lakecore.maintenance.refs import (
    DataPaths,
    FileRef,
    added_entries,
    delete_files,
    entries_or_none,
    file_key,
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
from lakecore.store.tags import read_tags, tag_snapshot
from lakecore.utils.faults import CrashStep, maybe_crash


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback to a snapshot or tag removes: later snapshots, tags and files."""

    target: Snapshot
    tag: str | None
    latest_id: int | None
    restore_snapshot_file: bool
    snapshot_ids: tuple[int, ...]  # newest first
    tags: tuple[str, ...]
    files: tuple[FileRef, ...]

    def to_dict(self, paths: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target_snapshot_id": self.target.id, "tag": self.tag,
            "latest_snapshot_id": self.latest_id,
            "restore_snapshot_file": self.restore_snapshot_file,
            "snapshot_ids": list(self.snapshot_ids), "tags": list(self.tags),
            "files": len(self.files), "bytes": sum(f.size for f in self.files),
        }
        if paths:
            out["paths"] = paths_report(self.files)
        return out


@dataclass(frozen=True)
class RollbackReport:
    """What a rollback removed (or would remove, in a dry run)."""

    dry_run: bool
    plan: RollbackPlan
    snapshots_removed: int
    tags_removed: int
    files_removed: int
    bytes_removed: int

    def to_dict(self, paths: bool = False) -> dict[str, Any]:
        return {"operation": "rollback", "dry_run": self.dry_run,
                "snapshots_removed": self.snapshots_removed, "tags_removed": self.tags_removed,
                "files_removed": self.files_removed, "bytes_removed": self.bytes_removed,
                "plan": self.plan.to_dict(paths)}


def _without_expired_changelog(table: FileStore, tagged: Snapshot) -> Snapshot:
    """The tagged snapshot to write back, minus a changelog its expiry deleted. A tag keeps no
    changelog (Paimon's ExpireSnapshotsImpl deletes an expired snapshot's changelog files and
    list even when a tag pins the snapshot), so a restored snapshot naming that list would
    point at a missing file; Paimon's RollbackHelper writes it as it is, lakecore writes it
    with no changelog, which every reader (Java's included) takes as "no changelog"."""
    name = tagged.changelog_manifest_list
    if not name or table.file_io.exists(table.paths.manifest_path(name)):
        return tagged
    return replace(tagged, changelog_manifest_list=None, changelog_manifest_list_size=None,
                   changelog_record_count=0)


def plan_rollback(
    table: FileStore, *, snapshot_id: int | None = None, tag: str | None = None
) -> RollbackPlan:
    if (snapshot_id is None) == (tag is None):
        raise MaintenanceError("rollback needs exactly one of a snapshot id or a tag name")
    sm = table.snapshot_manager
    if tag is not None:
        target = tag_snapshot(table, tag)
        restore = snapshot_or_none(table, target.id) is None
        if restore:
            target = _without_expired_changelog(table, target)
    else:
        assert snapshot_id is not None
        target, restore = sm.snapshot(snapshot_id), False
    latest = sm.latest_id()
    removed_ids = sorted((i for i in sm.list_ids() if i > target.id), reverse=True)
    all_tags = read_tags(table)
    removed_tags = [(n, s) for n, s in all_tags if s.id > target.id]
    kept_tags = [s for _, s in all_tags if s.id <= target.id]
    mio = table.manifest_io()
    keep_files = live_file_keys(mio, target)
    keep_meta = metadata_names(mio, target)
    keep_index = index_names(mio, target)
    for s in kept_tags:
        keep_meta |= metadata_names(mio, s)
        keep_index |= index_names(mio, s)
    removed = [s for s in (snapshot_or_none(table, i) for i in sorted(removed_ids)) if s]
    gone_tags = [s for _, s in removed_tags if snapshot_or_none(table, s.id) is None]
    paths = DataPaths(table)
    files: dict[str, FileRef] = {}

    def add(e: Any) -> None:
        if file_key(e) not in keep_files:
            for ref in paths.refs(e.partition, e.bucket, e.file):
                files.setdefault(ref.path, ref)

    # a file live in some removed snapshot is live in the oldest one or added by a later delta
    for s in removed[:1] + gone_tags:
        for e in live_entries(mio, s).values():
            add(e)
    for s in removed[1:]:
        for e in added_entries(entries_or_none(mio, s.delta_manifest_list) or ()):
            add(e)
    for s in removed + gone_tags:
        for e in added_entries(entries_or_none(mio, s.changelog_manifest_list) or ()):
            add(e)
        for name, size in ((s.base_manifest_list, s.base_manifest_list_size),
                           (s.delta_manifest_list, s.delta_manifest_list_size),
                           (s.changelog_manifest_list, s.changelog_manifest_list_size)):
            if not name or name in keep_meta:
                continue
            keep_meta.add(name)
            for m in list_or_none(mio, name) or ():
                if m.file_name not in keep_meta:
                    keep_meta.add(m.file_name)
                    ref = FileRef(table.paths.manifest_path(m.file_name), m.file_size)
                    files[ref.path] = ref
            ref = list_ref(table, name, size)
            files[ref.path] = ref
    for s in removed + gone_tags:  # index files before the index manifests listing them
        if s.index_manifest and s.index_manifest not in keep_index:
            entries = index_entries_or_none(mio, s.index_manifest) or []
            files.update(paths.index_refs(entries, keep_index))
    for s in removed + gone_tags:
        if s.index_manifest and s.index_manifest not in keep_index:
            keep_index.add(s.index_manifest)
            ref = list_ref(table, s.index_manifest, None)
            files[ref.path] = ref
    return RollbackPlan(target, tag, latest, restore, tuple(removed_ids),
                        tuple(n for n, _ in removed_tags), tuple(files.values()))


def execute_rollback(table: FileStore, plan: RollbackPlan) -> RollbackReport:
    sm, fio = table.snapshot_manager, table.file_io

    def cut() -> int:
        if sm.latest_id() != plan.latest_id:
            raise MaintenanceError(
                f"{table.identifier} changed since the rollback was planned (latest was "
                f"{plan.latest_id}, now {sm.latest_id()}); plan again")
        if plan.restore_snapshot_file:
            fio.try_create(table.paths.snapshot_path(plan.target.id),
                           plan.target.to_json().encode())
        sm.commit_latest_hint(plan.target.id)
        maybe_crash(CrashStep.ROLLBACK_AFTER_LATEST_HINT)
        n = 0
        for sid in plan.snapshot_ids:
            n += fio.delete_quietly(table.paths.snapshot_path(sid))
            maybe_crash(CrashStep.ROLLBACK_MID_SNAPSHOTS)
        return n

    removed = table.run_with_lock(cut)
    maybe_crash(CrashStep.ROLLBACK_AFTER_SNAPSHOTS)
    tags = sum(fio.delete_quietly(table.paths.tag_path(n)) for n in plan.tags)
    maybe_crash(CrashStep.ROLLBACK_AFTER_TAGS)
    n, size = delete_files(table, plan.files, CrashStep.ROLLBACK_MID_FILES)
    if plan.restore_snapshot_file:
        earliest = sm.earliest_id()
        if earliest is not None:
            sm.commit_earliest_hint(earliest)
    return RollbackReport(False, plan, removed, tags, n, size)


def rollback_to(
    table: FileStore,
    *,
    snapshot_id: int | None = None,
    tag: str | None = None,
    dry_run: bool = True,
) -> RollbackReport:
    """Roll the table back to ``snapshot_id`` or to tag ``tag``; ``dry_run`` only plans."""
    plan = plan_rollback(table, snapshot_id=snapshot_id, tag=tag)
    if dry_run:
        return RollbackReport(True, plan, len(plan.snapshot_ids), len(plan.tags),
                              len(plan.files), sum(f.size for f in plan.files))
    return execute_rollback(table, plan)
