"""A writer's dynamic-bucket state (``bucket = -1`` primary-key tables): the HASH indexes of
the partitions it writes, read from its base snapshot, and the new HASH index files it
writes at ``prepare_commit``.

Only the partitions a write touches are loaded, each once and columnar (one
``np.frombuffer`` per bucket file, ``bucket_assigner.PartitionIndex``). Assignment itself is
``bucket_assigner.assign`` (pure). At ``prepare_commit`` every bucket that gained keys gets
one new complete HASH index file (its old hashes plus the new ones); the commit message names
it in ``new_index_files`` and the file it replaces (the base snapshot's, or this writer's
previous one) in ``deleted_index_files``, so the committer can refuse a concurrent
assignment into the same bucket (the index-commit protocol). Deleted keys keep their hash,
as in Paimon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lakecore.errors import UnsupportedFeatureError
from lakecore.format.hash_index import decode_hash_index, encode_hash_index
from lakecore.format.index_manifest import HASH_INDEX, IndexFileMeta, IndexManifestEntry
from lakecore.format.manifest import FileKind
from lakecore.format.snapshot import Snapshot
from lakecore.store.file_store import FileStore
from lakecore.store.index_paths import index_file_path
from lakecore.write.bucket_assigner import PartitionIndex, assign

DataBuckets = Callable[[bytes], set[int]]
"""The buckets holding live data files in a partition (by its encoded BinaryRow)."""


def is_dynamic_bucket_table(table: FileStore) -> bool:
    """A primary-key table in Paimon's dynamic bucket mode (``bucket = -1``)."""
    return table.is_primary_key_table and table.options.bucket == -1


@dataclass(frozen=True)
class IndexChange:
    """One bucket's HASH index change: the new file and the file it replaces (if any)."""

    partition: tuple[Any, ...]
    bucket: int
    new: IndexFileMeta | None
    replaced: IndexFileMeta | None


def read_hash_index(table: FileStore, partition: tuple[Any, ...], bucket: int,
                    meta: IndexFileMeta) -> np.ndarray:
    """One HASH index file's hashes (int32)."""
    path = hash_index_path(table, partition, bucket, meta)
    return decode_hash_index(table.file_io.read_bytes(path), path)


def hash_index_path(table: FileStore, partition: tuple[Any, ...], bucket: int,
                    meta: IndexFileMeta) -> str:
    """Where an index file is (``store.index_paths``): its external path, else the bucket
    directory (``index-file-in-data-file-dir``), else ``<table>/index/``."""
    return index_file_path(table.paths, partition, bucket, meta,
                           table.options.index_file_in_data_file_dir)


class DynamicBucketIndex:
    """The HASH indexes one ``TableWrite`` assigns with and maintains (see the module doc).

    ``num_assigners`` / ``assign_id`` per call follow Paimon's assigner rule, so several
    writers (Spark tasks) can each assign their share of a partition. ``ignore_existing``
    (an overwrite) starts every partition empty; the files it replaces are still named.
    """

    def __init__(self, table: FileStore, snapshot: Snapshot | None,
                 data_buckets: DataBuckets, ignore_existing: bool = False) -> None:
        outside = [k for k in table.partition_keys if k not in table.primary_keys]
        if outside:  # a table Java Paimon made: keys move across partitions
            raise UnsupportedFeatureError(
                f"dynamic-bucket table {table.identifier}: its primary key "
                f"{list(table.primary_keys)} lacks partition key(s) {outside} (a cross-partition "
                "upsert table), whose global key index lakecore does not maintain")
        self.table = table
        self.snapshot = snapshot
        self.ignore_existing = ignore_existing
        self._data_buckets = data_buckets
        self._live: dict[tuple[bytes, int], IndexManifestEntry] | None = None
        self._partitions: dict[tuple[Any, ...], PartitionIndex] = {}
        self._touched: dict[tuple[Any, ...], set[int]] = {}
        self._written: list[str] = []
        self._emptied: set[tuple[Any, ...]] = set()  # overwritten partitions already emptied

    def _live_entries(self) -> dict[tuple[bytes, int], IndexManifestEntry]:
        if self._live is None:
            self._live = {(e.partition, e.bucket): e
                          for e in self.table.index_entries(self.snapshot, HASH_INDEX)}
        return self._live

    def partition_index(self, partition: tuple[Any, ...]) -> PartitionIndex:
        """The partition's index as of the base snapshot plus this writer's assignments."""
        index = self._partitions.get(partition)
        if index is None:
            index = self._partitions[partition] = self._load(partition)
        return index

    def _load(self, partition: tuple[Any, ...]) -> PartitionIndex:
        if self.ignore_existing:
            return PartitionIndex.empty()
        pbytes = self.table.partition_codec.encode(partition)
        entries = {b: e for (p, b), e in self._live_entries().items() if p == pbytes}
        missing = self._data_buckets(pbytes) - set(entries)
        if missing:
            raise UnsupportedFeatureError(
                f"dynamic-bucket table {self.table.identifier}: partition {partition} has data "
                f"files but no HASH index in bucket(s) {sorted(missing)}, so new keys cannot "
                "be assigned without duplicating existing ones; rewrite the partition with an "
                "overwrite (which rebuilds the index) before writing to it incrementally")
        per_bucket = {b: read_hash_index(self.table, partition, b, e.index_file)
                      for b, e in entries.items()}
        return PartitionIndex.of(per_bucket, {b: e.index_file.row_count
                                              for b, e in entries.items()})

    def assign(self, partition: tuple[Any, ...], key_hashes: np.ndarray,
               num_assigners: int = 1, assign_id: int = 0) -> np.ndarray:
        """The bucket of each key hash of ``partition`` (one per row)."""
        opts = self.table.options
        result = assign(self.partition_index(partition), key_hashes,
                        target_row_num=opts.dynamic_bucket_target_row_num,
                        max_buckets=opts.dynamic_bucket_max_buckets,
                        num_assigners=num_assigners, assign_id=assign_id)
        self._partitions[partition] = result.index
        if result.touched:
            self._touched.setdefault(partition, set()).update(result.touched)
        return result.buckets

    def prepare_commit(self) -> list[IndexChange]:
        """Write one complete HASH index file per bucket that gained keys since the last
        call; afterwards those files are what the next call replaces."""
        self._written = []  # files of earlier calls belong to their (committed) messages
        try:
            return self._prepare()
        except BaseException:
            for path in self._written:
                self.table.file_io.delete_quietly(path)
            self._written = []
            raise

    def _prepare(self) -> list[IndexChange]:
        changes: list[IndexChange] = []
        live = self._live_entries()
        for partition, buckets in self._touched.items():
            pbytes = self.table.partition_codec.encode(partition)
            index = self._partitions[partition]
            for bucket in sorted(buckets):
                old = live.get((pbytes, bucket))
                new = self._write(partition, bucket, index.bucket_hashes(bucket))
                live[(pbytes, bucket)] = IndexManifestEntry(FileKind.ADD,
                                                            pbytes, bucket, new)
                changes.append(IndexChange(partition, bucket, new,
                                           old.index_file if old else None))
        if self.ignore_existing:  # an overwrite empties the other buckets of its partitions
            for partition in [p for p in self._partitions if p not in self._emptied]:
                self._emptied.add(partition)  # once: later calls replace this writer's files
                pbytes = self.table.partition_codec.encode(partition)
                kept = self._touched.get(partition, set())
                for (p, bucket), e in list(live.items()):
                    if p == pbytes and bucket not in kept:
                        changes.append(IndexChange(partition, bucket, None, e.index_file))
                        del live[(p, bucket)]
        self._touched.clear()
        return changes

    def _write(self, partition: tuple[Any, ...], bucket: int,
               hashes: np.ndarray) -> IndexFileMeta:
        name = self.table.paths.new_index_file_name()
        meta = IndexFileMeta(HASH_INDEX, name, 0, int(hashes.size))
        path = hash_index_path(self.table, partition, bucket, meta)
        data = encode_hash_index(hashes)
        self.table.file_io.write_bytes(path, data)
        self._written.append(path)
        return IndexFileMeta(HASH_INDEX, name, len(data), len(data) // 4)

    def delete_written(self, names: set[str]) -> None:
        """Delete the index files of the last ``prepare_commit`` named in ``names`` (its
        messages were dropped)."""
        for path in [p for p in self._written if p.rsplit("/", 1)[-1] in names]:
            self.table.file_io.delete_quietly(path)
            self._written.remove(path)
