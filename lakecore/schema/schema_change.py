"""Schema changes in pypaimon's shape: ``SchemaChange.add_column(...)`` and friends.

Each change is a frozen value; ``FileSystemCatalog.alter_table`` applies a list of them
(``lakecore.schema.evolution``) as one new ``schema-<id>`` file. The classes, factory names
and arguments are pypaimon's (``pypaimon.schema.schema_change``), so code written against
pypaimon runs unchanged. ``to_json`` / ``from_json`` use Paimon's JSON form (the REST
catalog's ``{"action": "addColumn", "fieldNames": [...], ...}``), which the ``lakecore
alter`` command and the pipeline take.

Types may be given as a lakecore ``DataType``, Paimon's schema-JSON spelling (text for atomic
types: ``"BIGINT"``, ``"DECIMAL(12, 2) NOT NULL"``; an object for ARRAY / MAP / ROW) or a
pyarrow type (mapped as ``Schema.from_pyarrow_schema`` maps it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeAlias

import pyarrow as pa

from lakecore.errors import SchemaChangeError, SchemaError
from lakecore.schema.types import DataType, from_arrow, parse_type

TypeLike: TypeAlias = "DataType | str | pa.DataType | Mapping[str, Any]"


def as_data_type(value: TypeLike) -> DataType:
    """A ``DataType`` from a ``DataType``, Paimon's type text or JSON object, or pyarrow."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, pa.DataType):
        return from_arrow(value)
    if isinstance(value, str | Mapping):
        try:
            return parse_type(dict(value) if isinstance(value, Mapping) else value)
        except (KeyError, TypeError, ValueError) as error:
            raise SchemaError(f"cannot parse type {value!r}: {error}") from None
    raise SchemaError(f"expected a DataType, a type string or a pyarrow type, got {value!r}")


def _names(field_names: str | Sequence[str]) -> tuple[str, ...]:
    """A column path: ``"a"`` or ``["a", "b"]`` (``b`` nested in ROW ``a``)."""
    names = (field_names,) if isinstance(field_names, str) else tuple(field_names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise SchemaError(f"a column path must be one or more non-empty names, got {field_names!r}")
    return names


class MoveType(Enum):
    """Where ``Move`` puts a column."""

    FIRST = "FIRST"
    AFTER = "AFTER"
    BEFORE = "BEFORE"
    LAST = "LAST"


@dataclass(frozen=True)
class Move:
    """A column position: first, last, or after/before a reference column."""

    field_name: str
    reference_field_name: str | None
    type: MoveType

    @staticmethod
    def first(field_name: str) -> Move:
        return Move(field_name, None, MoveType.FIRST)

    @staticmethod
    def after(field_name: str, reference_field_name: str) -> Move:
        return Move(field_name, reference_field_name, MoveType.AFTER)

    @staticmethod
    def before(field_name: str, reference_field_name: str) -> Move:
        return Move(field_name, reference_field_name, MoveType.BEFORE)

    @staticmethod
    def last(field_name: str) -> Move:
        return Move(field_name, None, MoveType.LAST)

    def to_json(self) -> dict[str, Any]:
        return {"fieldName": self.field_name, "referenceFieldName": self.reference_field_name,
                "type": self.type.value}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Move:
        return Move(str(obj["fieldName"]), obj.get("referenceFieldName"),
                    MoveType(str(obj["type"]).upper()))


class SchemaChange:
    """Base of every change, and pypaimon's factory: ``SchemaChange.add_column(...)``."""

    ACTION: str = ""

    @staticmethod
    def set_option(key: str, value: Any) -> SetOption:
        return SetOption(key, value)

    @staticmethod
    def remove_option(key: str) -> RemoveOption:
        return RemoveOption(key)

    @staticmethod
    def update_comment(comment: str | None) -> UpdateComment:
        return UpdateComment(comment)

    @staticmethod
    def add_column(field_name: str | Sequence[str], data_type: TypeLike,
                   comment: str | None = None, move: Move | None = None) -> AddColumn:
        return AddColumn(_names(field_name), as_data_type(data_type), comment, move)

    @staticmethod
    def rename_column(field_name: str | Sequence[str], new_name: str) -> RenameColumn:
        return RenameColumn(_names(field_name), new_name)

    @staticmethod
    def drop_column(field_name: str | Sequence[str]) -> DropColumn:
        return DropColumn(_names(field_name))

    @staticmethod
    def update_column_type(field_name: str | Sequence[str], new_data_type: TypeLike,
                           keep_nullability: bool = False) -> UpdateColumnType:
        return UpdateColumnType(_names(field_name), as_data_type(new_data_type),
                                keep_nullability)

    @staticmethod
    def update_column_nullability(field_name: str | Sequence[str],
                                  new_nullability: bool) -> UpdateColumnNullability:
        return UpdateColumnNullability(_names(field_name), bool(new_nullability))

    @staticmethod
    def update_column_comment(field_name: str | Sequence[str],
                              comment: str | None) -> UpdateColumnComment:
        return UpdateColumnComment(_names(field_name), comment)

    @staticmethod
    def update_column_position(move: Move) -> UpdateColumnPosition:
        return UpdateColumnPosition(move)

    # -- JSON (Paimon's REST form) ---------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SchemaChange:
        """One change from Paimon's JSON form; ``SchemaChangeError`` names a bad one."""
        try:
            action = obj["action"]
            if action == SetOption.ACTION:
                return SetOption(str(obj["key"]), obj["value"])
            if action == RemoveOption.ACTION:
                return RemoveOption(str(obj["key"]))
            if action == UpdateComment.ACTION:
                return UpdateComment(obj.get("comment"))
            if action == AddColumn.ACTION:
                move = obj.get("move")
                return AddColumn(_names(obj["fieldNames"]), as_data_type(obj["dataType"]),
                                 obj.get("comment"), Move.from_json(move) if move else None)
            if action == RenameColumn.ACTION:
                return RenameColumn(_names(obj["fieldNames"]), str(obj["newName"]))
            if action == DropColumn.ACTION:
                return DropColumn(_names(obj["fieldNames"]))
            if action == UpdateColumnType.ACTION:
                return UpdateColumnType(_names(obj["fieldNames"]),
                                        as_data_type(obj["newDataType"]),
                                        bool(obj.get("keepNullability", False)))
            if action == UpdateColumnNullability.ACTION:
                return UpdateColumnNullability(_names(obj["fieldNames"]),
                                               bool(obj["newNullability"]))
            if action == UpdateColumnComment.ACTION:
                return UpdateColumnComment(_names(obj["fieldNames"]), obj.get("newComment"))
            if action == UpdateColumnPosition.ACTION:
                return UpdateColumnPosition(Move.from_json(obj["move"]))
        except (KeyError, TypeError, ValueError) as error:
            raise SchemaChangeError(f"malformed schema change {dict(obj)!r}: {error!r}") from None
        raise SchemaChangeError(f"unknown schema change action {obj.get('action')!r}")


@dataclass(frozen=True)
class SetOption(SchemaChange):
    """Set a table option (``ALTER TABLE SET``); values become Paimon's strings."""

    ACTION = "setOption"
    key: str
    value: str

    def __post_init__(self) -> None:
        v = self.value
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        object.__setattr__(self, "value", text)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "key": self.key, "value": self.value}


@dataclass(frozen=True)
class RemoveOption(SchemaChange):
    """Remove a table option (``ALTER TABLE RESET``)."""

    ACTION = "removeOption"
    key: str

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "key": self.key}


@dataclass(frozen=True)
class UpdateComment(SchemaChange):
    """Set (or clear, with None) the table's comment."""

    ACTION = "updateComment"
    comment: str | None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "comment": self.comment}


@dataclass(frozen=True)
class AddColumn(SchemaChange):
    """Add a nullable column (a path adds a field to a nested ROW) with a new field id."""

    ACTION = "addColumn"
    field_names: tuple[str, ...]
    data_type: DataType
    comment: str | None = None
    move: Move | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names),
                "dataType": self.data_type.to_json(), "comment": self.comment,
                "move": self.move.to_json() if self.move else None}


@dataclass(frozen=True)
class RenameColumn(SchemaChange):
    """Rename a column; its field id (and so its data) stays."""

    ACTION = "renameColumn"
    field_names: tuple[str, ...]
    new_name: str

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names),
                "newName": self.new_name}


@dataclass(frozen=True)
class DropColumn(SchemaChange):
    """Drop a column; its field id is never reused, so re-adding the name starts empty."""

    ACTION = "dropColumn"
    field_names: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names)}


@dataclass(frozen=True)
class UpdateColumnType(SchemaChange):
    """Change a column's type within Paimon's cast rules; old files are cast when read."""

    ACTION = "updateColumnType"
    field_names: tuple[str, ...]
    new_data_type: DataType
    keep_nullability: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names),
                "newDataType": self.new_data_type.to_json(),
                "keepNullability": self.keep_nullability}


@dataclass(frozen=True)
class UpdateColumnNullability(SchemaChange):
    """Make a column nullable (True) or NOT NULL (False)."""

    ACTION = "updateColumnNullability"
    field_names: tuple[str, ...]
    new_nullability: bool

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names),
                "newNullability": self.new_nullability}


@dataclass(frozen=True)
class UpdateColumnComment(SchemaChange):
    """Set (or clear) a column's comment (its ``description``)."""

    ACTION = "updateColumnComment"
    field_names: tuple[str, ...]
    new_comment: str | None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "fieldNames": list(self.field_names),
                "newComment": self.new_comment}


@dataclass(frozen=True)
class UpdateColumnPosition(SchemaChange):
    """Move a top-level column."""

    ACTION = "updateColumnPosition"
    move: Move

    def to_json(self) -> dict[str, Any]:
        return {"action": self.ACTION, "move": self.move.to_json()}


__all__ = [
    "AddColumn", "DropColumn", "Move", "MoveType", "RemoveOption", "RenameColumn",
    "SchemaChange", "SetOption", "UpdateColumnComment", "UpdateColumnNullability",
    "UpdateColumnPosition", "UpdateColumnType", "UpdateComment", "as_data_type",
]
