"""The key-value layout of primary-key data files: ``_KEY_<k>``..., ``_SEQUENCE_NUMBER``,
``_VALUE_KIND`` (the row kind byte), then every table column; and the conversion from user rows.

This module is the one home of the layout: the reserved names come from
``schema.special_fields`` (a user column may not take them), the row kinds are defined here."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

import numpy as np
import pyarrow as pa

from lakecore.schema.special_fields import (
    KEY_PREFIX,
    KV_SYSTEM_COLUMNS,
    SEQUENCE_NUMBER,
    VALUE_KIND,
)
from lakecore.schema.types import DataField, to_arrow

__all__ = [
    "KEY_PREFIX", "KV_SYSTEM_COLUMNS", "ROW_KINDS", "SEQUENCE_NUMBER", "VALUE_KIND", "RowKind",
    "kv_schema", "to_kv",
]


class RowKind(IntEnum):
    """Paimon's row kinds, stored as ``_VALUE_KIND`` (int8) in data files."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def is_retract(self) -> bool:
        """-U and -D retract a previous row; +I and +U add one (Paimon's ``isRetract``)."""
        return self in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    @property
    def short_string(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


ROW_KINDS = tuple(k.short_string for k in RowKind)  # index = Paimon's RowKind byte


def kv_schema(key_fields: Sequence[DataField], value_fields: Sequence[DataField]) -> pa.Schema:
    """``_KEY_<k>``..., ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, then every table column."""
    fields = [pa.field(KEY_PREFIX + f.name, to_arrow(f.type), False) for f in key_fields]
    fields.append(pa.field(SEQUENCE_NUMBER, pa.int64(), False))
    fields.append(pa.field(VALUE_KIND, pa.int8(), False))
    fields += [pa.field(f.name, to_arrow(f.type), f.type.nullable) for f in value_fields]
    return pa.schema(fields)


def to_kv(
    rows: pa.Table,
    key_names: Sequence[str],
    first_sequence: int,
    kinds: pa.Array,
    schema: pa.Schema,
) -> pa.Table:
    """Wrap conformed user rows into the KV layout with consecutive sequence numbers."""
    n = rows.num_rows
    seq = pa.array(np.arange(first_sequence, first_sequence + n, dtype=np.int64))
    cols = [rows.column(k) for k in key_names] + [seq, kinds] + list(rows.columns)
    return pa.Table.from_arrays(cols, schema=schema)


def value_columns(kv: pa.Table, names: Sequence[str]) -> pa.Table:
    return kv.select(list(names))
