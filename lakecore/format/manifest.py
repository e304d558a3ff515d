"""Manifest files: Avro records of ``ManifestEntry`` (one ADD or DELETE of a data file each).

The schema below is the one pypaimon 2.1 writes (record names, field order, unions), which Java
Paimon also reads. Decoding goes by field name and tolerates files from Java or older pypaimon
that lack the optional fields. Also home to the small Avro container helpers shared with
``manifest_list``.

``_CREATION_TIME`` is Paimon's *local* wall-clock time: Java writes
``Timestamp.fromLocalDateTime(LocalDateTime.now())`` and pypaimon ``datetime.now()`` into an
Avro ``timestamp-millis``, i.e. the writer's local date-time read as if it were UTC, and both
convert back with the reader's system zone (``creationTimeEpochMillis``). We keep the stored
number untouched (``creation_time_millis``) so rewriting an entry never shifts it;
``creation_time_from_epoch_millis`` / ``DataFileMeta.creation_epoch_millis`` convert.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from enum import Enum
from typing import Any

import fastavro

from lakecore.errors import CorruptFileError, OptionError
from lakecore.format.avro_container import read_records
from lakecore.format.stats import KEY_STATS_SCHEMA, VALUE_STATS_SCHEMA, SimpleStats

# Paimon's `manifest.compression` default (Java and pypaimon): zstd.
DEFAULT_MANIFEST_COMPRESSION = "zstd"
MANIFEST_ENTRY_VERSION = 2

_AVRO_CODECS = {"null": "null", "deflate": "deflate", "snappy": "snappy", "bzip2": "bzip2",
                "xz": "xz", "zstd": "zstandard", "zstandard": "zstandard"}
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_MS = timedelta(milliseconds=1)
_STRINGS = {"type": "array", "items": "string"}


class FileKind(Enum):
    """A manifest entry adds a file or deletes one (Paimon's FileKind)."""

    ADD = 0
    DELETE = 1


class FileSource(Enum):
    """Whether a data file was written by a writer (APPEND) or by compaction (COMPACT)."""

    APPEND = 0
    COMPACT = 1


_KINDS = {k.value: k for k in FileKind}
_SOURCES = {s.value: s for s in FileSource}


def _nullable(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


DATA_FILE_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "DataFileMeta",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": KEY_STATS_SCHEMA},
        {"name": "_VALUE_STATS", "type": VALUE_STATS_SCHEMA},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": _STRINGS},
        _nullable("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _nullable("_DELETE_ROW_COUNT", "long"),
        _nullable("_EMBEDDED_FILE_INDEX", "bytes"),
        _nullable("_FILE_SOURCE", "int"),
        _nullable("_VALUE_STATS_COLS", _STRINGS),
        _nullable("_EXTERNAL_PATH", "string"),
        _nullable("_FIRST_ROW_ID", "long"),
        _nullable("_WRITE_COLS", _STRINGS),
        _nullable("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
    ],
}

MANIFEST_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "ManifestEntry",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": DATA_FILE_META_SCHEMA},
    ],
}
_PARSED_ENTRY_SCHEMA = fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA)


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """One data (or changelog) file as a manifest describes it.

    Keys and stats are BinaryRow bytes. ``value_stats_cols``: ``None`` = stats cover all
    columns, ``()`` = no columns. ``creation_time_millis`` is Paimon's local-time value (see
    the module docstring).
    """

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time_millis: int | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: FileSource | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    def upgrade(self, level: int) -> DataFileMeta:
        """The same file moved to ``level`` (compaction's no-rewrite upgrade)."""
        return replace(self, level=level)

    @property
    def identifier(self) -> tuple[Any, ...]:
        """The file's part of Paimon's entry identity: a file at another level is another entry."""
        return (self.level, self.file_name, self.extra_files, self.embedded_index,
                self.external_path)

    def creation_epoch_millis(self, tz: tzinfo | None = None) -> int | None:
        """The creation instant, reading the stored wall clock in ``tz`` (default: local zone)."""
        if self.creation_time_millis is None:
            return None
        wall = _EPOCH_NAIVE + self.creation_time_millis * _MS
        aware = wall.replace(tzinfo=tz) if tz is not None else wall.astimezone()
        offset = aware.utcoffset() or timedelta(0)
        return self.creation_time_millis - offset // _MS


def creation_time_from_epoch_millis(epoch_millis: int, tz: tzinfo | None = None) -> int:
    """Paimon's ``_CREATION_TIME`` for an instant: ``tz``'s wall clock (default local) as UTC."""
    local = (_EPOCH_UTC + epoch_millis * _MS).astimezone(tz)
    offset = local.utcoffset() or timedelta(0)
    return epoch_millis + offset // _MS


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """An ADD or DELETE of one data file in one (partition, bucket)."""

    kind: FileKind
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    def identifier(self) -> tuple[Any, ...]:
        """Paimon's file identity for merging and conflict checks (FileEntry.Identifier):
        (partition, bucket, level, file_name, extra_files, embedded_index, external_path)."""
        return (self.partition, self.bucket, *self.file.identifier)


def avro_codec(compression: str) -> str:
    """fastavro's codec name for a ``manifest.compression`` value."""
    codec = _AVRO_CODECS.get(compression.lower())
    if codec is None:
        raise OptionError("manifest.compression",
                          f"unsupported {compression!r}; one of {sorted(_AVRO_CODECS)}")
    return codec


def _missing_codec(exc: Exception) -> ModuleNotFoundError | None:
    text = str(exc)
    if isinstance(exc, ValueError) and "you need to install" in text:
        return ModuleNotFoundError(f"Avro codec unavailable: {text}")
    return None


def write_avro(parsed_schema: Any, records: Iterable[dict[str, Any]], compression: str) -> bytes:
    """An Avro container file's bytes (the codec library must be installed)."""
    codec = avro_codec(compression)
    buf = io.BytesIO()
    try:
        fastavro.writer(buf, parsed_schema, records, codec=codec)
    except ValueError as exc:
        missing = _missing_codec(exc)
        if missing is not None:
            raise missing from exc
        raise
    return buf.getvalue()


def read_avro(data: bytes, path: str) -> list[dict[str, Any]]:
    """All records of an Avro container, decoded with the schema the writer stored."""
    try:
        return read_records(data)
    except Exception as exc:  # fastavro raises EOFError, ValueError, codec errors, ...
        missing = _missing_codec(exc)
        if missing is not None:
            raise missing from exc
        raise CorruptFileError(path, f"unreadable Avro file: {type(exc).__name__}: {exc}") from exc


def _raw_millis(value: Any) -> int | None:
    """The stored millis of a timestamp-millis value, whatever form fastavro gave it in."""
    if value is None or isinstance(value, int):
        return value
    return (value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH_NAIVE)) // _MS


def _lookup(members: dict[int, Any], value: int, field: str) -> Any:
    """Enum member by value (a dict lookup: Enum(value) is slow on 10k-entry manifests)."""
    member = members.get(value)
    if member is None:
        raise ValueError(f"unknown {field} value {value!r}")
    return member


def _opt_tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _opt_list(value: tuple[Any, ...] | None) -> list[Any] | None:
    """A list for fastavro: in a union position it would read a tuple as (branch, value)."""
    return None if value is None else list(value)


def _file_to_avro(f: DataFileMeta) -> dict[str, Any]:
    return {
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_MIN_KEY": f.min_key,
        "_MAX_KEY": f.max_key,
        "_KEY_STATS": f.key_stats.to_avro(),
        "_VALUE_STATS": f.value_stats.to_avro(),
        "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
        "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
        "_SCHEMA_ID": f.schema_id,
        "_LEVEL": f.level,
        "_EXTRA_FILES": list(f.extra_files),
        "_CREATION_TIME": f.creation_time_millis,
        "_DELETE_ROW_COUNT": f.delete_row_count,
        "_EMBEDDED_FILE_INDEX": f.embedded_index,
        "_FILE_SOURCE": None if f.file_source is None else f.file_source.value,
        "_VALUE_STATS_COLS": _opt_list(f.value_stats_cols),
        "_EXTERNAL_PATH": f.external_path,
        "_FIRST_ROW_ID": f.first_row_id,
        "_WRITE_COLS": _opt_list(f.write_cols),
        "_WRITE_COLS_SEQUENCES": _opt_list(f.write_cols_sequences),
    }


def _file_from_avro(r: dict[str, Any]) -> DataFileMeta:
    source = r.get("_FILE_SOURCE")
    return DataFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        row_count=r["_ROW_COUNT"],
        min_key=r["_MIN_KEY"],
        max_key=r["_MAX_KEY"],
        key_stats=SimpleStats.from_avro(r["_KEY_STATS"]),
        value_stats=SimpleStats.from_avro(r["_VALUE_STATS"]),
        min_sequence_number=r["_MIN_SEQUENCE_NUMBER"],
        max_sequence_number=r["_MAX_SEQUENCE_NUMBER"],
        schema_id=r["_SCHEMA_ID"],
        level=r["_LEVEL"],
        extra_files=tuple(r.get("_EXTRA_FILES") or ()),
        creation_time_millis=_raw_millis(r.get("_CREATION_TIME")),
        delete_row_count=r.get("_DELETE_ROW_COUNT"),
        embedded_index=r.get("_EMBEDDED_FILE_INDEX"),
        file_source=None if source is None else _lookup(_SOURCES, source, "_FILE_SOURCE"),
        value_stats_cols=_opt_tuple(r.get("_VALUE_STATS_COLS")),
        external_path=r.get("_EXTERNAL_PATH"),
        first_row_id=r.get("_FIRST_ROW_ID"),
        write_cols=_opt_tuple(r.get("_WRITE_COLS")),
        write_cols_sequences=_opt_tuple(r.get("_WRITE_COLS_SEQUENCES")),
    )


def encode_manifest(
    entries: Iterable[ManifestEntry], codec: str = DEFAULT_MANIFEST_COMPRESSION
) -> bytes:
    """A manifest file's bytes. ``codec`` takes ``manifest.compression`` values."""
    records = (
        {
            "_VERSION": MANIFEST_ENTRY_VERSION,
            "_KIND": e.kind.value,
            "_PARTITION": e.partition,
            "_BUCKET": e.bucket,
            "_TOTAL_BUCKETS": e.total_buckets,
            "_FILE": _file_to_avro(e.file),
        }
        for e in entries
    )
    return write_avro(_PARSED_ENTRY_SCHEMA, records, codec)


def decode_manifest(data: bytes, path: str) -> list[ManifestEntry]:
    """The entries of a manifest file; ``path`` names it in a ``CorruptFileError``."""
    records = read_avro(data, path)
    try:
        return [
            ManifestEntry(
                kind=_lookup(_KINDS, r["_KIND"], "_KIND"),
                partition=r["_PARTITION"],
                bucket=r["_BUCKET"],
                total_buckets=r["_TOTAL_BUCKETS"],
                file=_file_from_avro(r["_FILE"]),
            )
            for r in records
        ]
    except KeyError as exc:
        raise CorruptFileError(path, f"manifest entry lacks field {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise CorruptFileError(path, f"bad manifest entry: {exc}") from exc
