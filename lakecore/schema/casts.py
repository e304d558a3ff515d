"""Which column type changes Paimon allows (``DataTypeCasts``) and which lakecore can execute.

Paimon splits casts into *implicit* ones (safe widenings: ``INT -> BIGINT``, any number to
``DOUBLE`` or ``DECIMAL``, ``CHAR -> VARCHAR``, ``TIMESTAMP -> TIMESTAMP_LTZ``...) and
*explicit* ones (possibly lossy: ``BIGINT -> INT``, ``DOUBLE -> INT``, anything -> ``STRING``).
``ALTER TABLE ... UPDATE COLUMN TYPE`` accepts both unless the table sets
``disable-explicit-type-casting = true``; then only implicit ones. As in Paimon (whose
``SchemaManager`` also asks ``CastExecutors`` for an executor), a change is refused when the read
path cannot convert old files: lakecore reads them with pyarrow's cast (``safe=False``, as
pypaimon does), so a conversion pyarrow has no kernel for is refused at ALTER time.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pyarrow as pa

from lakecore.schema.types import NESTED_ROOTS, DataType, TypeRoot, to_arrow

R = TypeRoot
_CHARACTER = frozenset({R.CHAR, R.VARCHAR})
_BINARY = frozenset({R.BINARY, R.VARBINARY})
_INTEGER = frozenset({R.TINYINT, R.SMALLINT, R.INT, R.BIGINT})
_NUMERIC = _INTEGER | {R.FLOAT, R.DOUBLE, R.DECIMAL}
_TIMESTAMP = frozenset({R.TIMESTAMP, R.TIMESTAMP_LTZ})
_DATETIME = frozenset({R.DATE, R.TIME}) | _TIMESTAMP
_PREDEFINED = _CHARACTER | _BINARY | _NUMERIC | _DATETIME | {R.BOOLEAN}
_INT_EXPLICIT = _NUMERIC | _CHARACTER | {R.BOOLEAN} | _TIMESTAMP

# target root -> source roots, Paimon's DataTypeCasts table (identity is always implicit)
IMPLICIT: dict[TypeRoot, frozenset[TypeRoot]] = {
    R.CHAR: frozenset({R.CHAR}),
    R.VARCHAR: _CHARACTER,
    R.BOOLEAN: frozenset({R.BOOLEAN}),
    R.BINARY: frozenset({R.BINARY}),
    R.VARBINARY: _BINARY,
    R.DECIMAL: _NUMERIC,
    R.TINYINT: frozenset({R.TINYINT}),
    R.SMALLINT: frozenset({R.TINYINT, R.SMALLINT}),
    R.INT: frozenset({R.TINYINT, R.SMALLINT, R.INT}),
    R.BIGINT: _INTEGER,
    R.FLOAT: frozenset({R.TINYINT, R.SMALLINT, R.INT, R.BIGINT, R.FLOAT, R.DECIMAL}),
    R.DOUBLE: _NUMERIC,
    R.DATE: frozenset({R.DATE, R.TIMESTAMP}),
    R.TIME: frozenset({R.TIME, R.TIMESTAMP}),
    R.TIMESTAMP: frozenset({R.TIMESTAMP, R.TIMESTAMP_LTZ}),
    R.TIMESTAMP_LTZ: frozenset({R.TIMESTAMP_LTZ, R.TIMESTAMP}),
}
EXPLICIT: dict[TypeRoot, frozenset[TypeRoot]] = {
    R.CHAR: _PREDEFINED,
    R.VARCHAR: _PREDEFINED,
    R.BOOLEAN: _CHARACTER | _INTEGER,
    R.BINARY: _CHARACTER | {R.VARBINARY},
    R.VARBINARY: _CHARACTER | {R.BINARY},
    R.DECIMAL: _CHARACTER | {R.BOOLEAN} | _TIMESTAMP,
    R.TINYINT: _INT_EXPLICIT,
    R.SMALLINT: _INT_EXPLICIT,
    R.INT: _INT_EXPLICIT,
    R.BIGINT: _INT_EXPLICIT,
    R.FLOAT: _INT_EXPLICIT,
    R.DOUBLE: _CHARACTER | {R.BOOLEAN} | _TIMESTAMP,
    R.DATE: _TIMESTAMP | _CHARACTER,
    R.TIME: frozenset({R.TIME}) | _TIMESTAMP | _CHARACTER,
    R.TIMESTAMP: _DATETIME | _CHARACTER | _NUMERIC,
    R.TIMESTAMP_LTZ: _DATETIME | _CHARACTER | _NUMERIC,
}


def _nullable(t: DataType) -> DataType:
    """``t`` with nullability ignored everywhere (nested fields included)."""
    return replace(
        t,
        nullable=True,
        element=_nullable(t.element) if t.element is not None else None,
        key=_nullable(t.key) if t.key is not None else None,
        value=_nullable(t.value) if t.value is not None else None,
        fields=tuple(replace(f, type=_nullable(f.type), description=None, default_value=None)
                     for f in t.fields),
    )


def same_type_ignoring_nullability(a: DataType, b: DataType) -> bool:
    return _nullable(a) == _nullable(b)


def is_implicit(source: DataType, target: DataType) -> bool:
    """A safe widening (Paimon's implicit cast), identity included."""
    if same_type_ignoring_nullability(source, target):
        return True
    if source.root in NESTED_ROOTS or target.root in NESTED_ROOTS:
        return False
    return source.root in IMPLICIT.get(target.root, frozenset())


def supports_cast(source: DataType, target: DataType, allow_explicit: bool) -> bool:
    """Paimon's ``DataTypeCasts.supportsCast``. Nested types change only through their
    fields' paths, never as a whole (a ROW carries field ids a replacement would break)."""
    if source.nullable and not target.nullable and not allow_explicit:
        return False
    if is_implicit(source, target):
        return True
    if source.root in NESTED_ROOTS or target.root in NESTED_ROOTS:
        return False
    return allow_explicit and source.root in EXPLICIT.get(target.root, frozenset())


def can_execute(source: DataType, target: DataType) -> bool:
    """Whether lakecore's readers can convert old files' ``source`` values to ``target``."""
    if same_type_ignoring_nullability(source, target):
        return True
    if source.root in NESTED_ROOTS or target.root in NESTED_ROOTS:
        return False
    return _arrow_cast_ok(to_arrow(source.copy(True)), to_arrow(target.copy(True)))


@cache
def _arrow_cast_ok(source: pa.DataType, target: pa.DataType) -> bool:
    if source == target:
        return True
    try:
        # one null row: resolves the kernel and checks the target's parameters (an INT cannot
        # fit DECIMAL(10, 2)), without failing on values
        pa.nulls(1, type=source).cast(target, safe=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True
