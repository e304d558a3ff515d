"""Derive the writer's file spec and the merge spec from a table's schema and options."""

from __future__ import annotations

from collections.abc import Sequence

from lakecore.format.kv import KEY_PREFIX, kv_schema
from lakecore.io.data_file_writer import FileWriterSpec
from lakecore.merge.spec import MergeSpec
from lakecore.schema.types import arrow_schema
from lakecore.store.file_store import FileStore


def file_writer_spec(table: FileStore) -> FileWriterSpec:
    s, o = table.schema, table.options
    value_fields = tuple(s.row_type.fields)
    if s.primary_keys:
        key_fields = tuple(s.row_type.field(k) for k in s.trimmed_primary_keys)
        file_schema = kv_schema(key_fields, value_fields)
    else:
        key_fields = ()
        file_schema = arrow_schema(value_fields)
    return FileWriterSpec(
        schema_id=s.id,
        file_schema=file_schema,
        key_fields=key_fields,
        value_fields=value_fields,
        target_file_size=o.target_file_size(bool(s.primary_keys)),
        compression=o.file_compression,
        stats_mode=o.metadata_stats_mode,
    )


def merge_spec_for(table: FileStore, value_columns: Sequence[str] | None = None) -> MergeSpec:
    """The merge spec of a primary-key table from its options (dynamic options included), for
    ``value_columns`` (default: every column) plus the sequence fields they need."""
    s, o = table.schema, table.options
    values = list(value_columns) if value_columns is not None else s.row_type.names
    for f in o.sequence_field:
        if f not in values:
            values.append(f)
    return MergeSpec.from_options(
        o, key_columns=[KEY_PREFIX + k for k in s.trimmed_primary_keys], value_columns=values
    )
