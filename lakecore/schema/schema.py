"""Table schemas: the user's ``Schema`` and the stored ``TableSchema`` (``schema/schema-<id>``).

``Schema`` is what a user hands to ``create_table``; it is validated in full when it is built,
so a bad primary key, a nullable key column or a wrong option fails before anything is written.
``TableSchema`` is one version of a table's schema as Paimon stores it: the JSON layout, key
order and field ids follow Paimon's ``SchemaSerializer``, so Java Paimon, pypaimon and lakecore
read each other's files. Reading a stored schema is deliberately lenient (options lakecore does
not know are kept, not refused): the table may have been created by another engine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import count
from typing import Any

import pyarrow as pa

from lakecore.errors import CorruptFileError, OptionError, SchemaError
from lakecore.options import CoreOptions
from lakecore.options.registry import BUCKET
from lakecore.schema.types import DataField, DataType, RowType, TypeRoot, arrow_schema, from_arrow
from lakecore.schema.validation import validate_schema

CURRENT_VERSION = 3
PAIMON_07_VERSION = 1
PAIMON_08_VERSION = 2


@dataclass(frozen=True)
class Schema:
    """A table definition as the user gives it; validated when built.

    Lists become tuples. Primary-key columns become NOT NULL, as Paimon and pypaimon make them
    (so ``Schema.from_pyarrow_schema`` takes pyarrow's nullable default). ``options`` are
    Paimon's option strings, checked with ``CoreOptions.from_map`` plus the rules that need
    column types (``validation``).
    """

    fields: tuple[DataField, ...]
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict, hash=False)
    comment: str | None = None

    def __post_init__(self) -> None:
        keys = set(self.primary_keys)
        # Paimon's Schema normalisation: primary-key columns are NOT NULL (pyarrow's fields
        # are nullable by default; a null key value is refused when it is written)
        fields = tuple(
            replace(f, type=f.type.copy(nullable=False))
            if f.name in keys and f.type.nullable else f
            for f in self.fields
        )
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "partition_keys", tuple(self.partition_keys))
        object.__setattr__(self, "primary_keys", tuple(self.primary_keys))
        object.__setattr__(self, "options", dict(self.options))
        validate_schema(self.fields, self.partition_keys, self.primary_keys, self.options)

    @staticmethod
    def from_pyarrow_schema(
        pa_schema: pa.Schema,
        partition_keys: Sequence[str] | None = None,
        primary_keys: Sequence[str] | None = None,
        options: Mapping[str, Any] | None = None,
        comment: str | None = None,
    ) -> Schema:
        """Build a schema from pyarrow, the way pypaimon does.

        Field ids follow Paimon: each top-level column takes the next id, then the fields
        nested in it take ids from the same counter, innermost first. A field's
        ``description`` metadata becomes its description. Option values may be given as
        ``int``/``bool`` for convenience; they are stored as Paimon's strings.
        """
        if not isinstance(pa_schema, pa.Schema):
            raise SchemaError(f"expected a pyarrow.Schema, got {type(pa_schema).__name__}")
        ids = count()
        fields = []
        for pa_field in pa_schema:
            top_id = next(ids)
            try:
                data_type = _reassign_ids(from_arrow(pa_field.type, pa_field.nullable), ids)
            except SchemaError as error:
                raise SchemaError(f"column {pa_field.name!r}: {error}") from None
            fields.append(DataField(top_id, pa_field.name, data_type, _description(pa_field)))
        return Schema(
            tuple(fields),
            tuple(partition_keys or ()),
            tuple(primary_keys or ()),
            _option_strings(options or {}),
            comment,
        )

    @property
    def row_type(self) -> RowType:
        return RowType(self.fields)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


@dataclass(frozen=True)
class TableSchema:
    """One stored schema version (``schema/schema-<id>``), Paimon's ``TableSchema``."""

    version: int
    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str] = field(hash=False)
    comment: str | None
    time_millis: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "partition_keys", tuple(self.partition_keys))
        object.__setattr__(self, "primary_keys", tuple(self.primary_keys))
        object.__setattr__(self, "options", dict(self.options))

    @staticmethod
    def from_schema(schema_id: int, schema: Schema, time_millis: int | None = None) -> TableSchema:
        """The first (or next) stored version of ``schema``. ``time_millis`` defaults to now;
        pass it to make files reproducible."""
        return TableSchema(
            CURRENT_VERSION,
            schema_id,
            schema.fields,
            highest_field_id(schema.fields),
            schema.partition_keys,
            schema.primary_keys,
            schema.options,
            schema.comment,
            int(time.time() * 1000) if time_millis is None else time_millis,
        )

    # --- JSON -----------------------------------------------------------------------------

    def to_json(self) -> str:
        """The schema file's text: Paimon's keys in Paimon's order, two-space indent like
        pypaimon. ``comment`` is omitted when None, as Java does (Java would read a JSON null
        back as the string "null")."""
        obj: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            obj["comment"] = self.comment
        obj["timeMillis"] = self.time_millis
        return json.dumps(obj, indent=2, ensure_ascii=False)

    @staticmethod
    def from_json(text: str | bytes, path: str) -> TableSchema:
        """Parse a schema file written by Paimon, pypaimon or lakecore.

        Broken JSON, a missing key or a wrong shape raise ``CorruptFileError`` naming ``path``;
        a column type lakecore does not support raises ``SchemaError`` naming ``path``. Like
        Paimon, files from Paimon 0.7/0.8 get the defaults of their time (bucket 1, orc).
        """
        try:
            obj = json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            raise CorruptFileError(path, f"schema file is not valid JSON: {error}") from None
        if not isinstance(obj, dict):
            raise CorruptFileError(path, "schema file is not a JSON object")
        try:
            return _table_schema_from_obj(obj, path)
        except SchemaError as error:
            raise SchemaError(f"{path}: {error}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            detail = f"missing key {error}" if isinstance(error, KeyError) else str(error)
            raise CorruptFileError(path, f"malformed schema file: {detail}") from None

    # --- derived views --------------------------------------------------------------------

    @cached_property
    def core_options(self) -> CoreOptions:
        """The options, typed. Lenient: keys lakecore does not know are kept and ignored."""
        return CoreOptions.from_map(
            self.options,
            primary_keys=self.primary_keys,
            column_names=self.field_names,
            strict=False,
        )

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def row_type(self) -> RowType:
        return RowType(self.fields)

    @property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """The primary key minus partition keys: what data files and bucketing key on."""
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @property
    def bucket_keys(self) -> tuple[str, ...]:
        """``bucket-key`` if set, else the trimmed primary key (empty for unkeyed tables)."""
        return self.core_options.bucket_key or self.trimmed_primary_keys

    @property
    def num_buckets(self) -> int:
        return self.core_options.bucket

    @property
    def partition_type(self) -> RowType:
        return self.row_type.project(list(self.partition_keys))

    @property
    def key_type(self) -> RowType:
        """Row type of the trimmed primary key (the ``_KEY_`` columns and min/max keys)."""
        return self.row_type.project(list(self.trimmed_primary_keys))

    @property
    def bucket_key_type(self) -> RowType:
        return self.row_type.project(list(self.bucket_keys))

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.fields)

    def to_schema(self) -> Schema:
        """Back to a user ``Schema`` (validated, so only for tables lakecore can write)."""
        return Schema(
            self.fields, self.partition_keys, self.primary_keys, self.options, self.comment
        )


def highest_field_id(fields: Sequence[DataField]) -> int:
    """Largest field id, nested fields included (Paimon's ``currentHighestFieldId``);
    -1 when there are no fields."""
    return max((f.id for f in _walk_fields(fields)), default=-1)


# --- construction helpers -------------------------------------------------------------------


def _reassign_ids(data_type: DataType, ids: Iterator[int]) -> DataType:
    """Give nested ROW fields ids from the table's counter, innermost first (Paimon's
    ``ReassignFieldId``), so no two fields in a table share an id."""
    if data_type.root is TypeRoot.ROW:
        nested = []
        for f in data_type.fields:
            inner = _reassign_ids(f.type, ids)
            nested.append(DataField(next(ids), f.name, inner, f.description))
        return replace(data_type, fields=tuple(nested))
    if data_type.root is TypeRoot.ARRAY:
        assert data_type.element is not None
        return replace(data_type, element=_reassign_ids(data_type.element, ids))
    if data_type.root is TypeRoot.MAP:
        assert data_type.key is not None and data_type.value is not None
        key = _reassign_ids(data_type.key, ids)
        return replace(data_type, key=key, value=_reassign_ids(data_type.value, ids))
    return data_type


def _walk_fields(fields: Sequence[DataField]) -> Iterator[DataField]:
    for f in fields:
        yield f
        yield from _walk_type(f.type)


def _walk_type(data_type: DataType) -> Iterator[DataField]:
    if data_type.root is TypeRoot.ROW:
        yield from _walk_fields(data_type.fields)
    for child in (data_type.element, data_type.key, data_type.value):
        if child is not None:
            yield from _walk_type(child)


def _description(pa_field: pa.Field) -> str | None:
    metadata = pa_field.metadata or {}
    raw = metadata.get(b"description")
    return raw.decode("utf-8") if raw is not None else None


def _option_strings(options: Mapping[str, Any]) -> dict[str, str]:
    """Options as Paimon's strings; ``True`` -> ``"true"``, ``4`` -> ``"4"``."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, int | str):
            out[key] = str(value)
        else:
            raise OptionError(key, f"value must be a string, got {type(value).__name__}")
    return out


# --- reading --------------------------------------------------------------------------------


def _table_schema_from_obj(obj: dict[str, Any], path: str) -> TableSchema:
    version = int(obj.get("version", PAIMON_07_VERSION))
    fields = tuple(DataField.from_json(f) for f in _list(obj["fields"], "fields"))
    options = _stored_options(obj["options"])
    if version <= PAIMON_07_VERSION:
        options.setdefault(BUCKET.key, "1")
    if version <= PAIMON_08_VERSION:
        options.setdefault("file.format", "orc")
    partition_keys = tuple(str(k) for k in _list(obj["partitionKeys"], "partitionKeys"))
    primary_keys = tuple(str(k) for k in _list(obj["primaryKeys"], "primaryKeys"))
    names = {f.name for f in fields}
    for what, keys in (("partition key", partition_keys), ("primary key", primary_keys)):
        missing = [k for k in keys if k not in names]
        if missing:
            raise ValueError(f"{what}(s) {missing} are not columns")
    comment = obj.get("comment")
    return TableSchema(
        version=version,
        id=_int(obj["id"], "id"),
        fields=fields,
        highest_field_id=_int(obj["highestFieldId"], "highestFieldId"),
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options,
        comment=None if comment is None else str(comment),
        time_millis=_int(obj.get("timeMillis", 0), "timeMillis"),
    )


def _list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a JSON array")
    return value


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key!r} must be an integer, got {value!r}")
    return value


def _stored_options(value: Any) -> dict[str, str]:
    """Options as stored; non-string scalars read as text, like Jackson's ``asText``."""
    if not isinstance(value, dict):
        raise ValueError("'options' must be a JSON object")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, int | float | str):
            out[key] = str(item)
        else:
            raise ValueError(f"option {key!r} has a non-scalar value {item!r}")
    return out
