"""Reading a data file written under an older (or newer) schema version as the read schema.

Every data file records the schema id it was written with (``DataFileMeta.schema_id``).
Columns are matched by **field id**, never by name, as Paimon's ``SchemaEvolutionUtil`` does:

* a renamed column reads its old name from the file;
* a column added after the file was written reads as null;
* a dropped column is not read (and a column dropped and re-added under the same name has a new
  id, so the old values never come back);
* a column whose type changed is cast to the read type (pyarrow's cast, ``safe=False``, as
  pypaimon reads it); nested ROW fields are matched by id the same way, through ARRAY elements
  and MAP values.

Statistics follow the same mapping (``file_stats``), except that the min/max of a column whose
type changed since the file was written are not used: values of the old type do not order like
values of the new one (``"10" < "9"`` as strings), so pruning with them could drop rows.

A table object keeps the schema it was opened with. A file written under a *newer* schema is
read through the same mapping, but a column whose type changed since is an error (narrowing it
back could corrupt values a compaction would then write): reopen the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import SchemaError
from lakecore.format.binary_row import decode_row
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.format.manifest import DataFileMeta
from lakecore.schema import TableSchema
from lakecore.schema.casts import is_implicit, same_type_ignoring_nullability
from lakecore.schema.types import DataField, DataType, TypeRoot, to_arrow
from lakecore.store.file_store import FileStore

ArrowArray: TypeAlias = "pa.Array | pa.ChunkedArray"


@dataclass(frozen=True)
class _Source:
    """Where one read column comes from: a file column (converted from ``file_type`` to
    ``read_type``) or nothing (nulls)."""

    file_name: str | None
    file_type: DataType | None
    read_type: DataType | None  # None: a system column, taken as it is
    field: pa.Field  # the output column


@dataclass(frozen=True)
class FileMapping:
    """How to read files of one schema version as another, for one list of columns."""

    file_columns: tuple[str, ...]  # what to read from the file (file-schema names)
    sources: tuple[_Source, ...]  # one per requested column, in order

    def apply(self, t: pa.Table) -> pa.Table:
        """A chunk read with ``file_columns`` -> the requested columns in the read schema."""
        arrays = []
        for s in self.sources:
            if s.file_name is None:
                arrays.append(pa.nulls(t.num_rows, s.field.type))
                continue
            column = t.column(s.file_name)
            if s.read_type is not None and s.file_type is not None:
                column = _convert(column, s.file_type, s.read_type)
            if column.type != s.field.type:  # e.g. a nested field's nullability changed
                column = column.cast(s.field.type, safe=False)
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=pa.schema([s.field for s in self.sources]))


def file_table(table: FileStore, f: DataFileMeta) -> FileStore:
    """``table`` as of the schema ``f`` was written with (itself when they are the same)."""
    if f.schema_id == table.schema.id:
        return table
    return table.with_schema(table.schema_of(f.schema_id))


def mapping_for(table: FileStore, f: DataFileMeta, columns: Sequence[str]) -> FileMapping | None:
    """The mapping from ``f``'s schema to the table's for ``columns``; None when the file can
    be read as it is (same schema, or nothing the columns touch changed)."""
    if f.schema_id == table.schema.id:
        return None
    return _mapping(table.schema_of(f.schema_id), table.schema, tuple(columns))


@lru_cache(maxsize=512)
def _mapping(file_schema: TableSchema, read_schema: TableSchema, columns: tuple[str, ...]
             ) -> FileMapping | None:
    by_name = {f.name: f for f in read_schema.fields}
    file_by_id = {f.id: f for f in file_schema.fields}
    newer = file_schema.id > read_schema.id
    sources: list[_Source] = []
    identity = True
    for c in columns:
        key = c.startswith(KEY_PREFIX) and c[len(KEY_PREFIX):] in by_name
        read_field = by_name.get(c[len(KEY_PREFIX):] if key else c)
        if read_field is None:  # a system column: the same in every version
            sources.append(_Source(c, None, None, _system_field(c)))
            continue
        output = pa.field(c, to_arrow(read_field.type), read_field.type.nullable and not key)
        file_field = file_by_id.get(read_field.id)
        if file_field is None:
            identity = False
            sources.append(_Source(None, None, read_field.type, output))
            continue
        name = KEY_PREFIX + file_field.name if key else file_field.name
        if not _same(file_field.type, read_field.type):
            if newer and not is_implicit(file_field.type, read_field.type):
                raise SchemaError(
                    f"column {read_field.name!r} is {read_field.type} in schema "
                    f"{read_schema.id} but {file_field.type} in the newer schema "
                    f"{file_schema.id} a data file was written with: the table changed since "
                    f"it was opened; open it again")
            identity = False
        elif name != c:
            identity = False
        sources.append(_Source(name, file_field.type, read_field.type, output))
    if identity:
        return None
    file_columns = tuple(dict.fromkeys(s.file_name for s in sources if s.file_name is not None))
    return FileMapping(file_columns, tuple(sources))


def _system_field(name: str) -> pa.Field:
    if name == SEQUENCE_NUMBER:
        return pa.field(name, pa.int64(), False)
    if name == VALUE_KIND:
        return pa.field(name, pa.int8(), False)
    raise SchemaError(f"column {name!r} is not in the table")


def _same(a: DataType, b: DataType) -> bool:
    """The same type, nested field names and ids included (nullability aside)."""
    return same_type_ignoring_nullability(a, b)


# --- converting values ------------------------------------------------------------------------


def _convert(column: ArrowArray, file_type: DataType, read_type: DataType) -> ArrowArray:
    if _same(file_type, read_type):
        return column
    if isinstance(column, pa.ChunkedArray):
        target = to_arrow(read_type)
        return pa.chunked_array([_convert_array(c, file_type, read_type)
                                 for c in column.chunks], type=target)
    return _convert_array(column, file_type, read_type)


def _convert_array(arr: pa.Array, file_type: DataType, read_type: DataType) -> pa.Array:
    if _same(file_type, read_type):
        return arr
    root = read_type.root
    if root is TypeRoot.ROW and file_type.root is TypeRoot.ROW:
        return _convert_struct(arr, file_type, read_type)
    if root is TypeRoot.ARRAY and file_type.root is TypeRoot.ARRAY:
        assert file_type.element is not None and read_type.element is not None
        values = _convert_array(arr.values, file_type.element, read_type.element)
        return pa.ListArray.from_arrays(arr.offsets, values, type=to_arrow(read_type),
                                        mask=arr.is_null() if arr.null_count else None)
    if root is TypeRoot.MAP and file_type.root is TypeRoot.MAP:
        assert file_type.value is not None and read_type.value is not None
        assert file_type.key is not None and read_type.key is not None
        keys = _convert_array(arr.keys, file_type.key, read_type.key)
        items = _convert_array(arr.items, file_type.value, read_type.value)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=to_arrow(read_type),
                                       mask=arr.is_null() if arr.null_count else None)
    return pc.cast(arr, to_arrow(read_type), safe=False)


def _convert_struct(arr: pa.StructArray, file_type: DataType, read_type: DataType) -> pa.Array:
    """Nested fields by id: renamed ones from their old name, added ones null, dropped ones
    gone, retyped ones cast."""
    file_by_id = {f.id: f for f in file_type.fields}
    target = to_arrow(read_type)
    children = []
    for i, read_field in enumerate(read_type.fields):
        file_field = file_by_id.get(read_field.id)
        if file_field is None:
            children.append(pa.nulls(len(arr), target.field(i).type))
        else:
            child = arr.field(file_field.name)
            children.append(_convert_array(child, file_field.type, read_field.type))
    return pa.StructArray.from_arrays(children, fields=list(target),
                                      mask=arr.is_null() if arr.null_count else None)


# --- statistics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStats:
    """A file's min / max / null counts keyed by read-schema column names, only for columns
    whose statistics mean the same under the read schema."""

    mins: dict[str, Any]
    maxs: dict[str, Any]
    nulls: dict[str, int | None]

    @property
    def names(self) -> set[str]:
        return set(self.mins)


def file_stats(table: FileStore, f: DataFileMeta) -> FileStats | None:
    """The statistics the scan may prune ``f`` with: key statistics for primary-key tables
    (value statistics could resurrect shadowed rows), value statistics otherwise. Decoded with
    the file's own schema, renamed to the read schema by field id; columns dropped since, or
    whose type changed since, are left out. None when there is nothing usable."""
    fs = table.schema_of(f.schema_id)
    if fs.primary_keys:
        fields: list[DataField] = [fs.row_type.field(k) for k in fs.trimmed_primary_keys]
        stats = f.key_stats
    else:
        try:
            fields = ([fs.row_type.field(n) for n in f.value_stats_cols]
                      if f.value_stats_cols is not None else list(fs.row_type.fields))
        except SchemaError:  # stats of columns the file's schema does not name
            return None
        stats = f.value_stats
    if not stats.min_values or not fields:
        return None
    types = [x.type for x in fields]
    try:
        mins = decode_row(stats.min_values, types)
        maxs = decode_row(stats.max_values, types)
    except Exception:  # stats written for other columns (e.g. another stats mode)
        return None
    counts = list(stats.null_counts or ())
    read_by_id = {x.id: x for x in table.schema.fields}
    out = FileStats({}, {}, {})
    for i, file_field in enumerate(fields):
        read_field = read_by_id.get(file_field.id)
        if read_field is None or not _same(file_field.type, read_field.type):
            continue  # dropped, or min/max of another type: not comparable
        out.mins[read_field.name] = mins[i]
        out.maxs[read_field.name] = maxs[i]
        out.nulls[read_field.name] = counts[i] if i < len(counts) else None
    return out if out.mins else None


# --- rewriting --------------------------------------------------------------------------------


def newer_files(table: FileStore, files: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """Files written under a newer schema than the table object's (it was opened before an
    ALTER)."""
    return [f for f in files if f.schema_id > table.schema.id]


def check_rewritable(table: FileStore, files: Sequence[DataFileMeta]) -> None:
    """A rewrite (compaction) writes its output in the table's schema; rewriting a file of a
    newer schema into an older one would drop the columns added since. Refuse it."""
    newer = newer_files(table, files)
    if newer:
        raise SchemaError(
            f"data file {newer[0].file_name} was written with schema {newer[0].schema_id}, "
            f"newer than schema {table.schema.id} this compaction would write: the table "
            "changed since it was opened; open it again")
