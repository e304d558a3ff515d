"""Index manifests (``manifest/index-manifest-<uuid>``): Avro records of ``IndexManifestEntry``.

A snapshot's ``indexManifest`` names one such file listing every live index file of the table:
the HASH index of each (partition, bucket) of a dynamic-bucket table, the deletion-vector files
of a table with ``deletion-vectors.enabled``, and index types lakecore does not interpret (global
indexes). Index files live under ``<table>/index/``. The record is the one pypaimon 2.1 writes
(``IndexManifestEntry`` with ``DeletionVectorMeta`` ranges and ``GlobalIndexMeta``) and Java
Paimon reads; decoding goes by field name. A global-index record is kept as the dict it was read
as, so a rewrite carries it unchanged.

Combining follows Paimon (Java ``IndexManifestFileHandler``, pypaimon ``combine_changes``): the
previous entries minus the deleted file names, plus the additions; a HASH index is replaced per
(partition, bucket) by an added one (its writer owns the bucket); deletion-vector files are
replaced per (partition, bucket) the same way (Java's ``BucketedCombiner`` for
``DELETION_VECTORS`` in a bucketed table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro

from lakecore.errors import CorruptFileError
from lakecore.format.manifest import (
    DEFAULT_MANIFEST_COMPRESSION,
    FileKind,
    read_avro,
    write_avro,
)

INDEX_ENTRY_VERSION = 1
HASH_INDEX = "HASH"
DELETION_VECTORS_INDEX = "DELETION_VECTORS"

_DV_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "DeletionVectorMeta",
    "fields": [
        {"name": "f0", "type": "string"},
        {"name": "f1", "type": "int"},
        {"name": "f2", "type": "int"},
        {"name": "_CARDINALITY", "type": ["null", "long"], "default": None},
    ],
}

_GLOBAL_INDEX_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "GlobalIndexMeta",
    "fields": [
        {"name": "_ROW_RANGE_START", "type": "long"},
        {"name": "_ROW_RANGE_END", "type": "long"},
        {"name": "_INDEX_FIELD_ID", "type": "int"},
        {"name": "_EXTRA_FIELD_IDS", "type": ["null", {"type": "array", "items": "int"}],
         "default": None},
        {"name": "_INDEX_META", "type": ["null", "bytes"], "default": None},
        {"name": "_SOURCE_META", "type": ["null", "bytes"], "default": None},
    ],
}

INDEX_MANIFEST_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "IndexManifestEntry",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_DELETIONS_VECTORS_RANGES",
         "type": ["null", {"type": "array", "items": _DV_META_SCHEMA}], "default": None},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
        {"name": "_GLOBAL_INDEX", "type": ["null", _GLOBAL_INDEX_META_SCHEMA], "default": None},
    ],
}
_PARSED_SCHEMA = fastavro.parse_schema(INDEX_MANIFEST_ENTRY_SCHEMA)


@dataclass(frozen=True, slots=True)
class DeletionVectorRange:
    """Where one data file's deletion vector sits in a deletion-vector index file."""

    data_file_name: str
    offset: int
    length: int
    cardinality: int | None = None


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    """One index file (Paimon's ``IndexFileMeta``); ``dv_ranges`` keyed by data file name."""

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: Mapping[str, DeletionVectorRange] | None = field(default=None, compare=False)
    external_path: str | None = None
    global_index: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    """An ADD or DELETE of one index file of a (partition, bucket)."""

    kind: FileKind
    partition: bytes  # BinaryRow
    bucket: int
    index_file: IndexFileMeta

    def as_delete(self) -> IndexManifestEntry:
        """The DELETE entry that removes this file."""
        return IndexManifestEntry(FileKind.DELETE, self.partition, self.bucket, self.index_file)


def encode_index_manifest(
    entries: Iterable[IndexManifestEntry], codec: str = DEFAULT_MANIFEST_COMPRESSION
) -> bytes:
    """An index manifest's bytes. ``codec`` takes ``manifest.compression`` values."""
    return write_avro(_PARSED_SCHEMA, [_to_avro(e) for e in entries], codec)


def decode_index_manifest(data: bytes, path: str) -> list[IndexManifestEntry]:
    """Parse an index manifest; ``path`` names it in a ``CorruptFileError``."""
    out = []
    for record in read_avro(data, path):
        try:
            out.append(_from_avro(record))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptFileError(path, f"bad index manifest entry: {exc!r}") from exc
    return out


def combine_index_entries(
    previous: Sequence[IndexManifestEntry], changes: Sequence[IndexManifestEntry]
) -> list[IndexManifestEntry]:
    """The live index entries after ``changes`` (ADDs and DELETEs) on ``previous``.

    DELETEs remove by file name; an added HASH or deletion-vector file replaces the entry of
    the same type for its (partition, bucket); other types accumulate. Order is stable:
    surviving previous entries first, then additions.
    """
    deleted = {e.index_file.file_name for e in changes if e.kind is FileKind.DELETE}
    adds = [e for e in changes if e.kind is FileKind.ADD]
    replaced = {
        (e.partition, e.bucket, e.index_file.index_type)
        for e in adds
        if e.index_file.index_type in (HASH_INDEX, DELETION_VECTORS_INDEX)
    }
    kept = [
        e for e in previous
        if e.index_file.file_name not in deleted
        and (e.partition, e.bucket, e.index_file.index_type) not in replaced
    ]
    return kept + adds


def _to_avro(e: IndexManifestEntry) -> dict[str, Any]:
    f = e.index_file
    ranges = None
    # A deletion-vector index file always has a list, empty when Java's compaction left no
    # vector in it ([] read back as [], never as null: Java's DeletionVectorsIndexFile
    # dereferences it); other index types (HASH) have none.
    if f.dv_ranges is not None or f.index_type == DELETION_VECTORS_INDEX:
        ranges = [
            {"f0": r.data_file_name, "f1": r.offset, "f2": r.length, "_CARDINALITY": r.cardinality}
            for r in (f.dv_ranges or {}).values()
        ]
    return {
        "_VERSION": INDEX_ENTRY_VERSION,
        "_KIND": e.kind.value,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_INDEX_TYPE": f.index_type,
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_DELETIONS_VECTORS_RANGES": ranges,
        "_EXTERNAL_PATH": f.external_path,
        "_GLOBAL_INDEX": dict(f.global_index) if f.global_index is not None else None,
    }


def _from_avro(r: dict[str, Any]) -> IndexManifestEntry:
    ranges = r.get("_DELETIONS_VECTORS_RANGES")
    dv = None
    if ranges is not None:  # [] (an index file without vectors) stays an empty mapping
        dv = {
            x["f0"]: DeletionVectorRange(x["f0"], int(x["f1"]), int(x["f2"]), x.get("_CARDINALITY"))
            for x in ranges
        }
    meta = IndexFileMeta(
        index_type=str(r["_INDEX_TYPE"]),
        file_name=str(r["_FILE_NAME"]),
        file_size=int(r["_FILE_SIZE"]),
        row_count=int(r["_ROW_COUNT"]),
        dv_ranges=dv,
        external_path=r.get("_EXTERNAL_PATH"),
        global_index=r.get("_GLOBAL_INDEX"),
    )
    return IndexManifestEntry(FileKind(int(r["_KIND"])), bytes(r["_PARTITION"]),
                              int(r["_BUCKET"]), meta)
