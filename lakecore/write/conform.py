"""Checking and casting user rows to the table schema, with errors that name the column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import NullKeyError, SchemaError
from lakecore.format.kv import ROW_KINDS
from lakecore.schema.types import RowType, to_arrow


def conform(data: pa.Table, row_type: RowType, primary_keys: list[str]) -> pa.Table:
    """Return ``data`` with exactly the table's columns, in order, cast to the table's types."""
    names = row_type.names
    have = data.column_names
    dup = {n for n in have if have.count(n) > 1}
    if dup:
        raise SchemaError(f"input has duplicate column(s) {sorted(dup)}")
    missing = [n for n in names if n not in have]
    if missing:
        raise SchemaError(f"input is missing column(s) {missing} of the table")
    extra = [n for n in have if n not in names]
    if extra:
        raise SchemaError(f"input column(s) {extra} are not in the table schema {names}")
    cols = []
    for f in row_type.fields:
        col = data.column(f.name)
        target = to_arrow(f.type)
        if col.type != target:
            try:
                col = col.cast(target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise SchemaError(
                    f"column {f.name!r}: cannot cast {col.type} to the table's type {f.type} ({e})"
                ) from e
        if not f.type.nullable and col.null_count:
            if f.name in primary_keys:
                raise NullKeyError(f.name, col.null_count)
            raise SchemaError(f"NOT NULL column {f.name!r} has {col.null_count} null value(s)")
        cols.append(col)
    schema = pa.schema(
        [pa.field(f.name, to_arrow(f.type), f.type.nullable) for f in row_type.fields]
    )
    return pa.Table.from_arrays(cols, schema=schema)


def row_kinds(data: pa.Table, rowkind_field: str | None) -> pa.Array:
    """The int8 RowKind of each row, from the ``rowkind.field`` column ('+I', '-U', '+U', '-D')."""
    n = data.num_rows
    if not rowkind_field:
        return pa.nulls(n, pa.int8()).fill_null(0)
    col = data.column(rowkind_field)
    idx = pc.index_in(col, value_set=pa.array(ROW_KINDS))
    if idx.null_count:
        bad = pc.filter(col, pc.is_null(idx)).unique().to_pylist()[:5]
        raise SchemaError(
            f"rowkind.field column {rowkind_field!r} has invalid row kind(s) {bad}; "
            f"expected one of {list(ROW_KINDS)}"
        )
    return (
        idx.combine_chunks().cast(pa.int8())
        if isinstance(idx, pa.ChunkedArray)
        else idx.cast(pa.int8())
    )
