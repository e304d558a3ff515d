"""``CommitMessage``: what a writer hands to the single committer for one (partition, bucket)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from lakecore.format.index_manifest import IndexFileMeta
from lakecore.format.manifest import DataFileMeta


@dataclass(frozen=True)
class CommitMessage:
    """New files (APPEND), compaction before/after (COMPACT) and changelog files of one bucket.

    ``partition`` holds the partition's Python values in partition-key order. Index files
    follow Paimon's two increments: ``new_index_files`` / ``deleted_index_files`` belong to
    the data increment (the bucket's HASH index, committed with the APPEND snapshot),
    ``compact_new_index_files`` / ``compact_deleted_index_files`` to the compaction increment
    (deletion-vector files, committed with the COMPACT snapshot).
    """

    partition: tuple[Any, ...]
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    compact_changelog_files: tuple[DataFileMeta, ...] = ()
    new_index_files: tuple[IndexFileMeta, ...] = ()
    deleted_index_files: tuple[IndexFileMeta, ...] = ()
    compact_new_index_files: tuple[IndexFileMeta, ...] = ()
    compact_deleted_index_files: tuple[IndexFileMeta, ...] = ()

    def is_empty(self) -> bool:
        return not (
            self.new_files
            or self.changelog_files
            or self.compact_before
            or self.compact_after
            or self.compact_changelog_files
            or self.new_index_files
            or self.deleted_index_files
            or self.compact_new_index_files
            or self.compact_deleted_index_files
        )

    def written_files(self) -> tuple[DataFileMeta, ...]:
        """Files this message created (what ``abort`` must delete). An upgraded file (same
        name in compact_before and compact_after, only its level changed) was not created."""
        return self.new_files + self.changelog_files + self.compacted_files()

    def written_index_files(self) -> tuple[IndexFileMeta, ...]:
        """Index files this message created (``abort`` deletes them with the data files)."""
        return self.new_index_files + self.compact_new_index_files

    def compacted_files(self) -> tuple[DataFileMeta, ...]:
        """Files the compaction part created (rewrites and its changelog, not upgrades)."""
        kept = {f.file_name for f in self.compact_before}
        rewritten = tuple(f for f in self.compact_after if f.file_name not in kept)
        return rewritten + self.compact_changelog_files

    def compaction_only(self) -> CommitMessage:
        """This message without its APPEND part (after the APPEND snapshot landed)."""
        return CommitMessage(self.partition, self.bucket, self.total_buckets,
                             compact_before=self.compact_before, compact_after=self.compact_after,
                             compact_changelog_files=self.compact_changelog_files,
                             compact_new_index_files=self.compact_new_index_files,
                             compact_deleted_index_files=self.compact_deleted_index_files)


def serialize_messages(messages: list[CommitMessage]) -> bytes:
    """Bytes for shipping messages from executors to the driver (Spark)."""
    return pickle.dumps(list(messages), protocol=pickle.HIGHEST_PROTOCOL)


def deserialize_messages(data: bytes) -> list[CommitMessage]:
    msgs = pickle.loads(data)
    if not all(isinstance(m, CommitMessage) for m in msgs):
        raise TypeError("not a list of CommitMessage")
    return msgs
