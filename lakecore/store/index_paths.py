"""Where an index file lives, and where ANALYZE's statistics files live.

An index file's path (Paimon's ``IndexPathFactory`` / pypaimon's ``bucket_index_path``): its own
``externalPath`` when the entry records one; else, for a HASH or deletion-vector index of a table
with ``index-file-in-data-file-dir``, the bucket's data directory; else ``<table>/index/``
(global indexes always live there). Statistics files are ``<table>/statistics/<name>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakecore.format.index_manifest import DELETION_VECTORS_INDEX, HASH_INDEX, IndexFileMeta
from lakecore.store.paths import PathFactory

STATISTICS_DIR = "statistics"
_BUCKET_TYPES = (HASH_INDEX, DELETION_VECTORS_INDEX)


def index_file_path(
    paths: PathFactory,
    partition: Sequence[Any],
    bucket: int,
    meta: IndexFileMeta,
    in_data_file_dir: bool,
) -> str:
    """The path of index file ``meta`` of (``partition`` values, ``bucket``)."""
    if meta.external_path:
        return meta.external_path
    if in_data_file_dir and meta.index_type in _BUCKET_TYPES:
        return f"{paths.bucket_path(partition, bucket)}/{meta.file_name}"
    return paths.index_file_path(meta.file_name)


def statistics_dir(paths: PathFactory) -> str:
    return f"{paths.table_path}/{STATISTICS_DIR}"


def statistics_path(paths: PathFactory, name: str) -> str:
    """The statistics file a snapshot's ``statistics`` names."""
    return f"{statistics_dir(paths)}/{name}"
