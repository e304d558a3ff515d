"""Snapshot JSON (``snapshot/snapshot-<id>``, also the body of ``tag/tag-<name>``), version 3.

Keys are Paimon's camelCase names in Java's order. Optional keys are written only when set: Java
marks each of them ``@JsonInclude(NON_NULL)`` and pypaimon's ``non_null``, so neither writes an
explicit null. Keys this module does not know (a newer Paimon's ``operation``, another writer's
own) are kept in ``extra`` and written back after the known ones, so re-serialising a foreign
snapshot (a tag copy, a rollback restoring a tag's snapshot) loses nothing. A new snapshot never
inherits them: they describe the snapshot they were read from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lakecore.errors import CorruptFileError

SNAPSHOT_VERSION = 3
# Paimon's commit identifier of a batch (non-streaming) commit: Long.MAX_VALUE.
BATCH_COMMIT_IDENTIFIER = 2**63 - 1


class CommitKind(Enum):
    """The kind of change a snapshot records (Paimon's Snapshot.CommitKind)."""

    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One snapshot: base list + delta list together name every live file.

    ``log_offsets`` is only carried for snapshots of Paimon <= 0.9 (log-system offsets per
    bucket). ``uuid`` / ``writer_version`` are what pypaimon 2.x adds; Java ignores them.
    """

    version: int = SNAPSHOT_VERSION
    id: int
    schema_id: int
    base_manifest_list: str
    base_manifest_list_size: int | None = None
    delta_manifest_list: str
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    log_offsets: dict[int, int] | None = None
    total_record_count: int
    delta_record_count: int
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = None
    total_file_size: int | None = None
    total_data_files: int | None = None
    uuid: str | None = None
    writer_version: str | None = None
    extra: Mapping[str, Any] | None = field(default=None, hash=False)  # unknown keys, kept

    def to_json(self) -> str:
        """Paimon's snapshot JSON (2-space indent, as pypaimon writes it)."""
        out: dict[str, Any] = {}
        for attr, key, kind, _required in _FIELDS:
            value = getattr(self, attr)
            if value is None:
                continue
            if kind == "kind":
                value = value.value
            elif kind == "offsets":
                value = {str(k): v for k, v in value.items()}
            out[key] = value
        for key, value in (self.extra or {}).items():
            if key not in _KNOWN_KEYS:
                out[key] = value
        return json.dumps(out, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, path: str) -> Snapshot:
        """Parse a snapshot file; ``path`` names it in a ``CorruptFileError``."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFileError(path, f"snapshot is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise CorruptFileError(path, "snapshot JSON is not an object")
        values: dict[str, Any] = {}
        for attr, key, kind, required in _FIELDS:
            value = data.get(key)
            if value is None:
                if required:
                    raise CorruptFileError(path, f"snapshot lacks required key {key!r}")
                continue
            values[attr] = _parse(value, kind, key, path)
        extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
        if extra:
            values["extra"] = extra
        return cls(**values)


def _parse(value: Any, kind: str, key: str, path: str) -> Any:
    """Check one JSON value against its expected shape and convert it."""
    ok = {
        "int": lambda v: type(v) is int,
        "str": lambda v: isinstance(v, str),
        "kind": lambda v: v in CommitKind.__members__,
        "props": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "offsets": lambda v: isinstance(v, dict) and all(type(x) is int for x in v.values()),
    }[kind](value)
    if ok and kind == "offsets":
        try:
            return {int(k): v for k, v in value.items()}
        except ValueError:
            ok = False
    if not ok:
        raise CorruptFileError(path, f"snapshot key {key!r} has a bad value: {value!r}")
    if kind == "kind":
        return CommitKind(value)
    if kind == "props":
        return dict(value)
    return value


# (attribute, JSON key, value kind, required), in the order Java's Snapshot writes them.
_FIELDS: tuple[tuple[str, str, str, bool], ...] = (
    ("version", "version", "int", True),
    ("id", "id", "int", True),
    ("schema_id", "schemaId", "int", True),
    ("base_manifest_list", "baseManifestList", "str", True),
    ("base_manifest_list_size", "baseManifestListSize", "int", False),
    ("delta_manifest_list", "deltaManifestList", "str", True),
    ("delta_manifest_list_size", "deltaManifestListSize", "int", False),
    ("changelog_manifest_list", "changelogManifestList", "str", False),
    ("changelog_manifest_list_size", "changelogManifestListSize", "int", False),
    ("index_manifest", "indexManifest", "str", False),
    ("commit_user", "commitUser", "str", True),
    ("commit_identifier", "commitIdentifier", "int", True),
    ("commit_kind", "commitKind", "kind", True),
    ("time_millis", "timeMillis", "int", True),
    ("log_offsets", "logOffsets", "offsets", False),
    ("total_record_count", "totalRecordCount", "int", True),
    ("delta_record_count", "deltaRecordCount", "int", True),
    ("changelog_record_count", "changelogRecordCount", "int", False),
    ("watermark", "watermark", "int", False),
    ("statistics", "statistics", "str", False),
    ("properties", "properties", "props", False),
    ("next_row_id", "nextRowId", "int", False),
    ("total_file_size", "totalFileSize", "int", False),
    ("total_data_files", "totalDataFiles", "int", False),
    ("uuid", "uuid", "str", False),
    ("writer_version", "writerVersion", "str", False),
)
_KNOWN_KEYS = frozenset(key for _, key, _, _ in _FIELDS)
