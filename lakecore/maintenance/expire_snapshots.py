"""Snapshot expiry: plan (a value), then delete in Paimon's order.

``plan_expire_snapshots`` reads and decides; ``execute_expire_plan`` deletes, in the order of
Paimon's ``ExpireSnapshotsImpl``: data files, changelog files, manifests, manifest lists,
snapshot files (oldest first), then the EARLIEST hint. Every deletion is quiet, so a rerun after
a crash at any point — or a second expirer running at the same time — only finishes the work.

Which data files go (Paimon's ``SnapshotDeletion``): a file DELETEd by the delta of snapshot
``i`` is no longer live in ``i`` or any later snapshot, because Paimon file names are never
reused. So for every ``i`` in ``(begin, end]`` the files deleted (and not re-added at another
level, which is what an upgrade-only compaction does) by ``i``'s delta are removed, unless the
newest tag before ``i`` still holds them (a file is live over one contiguous range of snapshots,
so that tag is the only one that can). As a second line of defence lakecore also keeps every
file live in the first retained snapshot. Changelog files belong to their own snapshot and go
with it, a tagged one's too, and so does its changelog manifest list: as in Paimon's
``ExpireSnapshotsImpl``, a tag keeps a snapshot's data, not its changelog. Manifests and lists go
when neither the first retained snapshot nor any tag references them as data (base and delta
lists: ``FileDeletionBase.manifestSkippingSet``).

Index manifests and index files (HASH indexes of dynamic-bucket tables, deletion vectors) go as
in Paimon's ``FileDeletionBase.cleanUnusedManifests``: an expired snapshot's index files that
neither the first retained snapshot nor any tag lists, then its index manifest unless one of
those names it too (a commit that changes no index carries the manifest forward by name). An
index file is live over one contiguous range of snapshots, so the first retained one and the
tags are the only ones that can still need it. Index files are deleted after the changelog
files and before the manifests; the index manifest goes with the manifests, so a rerun after a
crash still finds what is left. Statistics files (ANALYZE) are left in place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lakecore.errors import CorruptFileError
from lakecore.format.manifest import FileKind, ManifestEntry
from lakecore.format.snapshot import Snapshot
from lakecore.maintenance.refs import (
    DataPaths,
    FileKey,
    FileRef,
    added_entries,
    delete_files,
    entries_or_none,
    file_key,
    index_entries_or_none,
    index_names,
    list_or_none,
    list_ref,
    live_file_keys,
    metadata_names,
    paths_report,
    remove_empty_dirs,
    snapshot_or_none,
)
from lakecore.maintenance.retention import ExpireConfig, expire_end
from lakecore.store.consumers import consumer_min_next_snapshot, expire_consumers
from lakecore.store.file_store import FileStore
from lakecore.store.tags import read_tags, tagged_snapshots
from lakecore.utils.clock import to_epoch_millis
from lakecore.utils.faults import CrashStep, maybe_crash

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpirePlan:
    """What one expiry removes. ``end_snapshot_id`` is the first snapshot kept (the new
    EARLIEST); ``notes`` say what was skipped and why (work is then left to a rerun or to
    orphan-file removal, never guessed)."""

    snapshot_ids: tuple[int, ...] = ()
    end_snapshot_id: int | None = None
    data_files: tuple[FileRef, ...] = ()
    changelog_files: tuple[FileRef, ...] = ()
    manifests: tuple[FileRef, ...] = ()
    manifest_lists: tuple[FileRef, ...] = ()
    notes: tuple[str, ...] = ()
    write_earliest_hint: int | None = None  # also set when nothing expires but the hint is gone
    index_files: tuple[FileRef, ...] = ()
    index_manifests: tuple[FileRef, ...] = ()

    @property
    def files(self) -> tuple[FileRef, ...]:
        return (self.data_files + self.changelog_files + self.index_files + self.manifests
                + self.index_manifests + self.manifest_lists)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self, paths: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "snapshot_ids": list(self.snapshot_ids),
            "end_snapshot_id": self.end_snapshot_id,
            "data_files": len(self.data_files),
            "changelog_files": len(self.changelog_files),
            "manifests": len(self.manifests),
            "manifest_lists": len(self.manifest_lists),
            "index_files": len(self.index_files),
            "index_manifests": len(self.index_manifests),
            "bytes": self.bytes,
            "notes": list(self.notes),
        }
        if paths:
            out["paths"] = paths_report(self.files)
        return out


@dataclass(frozen=True)
class ExpireReport:
    """What an expiry did (or, with ``dry_run``, would do)."""

    dry_run: bool
    plan: ExpirePlan
    snapshots_removed: int
    files_removed: int
    bytes_removed: int
    details: dict[str, int] = field(default_factory=dict)

    def to_dict(self, paths: bool = False) -> dict[str, Any]:
        return {
            "operation": "expire-snapshots",
            "dry_run": self.dry_run,
            "snapshots_removed": self.snapshots_removed,
            "files_removed": self.files_removed,
            "bytes_removed": self.bytes_removed,
            "details": dict(self.details),
            "plan": self.plan.to_dict(paths),
        }


def plan_expire_snapshots(
    table: FileStore,
    *,
    now: datetime | None = None,
    config: ExpireConfig | None = None,
) -> ExpirePlan:
    """Decide what to expire under the table's retention options (or ``config``) at ``now``."""
    cfg = config or ExpireConfig.from_options(table.options)
    cfg.validate()
    sm = table.snapshot_manager
    latest, earliest = sm.latest_id(), sm.earliest_id()
    if latest is None or earliest is None:
        return ExpirePlan()

    def time_of(sid: int) -> int | None:
        snap = snapshot_or_none(table, sid)
        return None if snap is None else snap.time_millis

    now_millis = to_epoch_millis(now)
    end = expire_end(earliest, latest, time_of, cfg, now_millis,
                     consumer_min_next_snapshot(table, now_millis))
    hint_missing = not table.file_io.exists(table.paths.earliest_hint)
    if end <= earliest:
        return ExpirePlan(write_earliest_hint=earliest if hint_missing else None)
    snaps = [s for s in (snapshot_or_none(table, i) for i in range(earliest, end + 1)) if s]
    if not snaps or snaps[-1].id != end:
        return ExpirePlan(notes=(f"snapshot {end} is gone (another expirer?); nothing to do",))
    return _plan_range(table, snaps, cfg)


def _plan_range(table: FileStore, snaps: list[Snapshot], cfg: ExpireConfig) -> ExpirePlan:
    """Snapshots ``snaps[:-1]`` expire; ``snaps[-1]`` is the first one kept."""
    mio = table.manifest_io()
    end_snap, expired = snaps[-1], snaps[:-1]
    tags = read_tags(table)
    tagged = tagged_snapshots(tags)
    notes: list[str] = []
    if cfg.changelog_decoupled:
        notes.append("changelog retention is longer than snapshot retention: snapshots are kept "
                     "as long as the changelog retention asks (lakecore writes no long-lived "
                     "changelog files)")
    paths = DataPaths(table)
    data = _plan_data_files(table, snaps, tagged, end_snap, paths, notes)
    changelog: dict[str, FileRef] = {}
    for s in expired:  # a tag keeps no changelog (ExpireSnapshotsImpl: every expired one goes)
        if not s.changelog_manifest_list:
            continue
        entries = entries_or_none(mio, s.changelog_manifest_list)
        if entries is None:
            notes.append(f"snapshot {s.id}: changelog manifests unreadable; skipped")
            continue
        for e in added_entries(entries):
            for ref in paths.refs(e.partition, e.bucket, e.file):
                changelog.setdefault(ref.path, ref)
    manifests, lists = _plan_manifests(table, expired, [end_snap, *tagged], notes)
    index_files, index_manifests = _plan_index(table, expired, [end_snap, *tagged], paths,
                                               notes)
    if any(s.statistics for s in expired):
        notes.append("statistics files are left in place (orphan-file removal leaves them too)")
    return ExpirePlan(
        snapshot_ids=tuple(s.id for s in expired),
        end_snapshot_id=end_snap.id,
        data_files=tuple(data.values()),
        changelog_files=tuple(changelog.values()),
        manifests=manifests,
        manifest_lists=lists,
        notes=tuple(notes),
        write_earliest_hint=end_snap.id,
        index_files=index_files,
        index_manifests=index_manifests,
    )


def _plan_index(
    table: FileStore,
    expired: list[Snapshot],
    protectors: list[Snapshot],
    paths: DataPaths,
    notes: list[str],
) -> tuple[tuple[FileRef, ...], tuple[FileRef, ...]]:
    """(index files, index manifests) of the expired snapshots that no protector names."""
    if not any(s.index_manifest for s in expired):
        return (), ()
    mio = table.manifest_io()
    keep: set[str] = set()
    try:
        for p in protectors:
            keep |= index_names(mio, p)
    except CorruptFileError as e:
        notes.append(f"index manifest of a kept snapshot or tag unreadable ({e}); no index "
                     "file is deleted in this run")
        return (), ()
    files: dict[str, FileRef] = {}
    manifests: list[FileRef] = []
    for s in expired:
        name = s.index_manifest
        if not name or name in keep:
            continue
        keep.add(name)
        entries = index_entries_or_none(mio, name)
        if entries is None:
            if table.file_io.exists(table.paths.manifest_path(name)):
                notes.append(f"snapshot {s.id}: index manifest {name} unreadable; its index "
                             "files are left to orphan-file removal")
                continue
            entries = []  # an earlier run already deleted it (and its files)
        for path, ref in paths.index_refs(entries, keep).items():
            files.setdefault(path, ref)
        manifests.append(list_ref(table, name, None))
    return tuple(files.values()), tuple(manifests)


def _plan_data_files(
    table: FileStore,
    snaps: list[Snapshot],
    tagged: list[Snapshot],
    end_snap: Snapshot,
    paths: DataPaths,
    notes: list[str],
) -> dict[str, FileRef]:
    mio = table.manifest_io()
    kept_by_end = live_file_keys(mio, end_snap)  # strict: the first kept snapshot must read
    tag_files: dict[int, set[FileKey] | None] = {}
    out: dict[str, FileRef] = {}
    for s in snaps[1:]:  # (begin, end]: deltas of the expired range and of the first kept one
        tag = _previous(tagged, s.id)
        kept_by_tag: set[FileKey] = set()
        if tag is not None:
            if tag.id not in tag_files:
                tag_files.clear()  # one tag's files in memory at a time (snapshots ascend)
                tag_files[tag.id] = _keys_or_none(table, tag)
            cached = tag_files[tag.id]
            if cached is None:
                notes.append(f"snapshot {s.id}: files of tag snapshot {tag.id} unreadable; "
                             "its data files are left in place")
                continue
            kept_by_tag = cached
        entries = entries_or_none(mio, s.delta_manifest_list)
        if entries is None:
            notes.append(f"snapshot {s.id}: delta manifests gone (an earlier run already "
                         "cleaned its data files) or unreadable; skipped")
            continue
        for key, e in _deleted_by_delta(entries).items():
            if key in kept_by_tag or key in kept_by_end:
                continue
            for ref in paths.refs(e.partition, e.bucket, e.file):
                out.setdefault(ref.path, ref)
    return out


def _deleted_by_delta(entries: list[ManifestEntry]) -> dict[FileKey, ManifestEntry]:
    """Files a delta DELETEs and does not ADD again (an upgrade re-adds the same file)."""
    gone: dict[FileKey, ManifestEntry] = {}
    for e in entries:
        key = file_key(e)
        if e.kind is FileKind.ADD:
            gone.pop(key, None)
        else:
            gone[key] = e
    return gone


def _previous(tagged: list[Snapshot], sid: int) -> Snapshot | None:
    prev = None
    for t in tagged:
        if t.id >= sid:
            break
        prev = t
    return prev


def _keys_or_none(table: FileStore, snap: Snapshot) -> set[FileKey] | None:
    try:
        return live_file_keys(table.manifest_io(), snap)
    except CorruptFileError:
        return None


def _plan_manifests(
    table: FileStore,
    expired: list[Snapshot],
    protectors: list[Snapshot],
    notes: list[str],
) -> tuple[tuple[FileRef, ...], tuple[FileRef, ...]]:
    mio = table.manifest_io()
    keep: set[str] = set()
    try:
        for p in protectors:
            keep |= metadata_names(mio, p, changelog=False)
    except CorruptFileError as e:
        notes.append(f"manifests of a kept snapshot or tag unreadable ({e}); no manifest is "
                     "deleted in this run")
        return (), ()
    manifests: list[FileRef] = []
    lists: list[FileRef] = []
    for s in expired:
        for name, size in ((s.base_manifest_list, s.base_manifest_list_size),
                           (s.delta_manifest_list, s.delta_manifest_list_size),
                           (s.changelog_manifest_list, s.changelog_manifest_list_size)):
            if not name or name in keep:
                continue
            keep.add(name)
            for m in list_or_none(mio, name) or ():
                if m.file_name not in keep:
                    keep.add(m.file_name)
                    manifests.append(FileRef(table.paths.manifest_path(m.file_name),
                                             m.file_size))
            lists.append(list_ref(table, name, size))
    return tuple(manifests), tuple(lists)


def execute_expire_plan(table: FileStore, plan: ExpirePlan) -> ExpireReport:
    """Delete what ``plan`` names, in Paimon's order. Idempotent."""
    details: dict[str, int] = {}
    n_data, b_data = delete_files(table, plan.data_files, CrashStep.EXPIRE_MID_DATA_FILES)
    details["data_files"] = n_data
    maybe_crash(CrashStep.EXPIRE_AFTER_DATA_FILES)
    n_log, b_log = delete_files(table, plan.changelog_files, CrashStep.EXPIRE_MID_CHANGELOG_FILES)
    details["changelog_files"] = n_log
    maybe_crash(CrashStep.EXPIRE_AFTER_CHANGELOG_FILES)
    # index files before the index manifests naming them (deleted with the manifests below)
    n_idx, b_idx = delete_files(table, plan.index_files)
    details["index_files"] = n_idx
    if table.options.snapshot_clean_empty_directories:
        remove_empty_dirs(table, (f.path.rsplit("/", 1)[0]
                                  for f in plan.data_files + plan.changelog_files))
    # manifests before the lists naming them: after a crash here a rerun still finds them
    n_man, b_man = delete_files(table, plan.manifests, CrashStep.EXPIRE_MID_MANIFESTS)
    n_im, b_im = delete_files(table, plan.index_manifests)
    details["manifests"] = n_man
    details["index_manifests"] = n_im
    maybe_crash(CrashStep.EXPIRE_AFTER_MANIFESTS)
    n_list, b_list = delete_files(table, plan.manifest_lists, CrashStep.EXPIRE_MID_MANIFEST_LISTS)
    details["manifest_lists"] = n_list
    maybe_crash(CrashStep.EXPIRE_AFTER_MANIFEST_LISTS)
    removed = 0
    for sid in plan.snapshot_ids:  # oldest first: the rest stays a suffix
        removed += table.file_io.delete_quietly(table.paths.snapshot_path(sid))
        maybe_crash(CrashStep.EXPIRE_MID_SNAPSHOTS)
    maybe_crash(CrashStep.EXPIRE_AFTER_SNAPSHOTS)
    if plan.write_earliest_hint is not None:
        _commit_earliest_hint(table, plan.write_earliest_hint)
    n_files = n_data + n_log + n_idx + n_man + n_im + n_list
    log.info("expired %d snapshot(s) of %s, %d file(s)", removed, table.identifier, n_files)
    return ExpireReport(False, plan, removed, n_files,
                        b_data + b_log + b_idx + b_man + b_im + b_list, details)


def _commit_earliest_hint(table: FileStore, end: int) -> None:
    """EARLIEST = ``end``, unless a concurrent expirer already moved past it."""
    sm = table.snapshot_manager
    target = end
    if not table.file_io.exists(table.paths.snapshot_path(end)):
        current = sm.earliest_id()
        if current is None:
            return
        target = max(current, end)
    sm.commit_earliest_hint(target)


def expire_snapshots(
    table: FileStore,
    *,
    dry_run: bool = True,
    now: datetime | None = None,
    config: ExpireConfig | None = None,
) -> ExpireReport:
    """Expire snapshots by the table's retention options; ``dry_run`` (the default, as every
    destructive maintenance call) only reports the plan."""
    plan = plan_expire_snapshots(table, now=now, config=config)
    if dry_run:
        return ExpireReport(True, plan, len(plan.snapshot_ids), len(plan.files), plan.bytes,
                            {"data_files": len(plan.data_files),
                             "changelog_files": len(plan.changelog_files),
                             "manifests": len(plan.manifests),
                             "manifest_lists": len(plan.manifest_lists),
                             "index_files": len(plan.index_files),
                             "index_manifests": len(plan.index_manifests)})
    expire_consumers(table, to_epoch_millis(now))  # Paimon: abandoned consumers first
    return execute_expire_plan(table, plan)
