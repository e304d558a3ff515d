"""Manifest lists: Avro records of ``ManifestFileMeta``, one per manifest file of a snapshot.

The schema is the one pypaimon 2.1 writes. The bucket / level / row-id ranges let planners skip
whole manifests; older writers omit them (read as ``None`` = unknown).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import fastavro

from lakecore.errors import CorruptFileError
from lakecore.format.manifest import DEFAULT_MANIFEST_COMPRESSION, read_avro, write_avro
from lakecore.format.stats import PARTITION_STATS_SCHEMA, SimpleStats

MANIFEST_FILE_META_VERSION = 2


def _nullable(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


MANIFEST_FILE_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "ManifestFileMeta",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": PARTITION_STATS_SCHEMA},
        {"name": "_SCHEMA_ID", "type": "long"},
        _nullable("_MIN_BUCKET", "int"),
        _nullable("_MAX_BUCKET", "int"),
        _nullable("_MIN_LEVEL", "int"),
        _nullable("_MAX_LEVEL", "int"),
        _nullable("_MIN_ROW_ID", "long"),
        _nullable("_MAX_ROW_ID", "long"),
        _nullable("_TOTAL_BUCKETS", "int"),
        _nullable("_EXTRA_FILES", {"type": "array", "items": "string"}),
    ],
}
_PARSED_SCHEMA = fastavro.parse_schema(MANIFEST_FILE_META_SCHEMA)


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One manifest file: its size, how many entries it adds / deletes, and partition stats.

    ``total_buckets`` is set only when every entry shares one bucket count (-1 included: a
    bucket-unaware table's); a pure append reads only manifests that may disagree with it.
    """

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    total_buckets: int | None = None
    extra_files: tuple[str, ...] | None = None


def _to_avro(m: ManifestFileMeta) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_FILE_META_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": m.partition_stats.to_avro(),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
        "_TOTAL_BUCKETS": m.total_buckets,
        "_EXTRA_FILES": None if m.extra_files is None else list(m.extra_files),
    }


def _from_avro(r: dict[str, Any]) -> ManifestFileMeta:
    extra = r.get("_EXTRA_FILES")
    return ManifestFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        num_added_files=r["_NUM_ADDED_FILES"],
        num_deleted_files=r["_NUM_DELETED_FILES"],
        partition_stats=SimpleStats.from_avro(r["_PARTITION_STATS"]),
        schema_id=r["_SCHEMA_ID"],
        min_bucket=r.get("_MIN_BUCKET"),
        max_bucket=r.get("_MAX_BUCKET"),
        min_level=r.get("_MIN_LEVEL"),
        max_level=r.get("_MAX_LEVEL"),
        min_row_id=r.get("_MIN_ROW_ID"),
        max_row_id=r.get("_MAX_ROW_ID"),
        total_buckets=r.get("_TOTAL_BUCKETS"),
        extra_files=None if extra is None else tuple(extra),
    )


def encode_manifest_list(
    metas: Iterable[ManifestFileMeta], codec: str = DEFAULT_MANIFEST_COMPRESSION
) -> bytes:
    """A manifest list file's bytes. ``codec`` takes ``manifest.compression`` values."""
    return write_avro(_PARSED_SCHEMA, (_to_avro(m) for m in metas), codec)


def decode_manifest_list(data: bytes, path: str) -> list[ManifestFileMeta]:
    """The manifest metas of a manifest list; ``path`` names it in a ``CorruptFileError``."""
    records = read_avro(data, path)
    try:
        return [_from_avro(r) for r in records]
    except KeyError as exc:
        raise CorruptFileError(path, f"manifest file meta lacks field {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise CorruptFileError(path, f"bad manifest file meta: {exc}") from exc
