"""Which Parquet types lakecore writes a table's columns as: Paimon's, type by type.

Paimon's writer (``ParquetSchemaConverter``, ``ParquetRowDataWriter``) decides a column's
physical type and annotation from its Paimon type; Java Paimon's reader and its filter pushdown
(``ParquetFilters``) then expect exactly that type. lakecore writes the same:

- DECIMAL(p <= 9) as INT32, DECIMAL(10 <= p <= 18) as INT64, wider ones as
  FIXED_LEN_BYTE_ARRAY of the fewest bytes that hold p digits, each annotated DECIMAL(p, s)
  (Arrow's ``store_decimal_as_integer``: the same rule).
- TIMESTAMP / TIMESTAMP_LTZ(p <= 3) as INT64 TIMESTAMP(MILLIS), p <= 6 as INT64
  TIMESTAMP(MICROS) (isAdjustedToUTC for LTZ only): Arrow's own mapping of the ``s``, ``ms`` and
  ``us`` units lakecore reads these types as.
- TIMESTAMP / TIMESTAMP_LTZ(p > 6) as INT96 (Julian day and nanosecond of day, unannotated),
  computed here as Paimon's writer computes them, handed to Arrow as 12-byte fixed-size binary
  and turned into INT96 in the footer (``parquet_footer``: Arrow's INT96 switch is per file, not
  per column). INT96 has no defined order: these columns get no Parquet statistics (parquet-mr
  writes no min/max for them either); the writer measures their ``DataFileMeta`` statistics from
  the rows.
- TIME(p) as INT32 TIME(MILLIS) whatever p: Paimon's TIME is a millisecond of the day; finer
  digits are cut on write (Java reads any TIME column as INT32).
- BINARY(n) as BYTE_ARRAY, as VARBINARY (Arrow would write its ``fixed_size_binary`` as
  FIXED_LEN_BYTE_ARRAY).

Files lakecore wrote before (every DECIMAL as FIXED_LEN_BYTE_ARRAY, TIMESTAMP(p > 6) as INT64
nanoseconds, TIME(p > 3) as INT64, BINARY(n) as FIXED_LEN_BYTE_ARRAY) still read: Arrow decodes
all of these, and every chunk read is cast to the table's types (``formats.conform_chunk``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INT96_BYTES = 12
JULIAN_EPOCH_OFFSET_DAYS = 2_440_588  # the Julian day of 1970-01-01
MILLIS_PER_DAY = 86_400_000
NANOS_PER_MILLI = 1_000_000
_INT96 = np.dtype([("nanos_of_day", "<i8"), ("julian_day", "<i4")])


@dataclass(frozen=True)
class ParquetLayout:
    """The Arrow schema handed to pyarrow's writer for a file schema, and what the footer of
    such a file needs changed afterwards."""

    file_schema: pa.Schema  # the table's types (what the writer is given and reads back)
    schema: pa.Schema  # what pyarrow writes (``physical_type`` of each field)
    int96_leaves: tuple[int, ...]  # leaf columns (in column order) that are INT96 timestamps
    int96_paths: tuple[str, ...]  # their dotted Parquet paths (no statistics)
    int96_columns: tuple[str, ...]  # the top-level columns that are INT96 timestamps
    leaf_paths: tuple[str, ...]  # every leaf's dotted Parquet path, in column order
    # DECIMAL(p <= 18) as INT32 / INT64 (pyarrow's ``store_decimal_as_integer``)
    decimals_as_integers: bool = True

    @property
    def converts(self) -> bool:
        """Whether a chunk needs converting (``schema`` is not ``file_schema``)."""
        return self.schema is not self.file_schema

    @property
    def has_int96(self) -> bool:
        return bool(self.int96_leaves)

    def statistics_columns(self) -> bool | list[str]:
        """pyarrow's ``write_statistics``: every leaf but the INT96 ones."""
        if not self.int96_paths:
            return True
        skip = set(self.int96_paths)
        return [p for p in self.leaf_paths if p not in skip]

    def convert(self, t: pa.Table) -> pa.Table:
        """``t`` (of ``file_schema``) in the types of ``schema``."""
        if not self.converts:
            return t
        cols = []
        for col, want in zip(t.columns, self.schema, strict=True):
            if col.type != want.type:
                col = pa.chunked_array([_convert(c, want.type) for c in col.chunks],
                                       type=want.type)
            cols.append(col)
        return pa.Table.from_arrays(cols, schema=self.schema)


@lru_cache(maxsize=256)
def parquet_layout(file_schema: pa.Schema) -> ParquetLayout:
    """The layout of files of ``file_schema`` (Arrow types as ``schema.types.to_arrow`` maps
    Paimon's: ``ns`` timestamps are the precisions above 6, ``time64`` TIME(p > 3),
    ``fixed_size_binary`` BINARY(n))."""
    fields = [pa.field(f.name, physical_type(f.type), f.nullable, f.metadata)
              for f in file_schema]
    schema = pa.schema(fields, metadata=file_schema.metadata)
    if schema.equals(file_schema, check_metadata=True):
        schema = file_schema  # nothing to convert (``converts``)
    paths: list[str] = []
    int96: list[int] = []
    for f in file_schema:
        _leaves(f.name, f.type, paths, int96)
    return ParquetLayout(
        file_schema=file_schema,
        schema=schema,
        int96_leaves=tuple(int96),
        int96_paths=tuple(paths[i] for i in int96),
        int96_columns=tuple(f.name for f in file_schema if is_int96(f.type)),
        leaf_paths=tuple(paths),
    )


def is_int96(t: pa.DataType) -> bool:
    """Whether Paimon writes a value of this Arrow type as INT96: TIMESTAMP(_LTZ)(p > 6)."""
    return pa.types.is_timestamp(t) and t.unit == "ns"


def physical_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type lakecore hands pyarrow's writer for a column of Arrow type ``t``."""
    if is_int96(t):
        return pa.binary(INT96_BYTES)
    if pa.types.is_time64(t):
        return pa.time32("ms")
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        inner = pa.field(item.name, physical_type(item.type), item.nullable, item.metadata)
        return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(pa.field(key.name, physical_type(key.type), key.nullable, key.metadata),
                       pa.field(item.name, physical_type(item.type), item.nullable,
                                item.metadata),
                       t.keys_sorted)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, physical_type(f.type), f.nullable, f.metadata)
                          for f in t])
    return t


def _leaves(path: str, t: pa.DataType, paths: list[str], int96: list[int]) -> None:
    """The Parquet leaf paths under a field of type ``t`` (pyarrow's compliant nested names:
    ``list.element``, ``key_value.key`` / ``key_value.value``), noting the INT96 ones."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        _leaves(f"{path}.list.element", t.value_type, paths, int96)
    elif pa.types.is_map(t):
        _leaves(f"{path}.key_value.key", t.key_type, paths, int96)
        _leaves(f"{path}.key_value.value", t.item_type, paths, int96)
    elif pa.types.is_struct(t):
        for f in t:
            _leaves(f"{path}.{f.name}", f.type, paths, int96)
    else:
        if is_int96(t):
            int96.append(len(paths))
        paths.append(path)


def _convert(a: pa.Array, want: pa.DataType) -> pa.Array:
    t = a.type
    if t == want:
        return a
    if is_int96(t):
        return int96_values(a)
    if pa.types.is_time64(t):
        return a.cast(want, safe=False)  # Paimon's TIME is a millisecond of the day
    if pa.types.is_fixed_size_binary(t):
        return a.cast(want)
    mask = a.is_null() if a.null_count else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        make: Callable[..., pa.Array] = (pa.ListArray.from_arrays if pa.types.is_list(t)
                                         else pa.LargeListArray.from_arrays)
        offsets, start, end = _offsets(a)
        return make(offsets, _convert(a.values.slice(start, end - start), want.value_type),
                    type=want, mask=mask)
    if pa.types.is_map(t):
        offsets, start, end = _offsets(a)
        return pa.MapArray.from_arrays(
            offsets, _convert(a.keys.slice(start, end - start), want.key_type),
            _convert(a.items.slice(start, end - start), want.item_type), type=want, mask=mask)
    if pa.types.is_struct(t):
        children = [_convert(a.field(i), want.field(i).type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(want), mask=mask)
    raise TypeError(f"no Parquet conversion from {t} to {want}")


def _offsets(a: pa.Array) -> tuple[pa.Array, int, int]:
    """A list or map array's offsets from 0 (Arrow builds no list from sliced offsets and a
    validity mask), and the range of its child values they span."""
    offsets = a.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if a.offset or start:
        offsets = pc.subtract(offsets, pa.scalar(start, offsets.type))
    return offsets, start, end


def int96_values(a: pa.Array) -> pa.Array:
    """Timestamps (nanoseconds since the epoch, any time zone) as the 12 bytes Paimon's
    ``ParquetRowDataWriter.timestampToInt96`` writes: the epoch millisecond split into a
    Julian day and a millisecond of the day by Java's truncating division (a time before 1970
    that is not on a day boundary gets a negative nanosecond of day; every reader adds the two
    up), the nanosecond of the day little-endian in bytes 0-7, the day in bytes 8-11."""
    nanos = np.asarray(pc.fill_null(a.cast(pa.int64()), 0).to_numpy(zero_copy_only=False),
                       dtype=np.int64)
    millis = nanos // NANOS_PER_MILLI  # Paimon's Timestamp: floored millisecond ...
    nano_of_milli = nanos - millis * NANOS_PER_MILLI  # ... and a nano-of-millisecond >= 0
    days = millis // MILLIS_PER_DAY
    rest = millis - days * MILLIS_PER_DAY
    behind = (rest != 0) & (millis < 0)  # Java's / and % round toward zero
    days = days + behind
    rest = rest - behind * MILLIS_PER_DAY
    out = np.empty(len(nanos), dtype=_INT96)
    out["nanos_of_day"] = rest * NANOS_PER_MILLI + nano_of_milli
    out["julian_day"] = days + JULIAN_EPOCH_OFFSET_DAYS
    validity = pc.is_valid(a).buffers()[1] if a.null_count else None
    return pa.Array.from_buffers(pa.binary(INT96_BYTES), len(a),
                                 [validity, pa.py_buffer(out)], a.null_count)
