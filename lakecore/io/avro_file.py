"""Reading Avro data files (Paimon's row format: Java and pypaimon write it for postpone
buckets and for tables with ``file.format = avro``) with fastavro, in bounded chunks.

fastavro decodes the records (its C extension; logical types become Python dates, times,
decimals and UTC datetimes); each chunk of records becomes an Arrow table in one
``Table.from_pylist`` call, with the Arrow type each Avro type naturally maps to. The caller
(``formats.conform_chunk``) then casts to the table's types and nullability, so an ``int``
holding a TINYINT, a ``timestamp-millis`` for a TIMESTAMP(3) or a nullable union for a NOT NULL
column reads like its Parquet counterpart.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import fastavro
import pyarrow as pa

from lakecore.errors import CorruptFileError
from lakecore.store.file_io import FileIO

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
    "null": pa.null(),
}
_LOGICAL = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    # Avro's timestamp-* are instants (fastavro gives UTC datetimes); local-timestamp-* are
    # wall-clock values. Paimon writes TIMESTAMP as the former, TIMESTAMP_LTZ as the latter;
    # the cast to the table's type keeps the stored number either way.
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
}


def _field(name: str, schema: Any) -> pa.Field:
    """The Arrow field of an Avro field schema (a ``["null", T]`` union is a nullable T)."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"field {name!r}: union {schema} is not a nullable type")
        return pa.field(name, arrow_type(branches[0]), "null" in schema)
    return pa.field(name, arrow_type(schema), False)


def arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type an Avro schema naturally maps to."""
    if isinstance(schema, str):
        if schema not in _PRIMITIVES:
            raise ValueError(f"Avro type {schema!r} is not supported")
        return _PRIMITIVES[schema]
    if isinstance(schema, list):
        return _field("union", schema).type
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "decimal":
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(
            precision, scale)
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind == "array":
        item = _field("element", schema["items"])
        return pa.list_(pa.field("item", item.type, item.nullable))
    if kind == "map":
        value = _field("value", schema["values"])
        return pa.map_(pa.field("key", pa.string(), False),
                       pa.field("value", value.type, value.nullable))
    if kind == "record":
        return pa.struct([_field(f["name"], f["type"]) for f in schema["fields"]])
    if kind == "fixed":
        return pa.binary(int(schema["size"]))
    if kind == "enum":
        return pa.string()
    return arrow_type(kind)


def _as_map(column: pa.Array, target: pa.DataType) -> pa.Array:
    """Paimon writes a MAP whose keys are not strings as an Avro array of {key, value}
    records; Arrow cannot cast that list to a map, so rebuild it from the same buffers."""
    entries = column.flatten()
    return pa.MapArray.from_arrays(column.offsets, entries.field("key"), entries.field("value"),
                                   type=target, mask=column.is_null())


def iter_avro_file(file_io: FileIO, path: str, columns: Sequence[str], chunk_rows: int | None,
                   targets: pa.Schema | None = None) -> Iterator[pa.Table]:
    """Chunks of at most ``chunk_rows`` records (None: one chunk) holding ``columns`` that are
    in the file (absent ones are left for the caller to fill). ``targets`` (the table's types
    by column name, optional) only steers the one decoding Arrow cannot cast afterwards: a map
    stored as an array of key/value records."""
    try:
        with file_io.open_input_file(path) as src:
            reader = fastavro.reader(src)
            writer_schema: Any = reader.writer_schema
            fields = {f["name"]: f["type"] for f in writer_schema["fields"]}
            wanted = [c for c in columns if c in fields]
            schema = pa.schema([_field(c, fields[c]) for c in wanted])
            step = chunk_rows or (1 << 62)
            produced = False
            while True:
                records = list(islice(reader, step))
                if not records and produced:
                    return
                produced = True
                t = pa.Table.from_pylist(records, schema=schema)
                yield _maps(t, targets)
                if len(records) < step:
                    return
    except CorruptFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError, pa.ArrowException) as e:
        raise CorruptFileError(path, f"cannot read Avro data file: {e}") from e


def _maps(t: pa.Table, targets: pa.Schema | None) -> pa.Table:
    if targets is None:
        return t
    for i, name in enumerate(t.column_names):
        want = targets.field(name).type if name in targets.names else None
        have = t.schema.field(i).type
        if want is not None and pa.types.is_map(want) and pa.types.is_list(have):
            col = pa.chunked_array([_as_map(c, want) for c in t.column(i).chunks], want)
            t = t.set_column(i, pa.field(name, want, t.schema.field(i).nullable), col)
    return t
