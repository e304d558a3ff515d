"""Between lakecore's Arrow types and Spark's: the DataFrame schema of a table, the exact Arrow
schema Spark expects back from ``mapInArrow``, and the driver-side check of a source."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from lakecore.errors import SchemaError
from lakecore.table import FileStoreTable
from lakecore.write.conform import conform

_SPARK_TIME_UNIT = "us"  # Spark keeps timestamps (and times) in microseconds


def _sparkable(t: pa.DataType) -> pa.DataType:
    """The nearest Arrow type Spark can hold (timestamps/times in microseconds)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp(_SPARK_TIME_UNIT, tz=t.tz)
    if pa.types.is_time(t):
        return pa.time64(_SPARK_TIME_UNIT)
    if pa.types.is_list(t):
        f = t.value_field
        return pa.list_(f.with_type(_sparkable(f.type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_sparkable(t.key_type)),
                       t.item_field.with_type(_sparkable(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_sparkable(f.type)) for f in t])
    return t


def spark_schema(arrow: pa.Schema) -> StructType:
    """A table's (projected) Arrow schema as a Spark schema; TIMESTAMP -> TIMESTAMP_NTZ,
    TIMESTAMP_LTZ -> TIMESTAMP, as Paimon's Spark connector maps them."""
    fields = [f.with_type(_sparkable(f.type)) for f in arrow]
    try:
        return from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=True)
    except Exception as e:  # pyspark raises its own error family for unsupported types
        raise SchemaError(f"a column type has no Spark equivalent: {e}") from e


def result_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark reads back from Python for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Cast a batch to ``target``; sub-microsecond time parts are truncated (Spark has none),
    every other cast must be lossless."""
    if batch.schema.equals(target, check_metadata=False):
        return batch
    cols = []
    for col, f in zip(batch.columns, target):
        if col.type == f.type:
            cols.append(col)
            continue
        lossy_unit = pa.types.is_timestamp(col.type) or pa.types.is_time(col.type)
        cols.append(col.cast(f.type, safe=not lossy_unit))
    return pa.RecordBatch.from_arrays(cols, schema=target)


def source_arrow_schema(source: StructType) -> pa.Schema:
    """The Arrow schema of a Spark source (``SchemaError`` for a type Arrow cannot carry)."""
    try:
        return to_arrow_schema(source, timezone="UTC")
    except Exception as e:
        raise SchemaError(f"source schema has a type Arrow cannot carry: {e}") from e


def validate_source(source: StructType, table: FileStoreTable) -> None:
    """Fail on the driver, before any file is written, when the source cannot fit the table:
    missing, extra or duplicate columns, or a type that cannot be cast (each named). Values are
    checked again on the executors (nulls in NOT NULL columns, unparsable strings)."""
    validate_arrow_source(source_arrow_schema(source), table)


def validate_arrow_source(arrow: pa.Schema, table: FileStoreTable) -> None:
    """``validate_source`` for a source whose Arrow schema is known (Parquet files)."""
    try:
        conform(arrow.empty_table(), table.schema.row_type, list(table.schema.primary_keys))
    except SchemaError as e:
        raise SchemaError(f"source does not fit table {table.identifier!r}: {e}") from None
