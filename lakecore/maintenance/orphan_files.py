"""Orphan files: files under the table directory that no snapshot, tag or long-lived
changelog references, and that are older than a safe age.

Why the age (``older_than``, default 1 day): a commit in progress has written data files and
manifests that no snapshot names yet. Only files last modified before the cut-off are removed,
and a cut-off later than now is refused. Like delta-rs ``vacuum``, the default is a dry run that
lists what would go (paths and sizes); pass ``dry_run=False`` (CLI: without ``--dry-run``).

Where it looks (Paimon's ``OrphanFilesClean``): ``manifest/`` (manifests, manifest lists and
index manifests), ``index/`` (HASH and deletion-vector index files, global indexes), the bucket
directories of every partition (data, changelog and extra files, and index files when
``index-file-in-data-file-dir`` puts them there), and stray files (temporary leftovers) in
``snapshot/`` and ``tag/``. Every index manifest a snapshot, tag or changelog names is kept, and
every index file one of them lists. Never touched: ``schema/``, snapshot and tag files and the
hints, ``statistics/``, ``changelog/``, ``consumer/``, ``_lakecore/`` (except commit-user
markers of users no snapshot or tag names any more). Files are matched by
name, as Paimon does, so a file is kept if any snapshot or tag mentions it (ADD or DELETE).
A manifest that exists but cannot be decoded aborts the run rather than count as empty.
Tables with branches are refused (branches share files with the main branch).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lakecore.errors import CorruptFileError, MaintenanceError
from lakecore.format.snapshot import Snapshot
from lakecore.maintenance.refs import FileRef, delete_files, paths_report, snapshot_or_none
from lakecore.store.commit_users import CommitUserIndex
from lakecore.store.file_store import FileStore
from lakecore.store.paths import (
    BUCKET_PREFIX,
    CHANGELOG_PREFIX,
    COMMIT_USER_PREFIX,
    EARLIEST_HINT,
    LATEST_HINT,
    SNAPSHOT_PREFIX,
    TAG_PREFIX,
)
from lakecore.store.tags import read_tags
from lakecore.utils.clock import to_epoch_millis
from lakecore.utils.faults import CrashStep

DEFAULT_OLDER_THAN = timedelta(days=1)
_SNAPSHOT_FILE = re.compile(rf"^{SNAPSHOT_PREFIX}\d+$")
_HINTS = (LATEST_HINT, EARLIEST_HINT)
_LIST_KEYS = ("baseManifestList", "deltaManifestList", "changelogManifestList")
_INDEX_KEY = "indexManifest"


@dataclass(frozen=True)
class OrphanReport:
    """The unreferenced files an orphan removal deleted (or would delete)."""

    dry_run: bool
    cutoff_millis: int
    files: tuple[FileRef, ...]
    files_removed: int
    bytes_removed: int

    def to_dict(self, paths: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": "remove-orphan-files", "dry_run": self.dry_run,
                               "older_than_millis": self.cutoff_millis,
                               "files_removed": self.files_removed,
                               "bytes_removed": self.bytes_removed}
        if paths:
            out["paths"] = paths_report(self.files)
        return out


def cutoff_millis(older_than: timedelta | datetime | None, now: datetime | None) -> int:
    """The modification-time cut-off: ``older_than`` is an age (timedelta) or an instant
    (datetime; naive = local time). An instant after ``now`` or a negative age is refused."""
    now_ms = to_epoch_millis(now)
    if older_than is None:
        older_than = DEFAULT_OLDER_THAN
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise MaintenanceError(f"older_than must not be negative, got {older_than}")
        return now_ms - int(older_than.total_seconds() * 1000)
    cut = to_epoch_millis(older_than)
    if cut > now_ms:
        raise MaintenanceError(
            f"older_than {older_than.isoformat()} is later than now: files still being "
            "written by running commits would be deleted")
    return cut


def _snapshot_like(table: FileStore) -> list[Snapshot | dict[str, Any]]:
    """Every existing snapshot, every tag, and (as raw JSON) Java's long-lived changelogs."""
    out: list[Snapshot | dict[str, Any]] = []
    for sid in table.snapshot_manager.list_ids():
        snap = snapshot_or_none(table, sid)
        if snap is not None:
            out.append(snap)
    out.extend(s for _, s in read_tags(table))
    for st in table.file_io.list_status(table.paths.changelog_dir):
        if st.is_dir or not st.path.rsplit("/", 1)[-1].startswith(CHANGELOG_PREFIX):
            continue
        try:
            out.append(json.loads(table.file_io.read_text(st.path)))
        except (CorruptFileError, ValueError):
            if table.file_io.exists(st.path):
                raise MaintenanceError(f"cannot read changelog file {st.path}") from None
    return out


def _lists_of(s: Snapshot | dict[str, Any]) -> list[str]:
    if isinstance(s, Snapshot):
        names = [s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list]
    else:
        names = [s.get(k) for k in _LIST_KEYS]
    return [n for n in names if isinstance(n, str) and n]


def _index_manifest_of(s: Snapshot | dict[str, Any]) -> str | None:
    name = s.index_manifest if isinstance(s, Snapshot) else s.get(_INDEX_KEY)
    return name if isinstance(name, str) and name else None


def used_files(table: FileStore) -> tuple[set[str], set[str]]:
    """(manifest, manifest-list and index-manifest names, data/changelog/extra/index file
    names) in use."""
    mio, fio = table.manifest_io(), table.file_io
    meta: set[str] = set()
    data: set[str] = set()
    latest = table.snapshot_manager.latest_id()
    for s in _snapshot_like(table):
        # expiry deletes manifests before their snapshot file but never the latest snapshot's:
        # one of those missing is damage, and its files must not be taken for orphans
        must_exist = isinstance(s, Snapshot) and s.id == latest
        index_manifest = _index_manifest_of(s)
        if index_manifest and index_manifest not in meta:
            meta.add(index_manifest)
            try:
                index_entries = mio.read_index_manifest(index_manifest)
            except CorruptFileError:
                if must_exist or fio.exists(table.paths.manifest_path(index_manifest)):
                    raise
                index_entries = []  # its snapshot is being expired right now
            for ie in index_entries:
                data.add(ie.index_file.file_name)
                if ie.index_file.external_path:
                    data.add(ie.index_file.external_path.rsplit("/", 1)[-1])
        for list_name in _lists_of(s):
            meta.add(list_name)
            try:
                metas = mio.read_manifest_list(list_name)
            except CorruptFileError:
                if must_exist or fio.exists(table.paths.manifest_path(list_name)):
                    raise
                continue  # its snapshot is being expired right now
            for m in metas:
                if m.file_name in meta:
                    continue
                meta.add(m.file_name)
                try:
                    entries = mio.read_manifest(m.file_name)
                except CorruptFileError:
                    if must_exist or fio.exists(table.paths.manifest_path(m.file_name)):
                        raise
                    continue
                for e in entries:
                    data.add(e.file.file_name)
                    data.update(e.file.extra_files)
                    if e.file.external_path:
                        data.add(e.file.external_path.rsplit("/", 1)[-1])
    return meta, data


def _stale_commit_user_markers(table: FileStore, cut: int) -> list[FileRef]:
    """Markers (and their temporary leftovers) of commit users that no snapshot or tag
    names any more, last written before the cut-off: such a user's commits are gone, so a
    rerun would commit again anyway (see ``lakecore.store.commit_users``)."""
    index = CommitUserIndex(table.file_io, table.paths)
    statuses = [st for st in table.file_io.list_status(index.dir)
                if not st.is_dir and st.mtime_millis is not None and st.mtime_millis < cut]
    if not statuses:
        return []
    users = {s.commit_user if isinstance(s, Snapshot) else s.get("commitUser")
             for s in _snapshot_like(table)}
    markers = {path: m.commit_user for path, _, m in index.markers()}  # unreadable: kept
    return [FileRef(st.path, st.size) for st in statuses
            # a torn temporary file, or the marker of a user nothing names any more
            if not st.path.rsplit("/", 1)[-1].startswith(COMMIT_USER_PREFIX)
            or (st.path in markers and markers[st.path] not in users)]


def _bucket_dirs(table: FileStore) -> list[str]:
    fio = table.file_io
    level = [table.table_path]
    for _ in table.partition_keys:
        level = [st.path for d in level for st in fio.list_status(d)
                 if st.is_dir and "=" in st.path.rsplit("/", 1)[-1]]
    return [st.path for d in level for st in fio.list_status(d)
            if st.is_dir and st.path.rsplit("/", 1)[-1].startswith(BUCKET_PREFIX)]


def plan_orphan_files(
    table: FileStore,
    *,
    older_than: timedelta | datetime | None = None,
    now: datetime | None = None,
) -> tuple[int, list[FileRef]]:
    """(cut-off millis, orphan files old enough to delete)."""
    cut = cutoff_millis(older_than, now)
    fio = table.file_io
    branches = table.paths.branch_dir
    if fio.list_status(branches):
        raise MaintenanceError(f"{table.identifier} has branches ({branches}); they "
                               "share files with the main branch, so orphan removal is refused")
    meta, data = used_files(table)

    def old(st: Any) -> bool:
        return not st.is_dir and st.mtime_millis is not None and st.mtime_millis < cut

    out: list[FileRef] = []
    for st in fio.list_status(table.paths.manifest_dir):
        name = st.path.rsplit("/", 1)[-1]
        if old(st) and name not in meta:
            out.append(FileRef(st.path, st.size))
    for st in fio.list_status(table.paths.index_dir):
        if old(st) and st.path.rsplit("/", 1)[-1] not in data:
            out.append(FileRef(st.path, st.size))
    for d in _bucket_dirs(table):
        for st in fio.list_status(d):
            if old(st) and st.path.rsplit("/", 1)[-1] not in data:
                out.append(FileRef(st.path, st.size))
    for st in fio.list_status(table.paths.snapshot_dir):
        name = st.path.rsplit("/", 1)[-1]
        if old(st) and not _SNAPSHOT_FILE.match(name) and name not in _HINTS:
            out.append(FileRef(st.path, st.size))
    for st in fio.list_status(table.paths.tag_dir):
        if old(st) and not st.path.rsplit("/", 1)[-1].startswith(TAG_PREFIX):
            out.append(FileRef(st.path, st.size))
    out += _stale_commit_user_markers(table, cut)
    out.sort(key=lambda f: f.path)
    return cut, out


def remove_orphan_files(
    table: FileStore,
    *,
    older_than: timedelta | datetime | None = None,
    now: datetime | None = None,
    dry_run: bool = True,
) -> OrphanReport:
    """Remove (default: only list) orphan files last modified before the cut-off."""
    cut, files = plan_orphan_files(table, older_than=older_than, now=now)
    if dry_run:
        return OrphanReport(True, cut, tuple(files), len(files), sum(f.size for f in files))
    n, size = delete_files(table, files, CrashStep.ORPHAN_MID_DELETE)
    return OrphanReport(False, cut, tuple(files), n, size)
