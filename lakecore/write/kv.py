"""The key-value layout of primary-key data files and the conversion from user rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakecore.merge.spec import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.types import DataField, to_arrow

__all__ = ["KEY_PREFIX", "ROW_KINDS", "SEQUENCE_NUMBER", "VALUE_KIND", "kv_schema", "to_kv"]
ROW_KINDS = ("+I", "-U", "+U", "-D")  # index = Paimon's RowKind byte


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
