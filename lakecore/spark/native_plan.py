"""The plan of a Spark read (a value; ``native_read`` executes it): which files Spark's own
Parquet reader reads, how each schema version's columns map to the read's, and which splits
still go through lakecore's Python read.

The driver plans the snapshot's splits as usual, then divides each one
(``lakecore.read.raw_convertible``) into raw files and a part to merge. A raw file is read
natively when Spark can read it exactly as lakecore would:

* Parquet; ORC without a deletion vector (Spark's ORC reader gives a row no
  ``_metadata.row_index`` to apply one by) and without timestamp columns among those read
  (Spark reads a Paimon ORC timestamp into ``TIMESTAMP_NTZ`` a million times too small);
  Avro files go the Python way;
* every read column maps from the file's schema version by field id (``FileColumn``): the
  same type, a renamed column (read by its name at write time), a column added since (a null
  literal), or a widening Spark casts exactly as lakecore does (integers, FLOAT -> DOUBLE,
  DECIMAL without loss, CHAR / VARCHAR lengths); any other change goes the Python way;
* types Spark's reader holds as they are: no TIME, no timestamp of precision > 6, nested types
  only unchanged and with nullable children (Spark makes a file's columns nullable);
* column names unique regardless of case (Spark resolves Parquet columns case-insensitively).

A row filter is applied natively only when every leaf translates to Spark with lakecore's own
semantics (``spark_filters.translatable``); otherwise the whole read goes the Python way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lakecore.format.deletion_vector import DeletionFile
from lakecore.format.manifest import DataFileMeta
from lakecore.io.formats import ORC, PARQUET
from lakecore.read.predicate import Predicate
from lakecore.read.raw_convertible import RawFile, divide_split
from lakecore.read.scan import Split
from lakecore.schema import TableSchema
from lakecore.schema.casts import same_type_ignoring_nullability
from lakecore.schema.types import DataType, TypeRoot
from lakecore.store.file_store import FileStore

_INTEGERS = (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT)
_FLAT = frozenset({
    TypeRoot.BOOLEAN, *_INTEGERS, TypeRoot.FLOAT, TypeRoot.DOUBLE, TypeRoot.DECIMAL,
    TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.DATE,
    TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ,
})


@dataclass(frozen=True)
class FileColumn:
    """One read column from a file of some schema version: its name in the file (None: added
    since, read as null) and whether Spark must cast it to the read type."""

    name: str  # the read column
    file_name: str | None
    cast: bool = False


@dataclass(frozen=True)
class NativeGroup:
    """Raw files of one schema version and format, read by one Spark scan."""

    schema_id: int
    format: str  # PARQUET or ORC
    file_columns: tuple[str, ...]  # what the scan reads, by the names in these files
    columns: tuple[FileColumn, ...]  # one per read column, in read order
    files: tuple[RawFile, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def deletion_files(self) -> dict[str, DeletionFile]:
        return {f.file_name: f.deletion_file for f in self.files if f.deletion_file is not None}


@dataclass(frozen=True)
class NativeReadPlan:
    """One read: native groups, the splits left to lakecore's Python read, and the columns
    the read returns (``read_columns`` adds the filter's columns; dropped after filtering)."""

    snapshot_id: int | None
    columns: tuple[str, ...]
    read_columns: tuple[str, ...]
    predicate: Predicate | None
    groups: tuple[NativeGroup, ...]
    merge_splits: tuple[Split, ...]

    @property
    def native_files(self) -> tuple[RawFile, ...]:
        return tuple(f for g in self.groups for f in g.files)

    @property
    def native_rows(self) -> int:
        """Rows in the native files before their deletion vectors."""
        return sum(f.row_count for f in self.native_files)


def plan_native_read(table: FileStore, splits: Sequence[Split], columns: Sequence[str],
                     predicate: Predicate | None, native: bool = True,
                     snapshot_id: int | None = None) -> NativeReadPlan:
    """Divide ``splits`` into native groups and splits to merge (module docstring).
    ``native=False``, or a filter Spark cannot apply with lakecore's semantics, sends every
    split the Python way."""
    from lakecore.spark.spark_filters import translatable

    read_columns = list(columns)
    for c in sorted(predicate.columns()) if predicate is not None else []:
        if c not in read_columns:
            read_columns.append(c)
    if not native or (predicate is not None and not translatable(predicate, table.schema)):
        return NativeReadPlan(snapshot_id, tuple(columns), tuple(read_columns), predicate, (),
                              tuple(splits))
    by_schema: dict[tuple[int, str], list[RawFile]] = defaultdict(list)
    fields = {f.name: f for f in table.schema.fields}
    orc_ok = not any(_mentions_timestamp(fields[c].type) for c in read_columns)
    merge: list[Split] = []
    mappings: dict[int, tuple[FileColumn, ...] | None] = {}
    for split in splits:
        division = divide_split(table, split)
        python: list[RawFile] = []
        for f in division.raw:
            if f.schema_id not in mappings:
                mappings[f.schema_id] = column_mapping(
                    table.schema_of(f.schema_id), table.schema, read_columns)
            if _natively_readable(f, orc_ok) and mappings[f.schema_id] is not None:
                by_schema[f.schema_id, f.format].append(f)
            else:
                python.append(f)
        if python:  # raw files Spark cannot read as lakecore does: read as they are, in Python
            names = {f.file_name for f in python}
            merge.append(_raw_split(split, [m for m in split.files if m.file_name in names]))
        if division.merge is not None:
            merge.append(division.merge)
    groups = []
    for sid, fmt in sorted(by_schema):
        cols = mappings[sid]
        assert cols is not None
        file_cols = tuple(dict.fromkeys(c.file_name for c in cols if c.file_name is not None))
        groups.append(NativeGroup(sid, fmt, file_cols, cols, tuple(by_schema[sid, fmt])))
    return NativeReadPlan(snapshot_id, tuple(columns), tuple(read_columns), predicate,
                          tuple(groups), tuple(merge))


def _natively_readable(f: RawFile, orc_ok: bool) -> bool:
    return f.format == PARQUET or (f.format == ORC and orc_ok and f.deletion_file is None)


def _mentions_timestamp(t: DataType) -> bool:
    if t.root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return True
    inner = [c for c in (t.element, t.key, t.value) if c is not None]
    return any(_mentions_timestamp(c) for c in [*inner, *(f.type for f in t.fields)])


def _raw_split(split: Split, files: list[DataFileMeta]) -> Split:
    return replace(split, files=tuple(files))


def column_mapping(file_schema: TableSchema, read_schema: TableSchema, columns: Sequence[str]
                   ) -> tuple[FileColumn, ...] | None:
    """How a file of ``file_schema`` yields ``columns`` of ``read_schema`` in Spark (by field
    id), or None when Spark cannot read it exactly as lakecore does."""
    names = [f.name.lower() for f in file_schema.fields]
    if len(set(names)) != len(names):
        return None  # Spark matches Parquet columns case-insensitively
    file_by_id = {f.id: f for f in file_schema.fields}
    out = []
    for name in columns:
        read_field = read_schema.row_type.field(name)
        if not spark_readable(read_field.type):
            return None
        file_field = file_by_id.get(read_field.id)
        if file_field is None:
            out.append(FileColumn(name, None))
            continue
        if same_type_ignoring_nullability(file_field.type, read_field.type):
            out.append(FileColumn(name, file_field.name))
            continue
        if not spark_readable(file_field.type) or not _widening(file_field.type, read_field.type):
            return None
        out.append(FileColumn(name, file_field.name, cast=True))
    return tuple(out)


def spark_readable(t: DataType) -> bool:
    """Whether Spark's Parquet reader yields exactly lakecore's values of ``t``, in the Spark
    type lakecore declares (module docstring)."""
    if t.root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return (t.precision if t.precision is not None else 6) <= 6
    if t.root in _FLAT:
        return True
    children: list[DataType]
    if t.root is TypeRoot.ARRAY:
        assert t.element is not None
        children = [t.element]
    elif t.root is TypeRoot.MAP:
        assert t.key is not None and t.value is not None
        if not spark_readable(t.key):
            return False
        children = [t.value]  # Spark's map keys are never null
    elif t.root is TypeRoot.ROW:
        children = [f.type for f in t.fields]
    else:
        return False
    return all(c.nullable and spark_readable(c) for c in children)


def _widening(source: DataType, target: DataType) -> bool:
    """A change Spark's cast performs exactly as lakecore's (pyarrow's) does."""
    s, t = source.root, target.root
    if s in _INTEGERS and t in _INTEGERS:
        return _INTEGERS.index(s) <= _INTEGERS.index(t)
    if s is TypeRoot.FLOAT and t is TypeRoot.DOUBLE:
        return True
    if s is TypeRoot.DECIMAL and t is TypeRoot.DECIMAL:
        sp, ss, tp, ts = source.precision, source.scale, target.precision, target.scale
        if None in (sp, ss, tp, ts):
            return False
        assert sp is not None and ss is not None and tp is not None and ts is not None
        return ts >= ss and tp - ts >= sp - ss
    string = (TypeRoot.CHAR, TypeRoot.VARCHAR)
    return s in string and t in string
