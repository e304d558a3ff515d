"""The pure step of a commit: conflict checks, then the entries and snapshot fields to write.

``FileStoreCommit`` (the I/O step) reads the latest snapshot and its manifests, calls
``plan_commit`` on what it read and writes what the returned ``CommitPlan`` says. Nothing in
this module touches a file, a clock or the lock.

Besides the data files, every commit carries the latest snapshot's state forward as Java
Paimon's ``FileStoreCommitImpl.tryCommitOnce`` does: the index manifest (the same name when the
increment changes no index file; otherwise the previous entries with the increment applied,
to be written as a new index manifest; an OVERWRITE also drops every index entry of the
partitions it replaces, as Paimon's ``OverwriteChangesProvider``), the watermark (the latest
one: lakecore commits carry none of their own, and Paimon keeps the maximum), ``nextRowId``
(unchanged: lakecore assigns no row ids) and the ``statistics`` file of ANALYZE (kept while it
was computed for the schema the new snapshot records, dropped after a schema change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakecore.commit.conflicts import (
    check_bucket_counts,
    check_deletes_live,
    check_index_replacements,
    check_level_overlap,
    check_no_duplicate_adds,
)
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.index_manifest import IndexManifestEntry, combine_index_entries
from lakecore.format.manifest import FileKind, ManifestEntry
from lakecore.format.manifest_list import ManifestFileMeta
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.schema.types import DataType
from lakecore.store.manifest_io import merge_entries


@dataclass(frozen=True)
class CommitPlan:
    """One commit attempt decided on the latest snapshot: what to write, the new snapshot."""

    snapshot_id: int
    kind: CommitKind
    commit_user: str
    commit_identifier: int
    schema_id: int
    delta: tuple[ManifestEntry, ...]  # the delta manifests' entries
    changelog: tuple[ManifestEntry, ...]  # the changelog manifests' entries (may be empty)
    total_record_count: int
    delta_record_count: int
    changelog_record_count: int | None
    properties: Mapping[str, str] | None = None
    # the index manifest: carried by name, or (index_entries not None) written anew
    index_manifest: str | None = None
    index_entries: tuple[IndexManifestEntry, ...] | None = None
    watermark: int | None = None
    statistics: str | None = None
    next_row_id: int | None = None

    @property
    def writes_index_manifest(self) -> bool:
        """Whether the executor must write ``index_entries`` as a new index manifest."""
        return self.index_entries is not None

    def snapshot(
        self,
        base_list: tuple[str, int],
        delta_list: tuple[str, int],
        changelog_list: tuple[str, int] | None,
        time_millis: int,
        written_index_manifest: str | None = None,
    ) -> Snapshot:
        """The snapshot to publish once the manifest lists (name, size) are written, and the
        new index manifest when the plan writes one (None: it had no entries left)."""
        log_name, log_size = changelog_list if changelog_list is not None else (None, None)
        index = written_index_manifest if self.writes_index_manifest else self.index_manifest
        return Snapshot(
            id=self.snapshot_id,
            schema_id=self.schema_id,
            base_manifest_list=base_list[0],
            base_manifest_list_size=base_list[1],
            delta_manifest_list=delta_list[0],
            delta_manifest_list_size=delta_list[1],
            changelog_manifest_list=log_name,
            changelog_manifest_list_size=log_size,
            index_manifest=index,
            commit_user=self.commit_user,
            commit_identifier=self.commit_identifier,
            commit_kind=self.kind,
            time_millis=time_millis,
            total_record_count=self.total_record_count,
            delta_record_count=self.delta_record_count,
            changelog_record_count=self.changelog_record_count,
            watermark=self.watermark,
            statistics=self.statistics,
            properties=dict(self.properties) if self.properties else None,
            next_row_id=self.next_row_id,
        )


def plan_commit(
    kind: CommitKind,
    changes: Sequence[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    latest: Snapshot | None,
    *,
    commit_user: str,
    commit_identifier: int,
    schema_id: int,
    changelog: Sequence[ManifestEntry] = (),
    other_users: Iterable[str] = (),
    key_types: Sequence[DataType] = (),
    properties: Mapping[str, str] | None = None,
    index_changes: Sequence[IndexManifestEntry] = (),
    previous_index: Sequence[IndexManifestEntry] | None = None,
    overwrite_matches: Callable[[bytes], bool] | None = None,
    statistics_schema_id: int | None = None,
    table_name: str = "",
    partition_label: Callable[[bytes], str] = bytes.hex,
    committed_probe: Sequence[ManifestEntry] = (),
) -> CommitPlan:
    """Check ``changes`` against ``live`` (the latest snapshot's live files by identifier,
    or for a pure append only those that may disagree on the bucket count) and plan the
    snapshot after ``latest``. Raises a ``CommitConflictError`` subclass: a DELETE of a file
    no longer live (``other_users`` committed since the base), an ADD of a file already live
    (``FileAlreadyAddedConflict``), a bucket-count change without overwrite, for
    COMPACT a key-range overlap in a level >= 1 (``key_types``: the trimmed primary key), or an
    index file replaced behind the writer's back (``IndexConflictError``).

    ``index_changes`` is the increment's index ADDs and DELETEs; ``previous_index`` the latest
    snapshot's index entries, read whenever ``needs_previous_index`` says so (else None). For
    an OVERWRITE, ``overwrite_matches`` picks the replaced partitions (None: all of them).
    ``statistics_schema_id`` is the schema id recorded in the latest snapshot's statistics
    file, when it has one and it could be read. ``committed_probe``: ADDs that must not be
    live either (an APPEND's own compaction output: live means committed before)."""
    # an ADD already live first (Paimon's mergeEntries fails on it before assertNoDelete): a
    # duplicate of a committed compaction is a duplicate, not a lost race whose files go
    check_no_duplicate_adds(changes, live, commit_user, also=committed_probe)
    check_deletes_live(changes, live, commit_user, other_users)
    check_bucket_counts(changes, live, commit_user, overwrite=kind is CommitKind.OVERWRITE,
                        label=partition_label)
    if kind is CommitKind.COMPACT:
        check_level_overlap(changes, live, key_types, commit_user)
    previous = list(previous_index or ())
    if kind is CommitKind.OVERWRITE:
        index_changes = overwrite_index_changes(previous, index_changes, overwrite_matches)
    check_index_replacements(index_changes, previous, commit_user, table=table_name,
                             label=partition_label)
    index_name, index_entries = plan_index(latest, previous, index_changes)
    keep_statistics = latest is not None and statistics_schema_id == schema_id
    delta_rows = _rows(changes, FileKind.ADD) - _rows(changes, FileKind.DELETE)
    prev_total = latest.total_record_count if latest and latest.total_record_count else 0
    return CommitPlan(
        snapshot_id=(latest.id + 1) if latest else 1,
        kind=kind,
        commit_user=commit_user,
        commit_identifier=commit_identifier,
        schema_id=schema_id,
        delta=tuple(changes),
        changelog=tuple(changelog),
        total_record_count=prev_total + delta_rows,
        delta_record_count=delta_rows,
        changelog_record_count=_rows(changelog, FileKind.ADD) if changelog else None,
        properties=dict(properties) if properties else None,
        index_manifest=index_name,
        index_entries=index_entries,
        watermark=latest.watermark if latest else None,
        statistics=latest.statistics if latest and keep_statistics else None,
        next_row_id=latest.next_row_id if latest else None,
    )


def needs_previous_index(kind: CommitKind, index_changes: Sequence[IndexManifestEntry],
                         latest: Snapshot | None) -> bool:
    """Whether the executor must read the latest snapshot's index entries for ``plan_commit``:
    when the increment changes an index, or an OVERWRITE may drop some."""
    if latest is None or not latest.index_manifest:
        return False
    return bool(index_changes) or kind is CommitKind.OVERWRITE


def plan_index(
    latest: Snapshot | None,
    previous: Sequence[IndexManifestEntry],
    changes: Sequence[IndexManifestEntry],
) -> tuple[str | None, tuple[IndexManifestEntry, ...] | None]:
    """(index manifest name carried unchanged, None) when ``changes`` is empty; otherwise
    (None, the live entries after applying ``changes`` to ``previous``), to be written."""
    if not changes:
        return (latest.index_manifest if latest else None), None
    return None, tuple(combine_index_entries(previous, changes))


def overwrite_index_changes(
    previous: Sequence[IndexManifestEntry],
    changes: Sequence[IndexManifestEntry],
    matches: Callable[[bytes], bool] | None,
) -> list[IndexManifestEntry]:
    """An OVERWRITE's index changes: DELETE every previous index entry of a replaced partition
    (``matches``; None: every partition), then the messages' own changes."""
    named = {e.index_file.file_name for e in changes if e.kind is FileKind.DELETE}
    drops = [e.as_delete() for e in previous
             if (matches is None or matches(e.partition))
             and e.index_file.file_name not in named]
    return drops + list(changes)


def is_pure_append(changes: Iterable[ManifestEntry]) -> bool:
    """Only ADDs: such a commit conflicts on nothing but bucket counts."""
    return not any(e.kind is FileKind.DELETE for e in changes)


def bucket_count_suspects(
    metas: Sequence[ManifestFileMeta], changes: Iterable[ManifestEntry]
) -> list[ManifestFileMeta]:
    """The manifests that may hold files written with another bucket count than ``changes``
    (a pure append reads these and those ``touching_manifests`` names)."""
    ours = {e.total_buckets for e in changes if e.bucket != POSTPONE_BUCKET}
    if not ours:  # only postpone files: no bucket count to disagree with
        return []
    return [m for m in metas if m.total_buckets is None or {m.total_buckets} != ours]


def touching_manifests(
    metas: Sequence[ManifestFileMeta],
    changes: Iterable[ManifestEntry],
    decode_stats: Callable[[ManifestFileMeta], tuple[tuple, tuple] | None],
    decode_partition: Callable[[bytes], tuple],
) -> list[ManifestFileMeta]:
    """The manifests that may hold a file of a (partition, bucket) the ADDs of ``changes``
    write to: what Paimon's ``readAllEntriesFromChangedPartitions`` reads, narrowed by each
    manifest's bucket range. A file added twice can only be found there.
    ``decode_stats(meta)`` gives the manifest's per-field (min, max) partition values, or None
    when unknown (then the manifest is read); ``decode_partition`` a partition's values."""
    targets = {(e.partition, e.bucket) for e in changes if e.kind is FileKind.ADD}
    if not targets:
        return []
    buckets = {b for _, b in targets}
    lo_b, hi_b = min(buckets), max(buckets)
    values = [decode_partition(p) for p in {p for p, _ in targets}]
    out = []
    for m in metas:
        if (m.min_bucket is not None and m.max_bucket is not None
                and (m.max_bucket < lo_b or m.min_bucket > hi_b)):
            continue
        bounds = decode_stats(m)
        if bounds is None or any(_within(v, *bounds) for v in values):
            out.append(m)
    return out


def _within(values: tuple, mins: tuple, maxs: tuple) -> bool:
    """Whether partition ``values`` may lie within a manifest's per-field [min, max]; a null
    value or bound, or values that do not compare, are no evidence against it."""
    try:
        for v, lo, hi in zip(values, mins, maxs):
            if v is None or lo is None or hi is None:
                continue
            if v < lo or v > hi:
                return False
    except TypeError:
        return True
    return True


def overwrite_changes(
    live: Mapping[tuple, ManifestEntry],
    append: Sequence[ManifestEntry],
    matches: Callable[[bytes], bool] | None,
) -> list[ManifestEntry]:
    """An OVERWRITE's changes: DELETE every live file whose encoded partition ``matches``
    (None: every live file), then ADD ``append``."""
    deletes = [
        ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
        for e in live.values()
        if matches is None or matches(e.partition)
    ]
    return deletes + list(append)


def merged_base(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """The live files of ``entries`` as one sorted base (what manifest merging rewrites)."""
    return sorted(merge_entries(entries).values(),
                  key=lambda e: (e.partition, e.bucket, e.file.level))


def _rows(entries: Iterable[ManifestEntry], kind: FileKind) -> int:
    return sum(e.file.row_count for e in entries if e.kind is kind)
