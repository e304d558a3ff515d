"""Inline compaction in a writer (``write-only = false``), as Paimon's MergeTreeCompactManager.

After each flush the new level-0 files join the bucket's levels and the strategy may pick a
compaction, run synchronously before ``prepare_commit`` returns (so ``num-sorted-run.stop-
trigger`` back-pressure is implicit). ``full-compaction.delta-commits`` forces a full
compaction every N commits. The writer's view of its files follows each result, so a
long-lived stream writer keeps compacting correctly across commits. In a deletion-vector table
the writer keeps its bucket's vectors the same way (loaded from the latest snapshot when it
starts, then following its own results); a compaction that changed them puts the new index file
and the one it replaces in the result, for the message's compaction increment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakecore.compact.deletion_vectors import BucketVectors
from lakecore.compact.executor import BucketCompactor
from lakecore.compact.unit import CompactResult
from lakecore.compact.universal import create_compact_strategy
from lakecore.format.manifest import DataFileMeta
from lakecore.io.schema_mapping import newer_files
from lakecore.store.file_store import FileStore


class InlineCompactor:
    """A writer's own compaction of its bucket, when the table is not write-only."""

    def __init__(self, table: FileStore, partition: Sequence[Any], bucket: int,
                 restored: Sequence[DataFileMeta]) -> None:
        self.table, self.partition, self.bucket = table, tuple(partition), bucket
        self.vectors: BucketVectors | None = None
        self.files = list(restored)
        self.strategy = create_compact_strategy(table.options, restore_files=restored)
        self.commits = 0

    @property
    def files(self) -> list[DataFileMeta]:
        return self._files

    @files.setter
    def files(self, files: Sequence[DataFileMeta]) -> None:
        """A (re)start from the bucket's files in the latest snapshot: a deletion-vector
        table's vectors are reloaded from that snapshot too."""
        self._files = list(files)
        if self.table.options.deletion_vectors_enabled:
            checked = self.vectors is not None and self.vectors.consistent
            self.vectors = BucketVectors.load_latest(self.table, self.partition, self.bucket)
            self.vectors.consistent = checked

    def after_flush(self, new_files: Sequence[DataFileMeta]) -> CompactResult:
        self._files.extend(new_files)
        self.commits += 1
        every = self.table.options.full_compaction_delta_commits
        full = every is not None and every != 0 and self.commits % every == 0
        if not self.files or newer_files(self.table, self.files):
            # nothing to do, or files of a schema newer than this writer's: compacting them
            # into its older schema would drop columns; the dedicated compaction (which opens
            # the latest schema) or a writer opened after the ALTER does it
            return CompactResult()
        compactor = BucketCompactor(self.table, self.partition, self.bucket, self.files,
                                    self.strategy, vectors=self.vectors,
                                    rewrite_deleted=False)
        result = compactor.compact(full=full)
        gone = {(f.file_name, f.level) for f in result.before}
        self._files = [f for f in self._files if (f.file_name, f.level) not in gone]
        self._files.extend(result.after)
        return result
