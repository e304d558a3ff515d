"""What snapshots and manifests reference, read defensively.

Maintenance runs beside writers, readers and other maintainers, so reads here distinguish two
cases: *best effort* reads (``*_or_none``) for files a concurrent or interrupted expiry may
already have removed, and *strict* reads for everything that protects files from deletion — a
protection that cannot be read must never turn into "nothing is protected". Tags and
consumers are read by ``lakecore.store.tags`` and ``lakecore.store.consumers``.

Index manifests and index files count as referenced like manifests and data files: a snapshot
(or tag) references its ``indexManifest`` and every index file that manifest lists. Index files
are replaced whole per (partition, bucket) and their names are never reused, so, like a data
file, an index file is live over one contiguous range of snapshots.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.errors import CorruptFileError, SnapshotNotExistError
from lakecore.format.index_manifest import IndexFileMeta, IndexManifestEntry
from lakecore.format.manifest import DataFileMeta, FileKind, ManifestEntry
from lakecore.format.manifest_list import ManifestFileMeta
from lakecore.format.snapshot import Snapshot
from lakecore.store.file_store import FileStore
from lakecore.store.index_paths import index_file_path
from lakecore.store.manifest_io import ManifestIO, merge_entries
from lakecore.utils.faults import CrashStep, maybe_crash

# A data file's identity for deletion decisions: (partition bytes, bucket, file name). The level
# is left out on purpose: an upgraded file is the same file on disk at another level.
FileKey = tuple[bytes, int, str]


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file a maintenance plan deletes (or would delete), with its size in bytes."""

    path: str
    size: int


def paths_report(files: Iterable[FileRef]) -> list[dict[str, object]]:
    """The ``paths`` list of a maintenance report's ``to_dict(paths=True)``."""
    return [{"path": f.path, "size": f.size} for f in files]


# -- snapshots ----------------------------------------------------------------------------
def snapshot_or_none(table: FileStore, snapshot_id: int) -> Snapshot | None:
    """The snapshot, or None when its file is gone (expired or deleted by hand)."""
    try:
        return table.snapshot_manager.snapshot(snapshot_id)
    except SnapshotNotExistError:
        return None
    except CorruptFileError:
        if not table.file_io.exists(table.paths.snapshot_path(snapshot_id)):
            return None  # deleted between the existence check and the read
        raise


# -- manifests -----------------------------------------------------------------------------
def list_or_none(mio: ManifestIO, name: str | None) -> list[ManifestFileMeta] | None:
    """Best effort: a manifest list, or None when it is missing or unreadable."""
    if not name:
        return []
    try:
        return mio.read_manifest_list(name)
    except CorruptFileError:
        return None


def entries_or_none(mio: ManifestIO, list_name: str | None) -> list[ManifestEntry] | None:
    """Best effort: the entries of every manifest of a list, or None if any is gone."""
    metas = list_or_none(mio, list_name)
    if metas is None:
        return None
    try:
        return mio.read_entries(metas)
    except CorruptFileError:
        return None


def metadata_names(mio: ManifestIO, snap: Snapshot, changelog: bool = True) -> set[str]:
    """The manifest lists of ``snap`` and their manifests: base and delta strictly; with
    ``changelog``, also its changelog manifest list and, best effort, that list's manifests.
    Paimon's expiry deletes an expired snapshot's changelog list even when a tag names the
    snapshot (``FileDeletionBase.manifestSkippingSet`` keeps only a tag's base and delta
    lists, their manifests and its index manifest), so a tag may name one that is gone; it
    protects nothing then."""
    names: set[str] = set()
    for list_name in (snap.base_manifest_list, snap.delta_manifest_list):
        if not list_name:
            continue
        names.add(list_name)
        names.update(m.file_name for m in mio.read_manifest_list(list_name))
    if changelog and snap.changelog_manifest_list:
        names.add(snap.changelog_manifest_list)
        names.update(m.file_name for m in list_or_none(mio, snap.changelog_manifest_list) or ())
    return names


def index_entries_or_none(mio: ManifestIO, name: str | None) -> list[IndexManifestEntry] | None:
    """Best effort: the entries of an index manifest, or None when it is missing or unreadable."""
    try:
        return mio.read_index_manifest(name)
    except CorruptFileError:
        return None


def index_names(mio: ManifestIO, snap: Snapshot) -> set[str]:
    """Strict: ``snap``'s index manifest and the names of the index files it lists."""
    if not snap.index_manifest:
        return set()
    return {snap.index_manifest} | {
        e.index_file.file_name for e in mio.read_index_manifest(snap.index_manifest)}


def live_entries(mio: ManifestIO, snap: Snapshot) -> dict[tuple, ManifestEntry]:
    """Strict: the live data files of ``snap`` (base + delta merged)."""
    metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
        snap.delta_manifest_list)
    return merge_entries(mio.read_entries(metas))


def file_key(e: ManifestEntry) -> FileKey:
    return (e.partition, e.bucket, e.file.file_name)


def live_file_keys(mio: ManifestIO, snap: Snapshot) -> set[FileKey]:
    return {file_key(e) for e in live_entries(mio, snap).values()}


def added_entries(entries: Iterable[ManifestEntry]) -> Iterable[ManifestEntry]:
    return (e for e in entries if e.kind is FileKind.ADD)


class DataPaths:
    """Paths of data files (and their extra files) from manifest entries, bucket dirs cached."""

    def __init__(self, table: FileStore) -> None:
        self.table = table
        self._dirs: dict[tuple[bytes, int], str] = {}

    def bucket_dir(self, partition: bytes, bucket: int) -> str:
        key = (partition, bucket)
        d = self._dirs.get(key)
        if d is None:
            values = self.table.partition_codec.decode(partition)
            d = self._dirs[key] = self.table.paths.bucket_path(values, bucket)
        return d

    def refs(self, partition: bytes, bucket: int, f: DataFileMeta) -> list[FileRef]:
        """The file itself and its extra files (index files kept beside it)."""
        d = self.bucket_dir(partition, bucket)
        main = f.external_path or f"{d}/{f.file_name}"
        return [FileRef(main, f.file_size)] + [FileRef(f"{d}/{x}", 0) for x in f.extra_files]

    def index_ref(self, partition: bytes, bucket: int, f: IndexFileMeta) -> FileRef:
        """An index file: ``<table>/index/``, the bucket's directory with
        ``index-file-in-data-file-dir``, or its own external path."""
        t = self.table
        path = index_file_path(t.paths, t.partition_codec.decode(partition), bucket, f,
                               t.options.index_file_in_data_file_dir)
        return FileRef(path, f.file_size)

    def index_refs(self, entries: Iterable[IndexManifestEntry], keep: set[str]
                   ) -> dict[str, FileRef]:
        """The index files of ``entries`` whose names are not in ``keep``, by path."""
        out: dict[str, FileRef] = {}
        for e in entries:
            if e.index_file.file_name not in keep:
                ref = self.index_ref(e.partition, e.bucket, e.index_file)
                out.setdefault(ref.path, ref)
        return out


def list_ref(table: FileStore, name: str, size: int | None) -> FileRef:
    """A manifest (list) file; its size from the snapshot when recorded, else from storage."""
    path = table.paths.manifest_path(name)
    if size is None:
        try:
            size = table.file_io.get_status(path).size
        except CorruptFileError:
            size = 0
    return FileRef(path, size)


def delete_files(table: FileStore, files: Iterable[FileRef],
                 crash_step: CrashStep | None = None) -> tuple[int, int]:
    """Delete quietly (idempotent); returns (files deleted now, their bytes). ``crash_step``
    is the fault-injection point reached after each file (``lakecore.utils.faults``)."""
    n = size = 0
    for f in files:
        if table.file_io.delete_quietly(f.path):
            n += 1
            size += f.size
        if crash_step is not None:
            maybe_crash(crash_step)
    return n, size


def remove_empty_dirs(table: FileStore, dirs: Iterable[str]) -> None:
    """``snapshot.clean-empty-directories``: drop bucket and partition directories that became
    empty, deepest first. Local filesystems only: ``os.rmdir`` refuses a directory a writer
    just put a file into, whereas object stores have no directories to leave behind."""
    if not table.file_io.is_local:
        return
    root = table.table_path
    todo = sorted(set(dirs), key=lambda d: -d.count("/"))
    seen: set[str] = set()
    while todo:
        d = todo.pop(0)
        if d in seen or not d.startswith(root + "/"):
            continue
        seen.add(d)
        try:
            os.rmdir(d)
        except OSError:
            continue
        parent = d.rsplit("/", 1)[0]
        if parent != root:
            todo.append(parent)
            todo.sort(key=lambda x: -x.count("/"))
