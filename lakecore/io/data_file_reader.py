"""Reading one data file through FileIO: whole or in bounded chunks, with missing columns
filled the way Paimon readers do (``_KEY_*`` from the value columns, absent columns as null).
A file written under another schema version is read through ``schema_mapping`` (by field id).
``retraction_free``: whether a key-value file provably holds no -U/-D rows, from its Parquet
footer statistics (the ``_VALUE_KIND`` column itself only when they cannot tell)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecore.errors import CorruptFileError
from lakecore.format.kv import KEY_PREFIX, VALUE_KIND, RowKind
from lakecore.format.manifest import DataFileMeta
from lakecore.io.formats import PARQUET, conform_chunk, format_of, iter_foreign, read_schema
from lakecore.io.schema_mapping import file_table, mapping_for
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore
from lakecore.utils.threads import in_bucket_task, side_pool

CHUNK_ROWS = 256 * 1024
# A file read whole up to this size is fetched in one read and decoded from memory (a read of a
# few columns of a larger file fetches only theirs).
SMALL_FILE_BYTES = 1024 * 1024


def data_file_path(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta) -> str:
    return table.paths.data_file_path(partition, bucket, f.file_name, f.external_path)


def _fill_missing(table: FileStore, t: pa.Table, columns: Sequence[str]) -> pa.Table:
    have = t.column_names
    if have == list(columns):
        return t
    present = set(have)
    rt = table.schema.row_type
    for c in columns:
        if c in present:
            continue
        if c.startswith(KEY_PREFIX) and c[len(KEY_PREFIX):] in present:
            t = t.append_column(pa.field(c, t.schema.field(c[len(KEY_PREFIX):]).type, False),
                                t.column(c[len(KEY_PREFIX):]))  # key columns are NOT NULL
        elif c in rt.names:
            t = t.append_column(c, pa.nulls(t.num_rows, to_arrow(rt.field(c).type)))
    return t.select(list(columns))


def _physical_columns(columns: Sequence[str], have: set[str]) -> list[str]:
    """Columns to decode: a ``_KEY_k`` column equals column ``k``, so when both are wanted only
    ``k`` is read and the key is aliased to it (one column less to decode)."""
    wanted = set(columns)
    return [
        c for c in columns
        if c in have and not (c.startswith(KEY_PREFIX) and c[len(KEY_PREFIX):] in wanted
                              and c[len(KEY_PREFIX):] in have)
    ]


@dataclass(frozen=True)
class ReadColumns:
    """What a read asks of each data file, worked out once for all its files: the ``names``
    and the schema they are read as (``formats.read_schema``)."""

    names: tuple[str, ...]
    target: pa.Schema

    @classmethod
    def of(cls, table: FileStore, names: Sequence[str] | ReadColumns) -> ReadColumns:
        if isinstance(names, ReadColumns):
            return names
        return cls(tuple(names), read_schema(table.schema.row_type, names))


def _assemble(table: FileStore, t: pa.Table, columns: ReadColumns, path: str,
              kind: int | None = None) -> pa.Table:
    """``t`` (the columns decoded from a file) as the read's ``columns``: absent columns
    filled (``_fill_missing``: a ``_KEY_k`` column as column ``k``, others null), the footer's
    one row ``kind`` as ``_VALUE_KIND``, each column in the table's type and nullability
    (``conform_chunk``, which names a bad file)."""
    return conform_chunk(_fill_missing(table, _with_kind(t, kind), columns.names),
                         columns.target, path)


def read_data_file(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta, columns: Sequence[str] | ReadColumns) -> pa.Table:
    """The whole file (checked against the manifest's row count)."""
    chunks = list(iter_data_file(table, partition, bucket, f, columns, chunk_rows=None))
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_tables(chunks)


def iter_data_file(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta, columns: Sequence[str] | ReadColumns,
                   chunk_rows: int | None = CHUNK_ROWS) -> Iterator[pa.Table]:
    """The file as chunks of at most ``chunk_rows`` rows (None: one chunk)."""
    wanted = ReadColumns.of(table, columns)
    mapping = mapping_for(table, f, wanted.names)
    if mapping is not None:  # written under another schema version: map by field id
        for t in iter_data_file(file_table(table, f), partition, bucket, f,
                                mapping.file_columns, chunk_rows):
            yield mapping.apply(t)
        return
    path = data_file_path(table, partition, bucket, f)
    # every chunk gets the table's types and nullability, whatever the file declares
    columns, target = wanted.names, wanted.target
    if format_of(path) != PARQUET:  # ORC and Avro (formats.py)
        rows = 0
        for t in iter_foreign(table.file_io, path, columns, chunk_rows, target):
            rows += t.num_rows
            yield conform_chunk(_fill_missing(table, t, columns), target, path)
        if rows != f.row_count:
            raise CorruptFileError(path, f"has {rows} rows, manifest says {f.row_count}")
        return
    rows = 0
    try:
        with table.file_io.open_input_file(path) as src:
            pf = _parquet_file(src, f, whole=chunk_rows is None)
            cols = _physical_columns(columns, set(pf.schema_arrow.names))
            kind = _footer_kind(pf.metadata) if VALUE_KIND in cols and len(cols) > 1 else None
            if kind is not None:  # one row kind throughout, by the footer: not decoded
                cols.remove(VALUE_KIND)
            if chunk_rows is None:
                # a bucket task keeps its core busy: Arrow's own threads would only contend
                t = pf.read(columns=cols, use_threads=not in_bucket_task())
                rows = t.num_rows
                if rows != f.row_count:
                    raise CorruptFileError(path, f"has {rows} rows, manifest says {f.row_count}")
                yield _assemble(table, t, wanted, path, kind)
                return
            for t in _chunks(pf, cols, chunk_rows):
                rows += t.num_rows
                yield _assemble(table, t, wanted, path, kind)
    except CorruptFileError:
        raise
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(path, f"cannot read data file: {e}") from e
    if rows != f.row_count:
        raise CorruptFileError(path, f"has {rows} rows, manifest says {f.row_count}")


_KIND_FIELD = pa.field(VALUE_KIND, pa.int8(), False)
_ROW_KIND_VALUES = frozenset(k.value for k in RowKind)


def _footer_kind(md: pq.FileMetaData) -> int | None:
    """The one row kind of every row of a key-value file, when its footer statistics of
    ``_VALUE_KIND`` show it (min = max, the same in every row group, no null); else None. Such
    a column (every row +I, as a rule) needs no decoding: one page less per file, and on a
    virtual machine one zstd context less (~8 us each, from its CPUID probe)."""
    column = _leaf_index(md, VALUE_KIND)
    if column is None:
        return None
    kind = None
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        if rg.num_rows == 0:
            continue
        st = rg.column(column).statistics
        if (st is None or not st.has_min_max or st.min != st.max
                or not st.has_null_count or st.null_count):
            return None
        if kind is not None and st.min != kind:
            return None
        kind = st.min
    return kind if kind in _ROW_KIND_VALUES else None


def _leaf_index(md: pq.FileMetaData, name: str) -> int | None:
    """The Parquet leaf column of the top-level primitive column ``name``, if any."""
    schema = md.schema
    return next((i for i, n in enumerate(schema.names)
                 if n == name and schema.column(i).path == name), None)


def _with_kind(t: pa.Table, kind: int | None) -> pa.Table:
    """``t`` with its ``_VALUE_KIND`` column, ``kind`` in every row (None: ``t`` has it)."""
    if kind is None:
        return t
    return t.append_column(_KIND_FIELD, _kind_array(kind, t.num_rows))


def _kind_array(kind: int, n: int) -> pa.Array:
    """``kind`` in ``n`` rows: a slice of one shared array of that kind, not a new one per
    file."""
    held = _KINDS.get(kind)
    if held is None or len(held) < n:
        rows = max(n, _KINDS_ROWS, 0 if held is None else 2 * len(held))
        held = pa.array(np.full(rows, kind, dtype=np.int8))
        _KINDS[kind] = held  # a race only makes one more of them: any of them is right
    return held.slice(0, n)


_KINDS_ROWS = 64 * 1024
_KINDS: dict[int, pa.Array] = {}


def _parquet_file(src: pa.NativeFile, f: DataFileMeta, *, whole: bool) -> pq.ParquetFile:
    """The Parquet reader of an open data file. A small file read whole is fetched in one
    read (one request on an object store) and decoded from memory, without Arrow's
    pre-buffering (ranges fetched ahead on its I/O threads: ~0.1 ms per file, more than a
    6k-row file takes to decode a column); a larger one is read with Arrow's defaults."""
    if whole and 0 < f.file_size <= SMALL_FILE_BYTES:
        return pq.ParquetFile(pa.BufferReader(src.read_buffer()), pre_buffer=False)
    return pq.ParquetFile(src)


def map_row_groups(table: FileStore, partition: Sequence[Any], bucket: int, f: DataFileMeta,
                   columns: Sequence[str] | ReadColumns,
                   fn: Callable[[pa.Table, int], pa.Table]) -> list[pa.Table]:
    """``fn(rows, first_row)`` over the file's row groups, in order. A Parquet file of the
    table's schema has its row groups decoded (and ``fn`` applied) side by side on the side
    threads, each through a handle of its own, which keeps both cores busy where a whole-file
    read waits on its slowest column; other files are read chunk by chunk on this thread."""
    path = data_file_path(table, partition, bucket, f)
    wanted = ReadColumns.of(table, columns)
    if mapping_for(table, f, wanted.names) is not None or format_of(path) != PARQUET:
        return _map_chunks(table, partition, bucket, f, wanted, fn)
    try:
        with table.file_io.open_input_file(path) as src:
            pf = pq.ParquetFile(src)
            cols = _physical_columns(wanted.names, set(pf.schema_arrow.names))
            meta = pf.metadata  # parsed once: each row group's handle reuses it
            sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(path, f"cannot read data file: {e}") from e
    if sum(sizes) != f.row_count:
        raise CorruptFileError(path, f"has {sum(sizes)} rows, manifest says {f.row_count}")
    if len(sizes) < 2 or max(sizes) > 2 * CHUNK_ROWS:  # one group, or groups too big to hold
        return _map_chunks(table, partition, bucket, f, wanted, fn)
    firsts = [0, *itertools.accumulate(sizes)]

    def one(i: int) -> pa.Table:
        try:
            with table.file_io.open_input_file(path) as src:
                t = pq.ParquetFile(src, metadata=meta).read_row_group(i, columns=cols)
        except (OSError, pa.ArrowInvalid) as e:
            raise CorruptFileError(path, f"cannot read data file: {e}") from e
        return fn(_assemble(table, t, wanted, path), firsts[i])

    futures = [side_pool().submit(one, i) for i in range(len(sizes))]
    wait(futures)
    return [fut.result() for fut in futures]


def _map_chunks(table: FileStore, partition: Sequence[Any], bucket: int, f: DataFileMeta,
                columns: ReadColumns, fn: Callable[[pa.Table, int], pa.Table]
                ) -> list[pa.Table]:
    out, first = [], 0
    for t in iter_data_file(table, partition, bucket, f, columns):
        out.append(fn(t, first))
        first += t.num_rows
    return out


def _chunks(pf: pq.ParquetFile, columns: list[str], chunk_rows: int) -> Iterator[pa.Table]:
    """The file in chunks of about ``chunk_rows`` rows. Row groups up to twice that size are
    read whole (``read_row_group`` decodes columns on Arrow's threads, about twice as fast as
    ``iter_batches``); larger ones (Java Paimon writes 128 MB row groups) are streamed in
    batches, so memory stays bounded."""
    meta = pf.metadata
    if all(meta.row_group(i).num_rows <= 2 * chunk_rows for i in range(meta.num_row_groups)):
        for i in range(meta.num_row_groups):
            yield pf.read_row_group(i, columns=columns)
        return
    for batch in pf.iter_batches(batch_size=chunk_rows, columns=columns):
        yield pa.Table.from_batches([batch])


def iter_sorted_run(table: FileStore, partition: Sequence[Any], bucket: int,
                    files: Sequence[DataFileMeta], columns: Sequence[str],
                    chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """Chunks of a sorted run: its files are non-overlapping and in key order."""
    wanted = ReadColumns.of(table, columns)
    for f in files:
        yield from iter_data_file(table, partition, bucket, f, wanted, chunk_rows)


_INSERT, _UPDATE_AFTER = 0, 2  # RowKind +I, +U: the only kinds that are not retractions


def _kinds_from_footer(md: pq.FileMetaData, column: int) -> bool | None:
    """True: every row group's ``_VALUE_KIND`` statistics show +I only (max 0) or +U only (min
    = max = 2); False: some row group shows a retraction (a min or max of 1 or 3); None: the
    statistics cannot tell (missing, or +I and +U both present: 1 may lie between them)."""
    verdict: bool | None = True
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        if rg.num_rows == 0:
            continue
        st = rg.column(column).statistics
        if st is None or not st.has_min_max:
            return None
        lo, hi = st.min, st.max
        if lo in (1, 3) or hi in (1, 3):
            return False
        if not (hi == _INSERT or lo == hi == _UPDATE_AFTER):
            verdict = None
    return verdict


def retraction_free(table: FileStore, partition: Sequence[Any], bucket: int,
                    f: DataFileMeta) -> bool:
    """Whether the key-value file ``f`` provably holds only +I/+U rows. ``delete_row_count``
    alone is not trusted (pypaimon 2.1 records 0 for files holding -D rows): the Parquet footer
    statistics of ``_VALUE_KIND`` decide, and when they cannot (no statistics, or both +I and
    +U present) the column itself is read. Other formats: the column is read."""
    path = data_file_path(table, partition, bucket, f)
    if format_of(path) == PARQUET:
        try:
            with table.file_io.open_input_file(path) as src:
                md = pq.ParquetFile(src).metadata
        except (OSError, pa.ArrowInvalid) as e:
            raise CorruptFileError(path, f"cannot read data file footer: {e}") from e
        column = _leaf_index(md, VALUE_KIND)
        if column is not None:
            verdict = _kinds_from_footer(md, column)
            if verdict is not None:
                return verdict
    kinds = read_data_file(table, partition, bucket, f, [VALUE_KIND]).column(VALUE_KIND)
    live = pc.is_in(kinds, pa.array([_INSERT, _UPDATE_AFTER], kinds.type))
    return kinds.null_count == 0 and pc.sum(live).as_py() in (None, len(kinds))
