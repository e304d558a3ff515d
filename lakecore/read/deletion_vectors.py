"""Loading a snapshot's deletion vectors (tables with ``deletion-vectors.enabled``).

The snapshot's index manifest lists one or more ``DELETION_VECTORS`` index files per
(partition, bucket); each locates the vector of a data file by ``DeletionVectorRange``. Scans
attach the ranges to splits as ``DeletionFile``s (plain values); readers and compaction load
the positions, reading every index file once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lakecore.format.deletion_vector import DeletionFile, check_version, decode_one
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    IndexFileMeta,
    IndexManifestEntry,
)
from lakecore.format.snapshot import Snapshot
from lakecore.store.file_store import FileStore
from lakecore.store.index_paths import index_file_path as _index_path


def index_file_path(table: FileStore, partition: Sequence[Any], bucket: int,
                    meta: IndexFileMeta) -> str:
    """Where an index file of (partition, bucket) is (``store.index_paths``)."""
    return _index_path(table.paths, partition, bucket, meta,
                       table.options.index_file_in_data_file_dir)


def dv_entries(table: FileStore, snapshot: Snapshot | None
               ) -> dict[tuple[tuple, int], list[IndexManifestEntry]]:
    """The snapshot's live deletion-vector index entries by (partition values, bucket):
    decoded values, since another writer's BinaryRow bytes may differ from ours."""
    out: dict[tuple[tuple, int], list[IndexManifestEntry]] = defaultdict(list)
    codec = table.partition_codec
    for e in table.index_entries(snapshot, DELETION_VECTORS_INDEX):
        out[(tuple(codec.decode(e.partition)), e.bucket)].append(e)
    return dict(out)


def deletion_files(table: FileStore, partition: Sequence[Any], bucket: int,
                   metas: Iterable[IndexFileMeta]) -> dict[str, DeletionFile]:
    """Data file name -> where its vector is, for one bucket's deletion-vector index files."""
    out: dict[str, DeletionFile] = {}
    for meta in metas:
        if meta.index_type != DELETION_VECTORS_INDEX:
            continue
        path = index_file_path(table, partition, bucket, meta)
        for name, r in (meta.dv_ranges or {}).items():
            out[name] = DeletionFile(path, r.offset, r.length, r.cardinality)
    return out


def read_vectors(table: FileStore, files: Mapping[str, DeletionFile]
                 ) -> dict[str, np.ndarray]:
    """Data file name -> deleted positions (sorted ``uint64``); each index file read once."""
    by_path: dict[str, list[tuple[str, DeletionFile]]] = defaultdict(list)
    for name, df in files.items():
        by_path[df.path].append((name, df))
    out: dict[str, np.ndarray] = {}
    for path, items in by_path.items():
        data = table.file_io.read_bytes(path)
        check_version(data, path)
        for name, df in items:
            out[name] = decode_one(data, df.range_of(name), path)
    return out
