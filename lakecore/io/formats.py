"""Data file formats and the table's view of a file's columns.

Paimon picks a data file's reader by the file name's extension, not by the table's
``file.format`` (a table may hold Parquet, ORC and Avro files at once: pypaimon and Java write
Avro into postpone buckets, older tables are ORC). ``format_of`` does the same; ``iter_foreign``
reads the formats other than Parquet (``avro_file``, ``orc_file``).

Every chunk read from any data file then goes through ``conform_chunk``: each column gets the
Arrow type and nullability the table declares (``read_schema``), whatever the file recorded.
Writers differ here: pypaimon declares the value copy of a key column nullable, Java's Parquet
lists name their element ``element``, dictionary-encoded, large or view string columns come back
as such, Avro has no 8/16-bit integers, ORC timestamps are nanoseconds. None of that may break a
read, a merge or a compaction (whose Parquet writer requires the exact schema).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

import pyarrow as pa

from lakecore.errors import CorruptFileError, UnsupportedFeatureError
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.io.avro_file import iter_avro_file
from lakecore.io.orc_file import iter_orc_file
from lakecore.schema.types import RowType, to_arrow
from lakecore.store.file_io import FileIO

PARQUET, ORC, AVRO = "parquet", "orc", "avro"
FORMATS = (PARQUET, ORC, AVRO)


def format_of(path: str) -> str:
    """The format of a data file from its extension (Paimon's rule)."""
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext not in FORMATS:
        raise UnsupportedFeatureError(
            f"{path}: data file format {ext or '(no extension)'!r} is not supported "
            f"(lakecore reads {', '.join(FORMATS)})"
        )
    return ext


def iter_foreign(file_io: FileIO, path: str, columns: Sequence[str], chunk_rows: int | None,
                 targets: pa.Schema | None = None) -> Iterator[pa.Table]:
    """Chunks of an ORC or Avro data file with the ``columns`` it has (None: one chunk)."""
    fmt = format_of(path)
    if fmt == ORC:
        return iter_orc_file(file_io, path, columns, chunk_rows)
    if fmt == AVRO:
        return iter_avro_file(file_io, path, columns, chunk_rows, targets)
    raise ValueError(f"{path} is a Parquet file")  # the caller reads Parquet itself


def read_schema(row_type: RowType, columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema the table reads ``columns`` as: table columns in their declared types
    and nullability, ``_KEY_<k>`` as NOT NULL ``k``, the sequence number and row kind as
    Paimon defines them. A name that is none of these keeps whatever the file has. (Cached:
    every file of a read asks for the same one.)"""
    return _read_schema(row_type, tuple(columns))


@lru_cache(maxsize=256)
def _read_schema(row_type: RowType, columns: tuple[str, ...]) -> pa.Schema:
    by_name = {f.name: f for f in row_type.fields}
    fields = []
    for c in columns:
        if c == SEQUENCE_NUMBER:
            fields.append(pa.field(c, pa.int64(), False))
        elif c == VALUE_KIND:
            fields.append(pa.field(c, pa.int8(), False))
        elif c in by_name:
            t = by_name[c].type
            fields.append(pa.field(c, to_arrow(t), t.nullable))
        elif c.startswith(KEY_PREFIX) and c[len(KEY_PREFIX):] in by_name:
            fields.append(pa.field(c, to_arrow(by_name[c[len(KEY_PREFIX):]].type), False))
    return pa.schema(fields)


def conform_chunk(t: pa.Table, target: pa.Schema, path: str) -> pa.Table:
    """``t`` with every column of ``target`` in its type and nullability (columns ``target``
    does not name are kept as they are). A value the table's type cannot hold — a null in a
    NOT NULL column, a number out of range — is a ``CorruptFileError`` naming file and column."""
    if t.schema.equals(target, check_metadata=False):
        return t
    fields, cols = [], []
    for name, col in zip(t.column_names, t.columns):
        want = target.field(name) if name in target.names else None
        if want is None:
            fields.append(t.schema.field(name))
            cols.append(col)
            continue
        if col.type != want.type:
            try:
                col = col.cast(want.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise CorruptFileError(
                    path, f"column {name!r}: cannot read {col.type} as {want.type} ({e})"
                ) from e
        if not want.nullable and col.null_count:
            raise CorruptFileError(
                path, f"column {name!r} is NOT NULL in the table but the file holds "
                f"{col.null_count} null value(s)"
            )
        fields.append(want)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))
