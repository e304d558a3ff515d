"""A bucket's deletion vectors while it compacts (Paimon's ``BucketedDvMaintainer``).

Loaded from the bucket's live ``DELETION_VECTORS`` index files, changed by compaction (rows a
new output supersedes are marked; files the compaction removes lose their vectors), and
written back as new index files. The commit message then carries the index-commit
protocol: ``compact_new_index_files`` = the new files (rolled at
``deletion-vectors.index-file.target-size``; none when no vector is left) and
``compact_deleted_index_files`` = the bucket's index files this state was loaded from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lakecore.compact.lookup import sorted_unique
from lakecore.format.deletion_vector import (
    encode_deletion_vectors,
    index_file_meta,
    split_index_file,
)
from lakecore.format.index_manifest import DELETION_VECTORS_INDEX, IndexFileMeta
from lakecore.read.deletion_vectors import (
    deletion_files,
    dv_entries,
    index_file_path,
    read_vectors,
)
from lakecore.store.file_store import FileStore


@dataclass
class BucketVectors:
    """Deleted positions per data file of one (partition, bucket), and the index files they
    were read from (replaced when this state is written)."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    index_files: tuple[IndexFileMeta, ...] = ()
    changed: bool = False
    consistent: bool = False  # levels >= 1 checked: no key live twice, no retraction kept

    @staticmethod
    def load(table: FileStore, partition: Sequence[Any], bucket: int,
             index_files: Iterable[IndexFileMeta]) -> BucketVectors:
        metas = tuple(m for m in index_files if m.index_type == DELETION_VECTORS_INDEX)
        vectors = read_vectors(table, deletion_files(table, partition, bucket, metas))
        return BucketVectors(vectors, metas)

    @staticmethod
    def load_latest(table: FileStore, partition: Sequence[Any], bucket: int) -> BucketVectors:
        """The bucket's vectors in the latest snapshot."""
        snap = table.snapshot_manager.latest()
        entries = dv_entries(table, snap).get((tuple(partition), bucket), [])
        return BucketVectors.load(table, partition, bucket, [e.index_file for e in entries])

    def get(self, file_name: str) -> np.ndarray | None:
        return self.vectors.get(file_name)

    def has(self, file_name: str) -> bool:
        v = self.vectors.get(file_name)
        return v is not None and v.size > 0

    def snapshot(self) -> dict[str, np.ndarray]:
        return dict(self.vectors)

    def remove(self, file_names: Iterable[str]) -> None:
        """Files the compaction removed: their vectors go with them."""
        for n in file_names:
            if self.vectors.pop(n, None) is not None:
                self.changed = True

    def mark(self, marks: Mapping[str, np.ndarray]) -> None:
        """Add deleted positions (superseded rows) to files' vectors."""
        for name, positions in marks.items():
            if positions.size == 0:
                continue
            old = self.vectors.get(name)
            new = positions.astype(np.uint64)
            if old is not None and old.size:
                new = np.concatenate([old.astype(np.uint64), new])
            if new.size > 1 and not bool(np.all(new[1:] > new[:-1])):
                new = sorted_unique(np.sort(new))  # np.unique hashes: slower than a sort
            self.vectors[name] = new
            self.changed = True

    def write(self, table: FileStore, partition: Sequence[Any], bucket: int
              ) -> tuple[tuple[IndexFileMeta, ...], tuple[IndexFileMeta, ...]]:
        """Write the vectors, when they changed, as new index files rolled at
        ``deletion-vectors.index-file.target-size``: (new files, replaced files) for the
        commit message; afterwards this state is based on the new files."""
        if not self.changed:
            return (), ()
        live = {n: v for n, v in self.vectors.items() if v.size}
        new: list[IndexFileMeta] = []
        if live:
            data, ranges = encode_deletion_vectors(
                dict(sorted(live.items())), table.options.deletion_vectors_bitmap64)
            target = table.options.deletion_vectors_index_file_target_size
            try:
                for part, part_ranges in split_index_file(data, ranges, target):
                    meta = index_file_meta(table.paths.new_index_file_name(), part, part_ranges)
                    table.file_io.write_bytes(index_file_path(table, partition, bucket, meta),
                                              part)
                    new.append(meta)
            except BaseException:
                delete_index_files(table, partition, bucket, new)
                raise
        replaced = self.index_files
        self.index_files, self.changed = tuple(new), False
        return tuple(new), replaced


def delete_index_files(table: FileStore, partition: Sequence[Any], bucket: int,
                       files: Iterable[IndexFileMeta]) -> None:
    """Remove index files this compaction wrote (its commit did not land)."""
    for m in files:
        table.file_io.delete_quietly(
            index_file_path(table, partition, bucket, m))
