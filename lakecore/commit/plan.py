"""The pure step of a commit: conflict checks, then the entries and snapshot fields to write.

``FileStoreCommit`` (the I/O step) reads the latest snapshot and its manifests, calls
``plan_commit`` on what it read and writes what the returned ``CommitPlan`` says. Nothing in
this module touches a file, a clock or the lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakecore.commit.conflicts import (
    check_bucket_counts,
    check_deletes_live,
    check_level_overlap,
)
from lakecore.format.bucket import POSTPONE_BUCKET
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

    def snapshot(
        self,
        base_list: tuple[str, int],
        delta_list: tuple[str, int],
        changelog_list: tuple[str, int] | None,
        time_millis: int,
    ) -> Snapshot:
        """The snapshot to publish once the manifest lists (name, size) are written."""
        log_name, log_size = changelog_list if changelog_list is not None else (None, None)
        return Snapshot(
            id=self.snapshot_id,
            schema_id=self.schema_id,
            base_manifest_list=base_list[0],
            base_manifest_list_size=base_list[1],
            delta_manifest_list=delta_list[0],
            delta_manifest_list_size=delta_list[1],
            changelog_manifest_list=log_name,
            changelog_manifest_list_size=log_size,
            commit_user=self.commit_user,
            commit_identifier=self.commit_identifier,
            commit_kind=self.kind,
            time_millis=time_millis,
            total_record_count=self.total_record_count,
            delta_record_count=self.delta_record_count,
            changelog_record_count=self.changelog_record_count,
            properties=dict(self.properties) if self.properties else None,
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
) -> CommitPlan:
    """Check ``changes`` against ``live`` (the latest snapshot's live files by identifier,
    or for a pure append only those that may disagree on the bucket count) and plan the
    snapshot after ``latest``. Raises a ``CommitConflictError`` subclass: a DELETE of a file
    no longer live (``other_users`` committed since the base), a bucket-count change, or for
    COMPACT a key-range overlap in a level >= 1 (``key_types``: the trimmed primary key)."""
    check_deletes_live(changes, live, commit_user, other_users)
    check_bucket_counts(changes, live, commit_user)
    if kind is CommitKind.COMPACT:
        check_level_overlap(changes, live, key_types, commit_user)
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
    )


def is_pure_append(changes: Iterable[ManifestEntry]) -> bool:
    """Only ADDs: such a commit conflicts on nothing but bucket counts."""
    return not any(e.kind is FileKind.DELETE for e in changes)


def bucket_count_suspects(
    metas: Sequence[ManifestFileMeta], changes: Iterable[ManifestEntry]
) -> list[ManifestFileMeta]:
    """The manifests that may hold files written with another bucket count than ``changes``
    (a pure append reads only these: planning cost follows them, not history)."""
    ours = {e.total_buckets for e in changes if e.bucket != POSTPONE_BUCKET}
    if not ours:  # only postpone files: no bucket count to disagree with
        return []
    return [m for m in metas if m.total_buckets is None or {m.total_buckets} != ours]


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
