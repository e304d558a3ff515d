"""Paimon data types: the schema-JSON spelling, nullability, and the mapping to pyarrow.

Paimon writes atomic types as strings (``"BIGINT NOT NULL"``, ``"DECIMAL(10, 2)"``,
``"TIMESTAMP(6) WITH LOCAL TIME ZONE"``) and nested types as objects
(``{"type": "ARRAY", "element": ...}``, ``{"type": "MAP", "key": ..., "value": ...}``,
``{"type": "ROW", "fields": [...]}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import pyarrow as pa

from lakecore.errors import SchemaError

MAX_LENGTH = 2147483647


class TypeRoot(Enum):
    """The root of a Paimon data type (INT, VARCHAR, ROW, ...)."""

    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_LTZ = "TIMESTAMP_LTZ"
    ARRAY = "ARRAY"
    MAP = "MAP"
    ROW = "ROW"


FIXED_WIDTH_ROOTS = frozenset(
    {
        TypeRoot.BOOLEAN,
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.FLOAT,
        TypeRoot.DOUBLE,
        TypeRoot.DATE,
        TypeRoot.TIME,
    }
)
NESTED_ROOTS = frozenset({TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.ROW})


@dataclass(frozen=True)
class DataType:
    """One Paimon type. ``length`` is for CHAR/VARCHAR/BINARY/VARBINARY, ``precision`` for
    DECIMAL/TIME/TIMESTAMP*, ``scale`` for DECIMAL; nested types carry their children."""

    root: TypeRoot
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    element: DataType | None = None
    key: DataType | None = None
    value: DataType | None = None
    fields: tuple[DataField, ...] = ()

    def copy(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    @property
    def is_nested(self) -> bool:
        return self.root in NESTED_ROOTS

    @property
    def is_string(self) -> bool:
        return self.root in (TypeRoot.CHAR, TypeRoot.VARCHAR)

    @property
    def is_binary(self) -> bool:
        return self.root in (TypeRoot.BINARY, TypeRoot.VARBINARY)

    def _base(self) -> str:
        r = self.root
        if r is TypeRoot.VARCHAR:
            return "STRING" if self.length == MAX_LENGTH else f"VARCHAR({self.length})"
        if r is TypeRoot.VARBINARY:
            return "BYTES" if self.length == MAX_LENGTH else f"VARBINARY({self.length})"
        if r in (TypeRoot.CHAR, TypeRoot.BINARY):
            return f"{r.value}({self.length})"
        if r is TypeRoot.DECIMAL:
            return f"DECIMAL({self.precision}, {self.scale})"
        if r in (TypeRoot.TIME, TypeRoot.TIMESTAMP):
            return f"{r.value}({self.precision})"
        if r is TypeRoot.TIMESTAMP_LTZ:
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        return r.value

    def to_json(self) -> Any:
        """The schema-JSON form: a string for atomic types, an object for nested ones."""
        suffix = "" if self.nullable else " NOT NULL"
        if self.root is TypeRoot.ARRAY:
            assert self.element is not None
            return {"type": "ARRAY" + suffix, "element": self.element.to_json()}
        if self.root is TypeRoot.MAP:
            assert self.key is not None and self.value is not None
            return {
                "type": "MAP" + suffix,
                "key": self.key.to_json(),
                "value": self.value.to_json(),
            }
        if self.root is TypeRoot.ROW:
            return {"type": "ROW" + suffix, "fields": [f.to_json() for f in self.fields]}
        return self._base() + suffix

    def __str__(self) -> str:
        j = self.to_json()
        return j if isinstance(j, str) else str(j)


@dataclass(frozen=True)
class DataField:
    """One field of a row type: id, name, type, description and default value, as in the
    schema JSON. ``default_value`` is kept so a schema written back (an ALTER) loses nothing;
    lakecore does not apply it."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        if self.default_value is not None:
            out["defaultValue"] = self.default_value
        return out

    @staticmethod
    def from_json(obj: dict[str, Any]) -> DataField:
        default = obj.get("defaultValue")
        return DataField(
            id=int(obj["id"]),
            name=obj["name"],
            type=parse_type(obj["type"]),
            description=obj.get("description"),
            default_value=None if default is None else str(default),
        )


_ATOMIC = re.compile(
    r"^(?P<name>[A-Z_]+(?: [A-Z_]+)*?)\s*(?:\((?P<args>[^)]*)\))?"
    r"(?P<ltz> WITH LOCAL TIME ZONE)?(?P<notnull> NOT NULL)?$"
)
_ALIASES = {"INTEGER": "INT", "STRING": "VARCHAR", "BYTES": "VARBINARY", "BOOL": "BOOLEAN"}


def parse_type(spec: Any) -> DataType:
    """Parse a schema-JSON type (string or object)."""
    if isinstance(spec, dict):
        head = str(spec["type"]).strip().upper()
        nullable = not head.endswith("NOT NULL")
        kind = head.replace("NOT NULL", "").strip()
        if kind == "ARRAY":
            return DataType(TypeRoot.ARRAY, nullable, element=parse_type(spec["element"]))
        if kind == "MAP":
            return DataType(
                TypeRoot.MAP, nullable, key=parse_type(spec["key"]), value=parse_type(spec["value"])
            )
        if kind == "ROW":
            fields = tuple(DataField.from_json(f) for f in spec["fields"])
            return DataType(TypeRoot.ROW, nullable, fields=fields)
        raise SchemaError(f"unsupported nested type {spec['type']!r}")
    text = " ".join(str(spec).strip().upper().split())
    m = _ATOMIC.match(text)
    if not m:
        raise SchemaError(f"cannot parse type {spec!r}")
    name = m.group("name")
    nullable = m.group("notnull") is None
    args = [a.strip() for a in m.group("args").split(",")] if m.group("args") else []
    ints = [int(a) for a in args if a]
    if name in ("STRING", "BYTES"):
        root = TypeRoot.VARCHAR if name == "STRING" else TypeRoot.VARBINARY
        return DataType(root, nullable, length=MAX_LENGTH)
    name = _ALIASES.get(name, name)
    if name == "TIMESTAMP_LTZ" or m.group("ltz"):
        return DataType(TypeRoot.TIMESTAMP_LTZ, nullable, precision=ints[0] if ints else 6)
    try:
        root = TypeRoot(name)
    except ValueError as e:
        raise SchemaError(f"unsupported type {spec!r}") from e
    if root in (TypeRoot.CHAR, TypeRoot.BINARY):
        return DataType(root, nullable, length=ints[0] if ints else 1)
    if root in (TypeRoot.VARCHAR, TypeRoot.VARBINARY):
        return DataType(root, nullable, length=ints[0] if ints else MAX_LENGTH)
    if root is TypeRoot.DECIMAL:
        p = ints[0] if ints else 10
        s = ints[1] if len(ints) > 1 else 0
        return DataType(root, nullable, precision=p, scale=s)
    if root is TypeRoot.TIMESTAMP:
        return DataType(root, nullable, precision=ints[0] if ints else 6)
    if root is TypeRoot.TIME:
        return DataType(root, nullable, precision=ints[0] if ints else 0)
    return DataType(root, nullable)


def _unit_precision(unit: str) -> int:
    return {"s": 0, "ms": 3, "us": 6, "ns": 9}[unit]


def _precision_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


def from_arrow(t: pa.DataType, nullable: bool = True) -> DataType:
    """Map a pyarrow type to a Paimon type (the mapping pypaimon uses)."""
    if pa.types.is_boolean(t):
        return DataType(TypeRoot.BOOLEAN, nullable)
    for check, root in (
        (pa.types.is_int8, TypeRoot.TINYINT),
        (pa.types.is_int16, TypeRoot.SMALLINT),
        (pa.types.is_int32, TypeRoot.INT),
        (pa.types.is_int64, TypeRoot.BIGINT),
        (pa.types.is_float32, TypeRoot.FLOAT),
        (pa.types.is_float64, TypeRoot.DOUBLE),
        (pa.types.is_date32, TypeRoot.DATE),
    ):
        if check(t):
            return DataType(root, nullable)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return DataType(TypeRoot.VARCHAR, nullable, length=MAX_LENGTH)
    if pa.types.is_fixed_size_binary(t):
        return DataType(TypeRoot.BINARY, nullable, length=t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return DataType(TypeRoot.VARBINARY, nullable, length=MAX_LENGTH)
    if pa.types.is_decimal(t):
        return DataType(TypeRoot.DECIMAL, nullable, precision=t.precision, scale=t.scale)
    if pa.types.is_timestamp(t):
        root = TypeRoot.TIMESTAMP if t.tz is None else TypeRoot.TIMESTAMP_LTZ
        return DataType(root, nullable, precision=_unit_precision(t.unit))
    if pa.types.is_time(t):
        return DataType(TypeRoot.TIME, nullable, precision=_unit_precision(t.unit))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return DataType(
            TypeRoot.ARRAY, nullable, element=from_arrow(t.value_type, t.value_field.nullable)
        )
    if pa.types.is_map(t):
        return DataType(
            TypeRoot.MAP,
            nullable,
            key=from_arrow(t.key_type, False),
            value=from_arrow(t.item_type, t.item_field.nullable),
        )
    if pa.types.is_struct(t):
        fields = tuple(
            DataField(i, f.name, from_arrow(f.type, f.nullable)) for i, f in enumerate(t)
        )
        return DataType(TypeRoot.ROW, nullable, fields=fields)
    raise SchemaError(f"unsupported pyarrow type {t}")


def to_arrow(t: DataType) -> pa.DataType:
    """Map a Paimon type to the pyarrow type lakecore reads and writes it as."""
    r = t.root
    simple = {
        TypeRoot.BOOLEAN: pa.bool_(),
        TypeRoot.TINYINT: pa.int8(),
        TypeRoot.SMALLINT: pa.int16(),
        TypeRoot.INT: pa.int32(),
        TypeRoot.BIGINT: pa.int64(),
        TypeRoot.FLOAT: pa.float32(),
        TypeRoot.DOUBLE: pa.float64(),
        TypeRoot.DATE: pa.date32(),
        TypeRoot.CHAR: pa.string(),
        TypeRoot.VARCHAR: pa.string(),
        TypeRoot.VARBINARY: pa.binary(),
    }
    if r in simple:
        return simple[r]
    if r is TypeRoot.BINARY:
        return pa.binary(t.length or 1)
    if r is TypeRoot.DECIMAL:
        return pa.decimal128(t.precision or 10, t.scale or 0)
    if r is TypeRoot.TIMESTAMP:
        return pa.timestamp(_precision_unit(t.precision or 0))
    if r is TypeRoot.TIMESTAMP_LTZ:
        return pa.timestamp(_precision_unit(t.precision or 0), tz="UTC")
    if r is TypeRoot.TIME:
        p = t.precision or 0
        return pa.time32("ms") if p <= 3 else pa.time64(_precision_unit(p))
    if r is TypeRoot.ARRAY:
        assert t.element is not None
        return pa.list_(pa.field("item", to_arrow(t.element), t.element.nullable))
    if r is TypeRoot.MAP:
        assert t.key is not None and t.value is not None
        return pa.map_(
            pa.field("key", to_arrow(t.key), False),
            pa.field("value", to_arrow(t.value), t.value.nullable),
        )
    fields = [pa.field(f.name, to_arrow(f.type), f.type.nullable) for f in t.fields]
    return pa.struct(fields)


def arrow_schema(fields: list[DataField] | tuple[DataField, ...]) -> pa.Schema:
    return pa.schema([pa.field(f.name, to_arrow(f.type), f.type.nullable) for f in fields])


@dataclass(frozen=True)
class RowType:
    """An ordered list of fields (a table's columns, a key, a partition)."""

    fields: tuple[DataField, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def types(self) -> list[DataType]:
        return [f.type for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"no column named {name!r}")

    def project(self, names: list[str]) -> RowType:
        return RowType(tuple(self.field(n) for n in names))

    def to_arrow(self) -> pa.Schema:
        return arrow_schema(self.fields)
