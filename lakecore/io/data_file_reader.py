"""Reading one data file through FileIO: whole or in bounded chunks, with missing columns
filled the way Paimon readers do (``_KEY_*`` from the value columns, absent columns as null)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.errors import CorruptFileError, UnsupportedFeatureError
from lakecore.format.kv import KEY_PREFIX
from lakecore.format.manifest import DataFileMeta
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore

CHUNK_ROWS = 256 * 1024


def data_file_path(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta) -> str:
    return table.paths.data_file_path(partition, bucket, f.file_name, f.external_path)


def _fill_missing(table: FileStore, t: pa.Table, columns: Sequence[str]) -> pa.Table:
    rt = table.schema.row_type
    for c in columns:
        if c in t.column_names:
            continue
        if c.startswith(KEY_PREFIX) and c[len(KEY_PREFIX):] in t.column_names:
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


def read_data_file(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta, columns: Sequence[str]) -> pa.Table:
    """The whole file (checked against the manifest's row count)."""
    chunks = list(iter_data_file(table, partition, bucket, f, columns, chunk_rows=None))
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_tables(chunks)


def iter_data_file(table: FileStore, partition: Sequence[Any], bucket: int,
                   f: DataFileMeta, columns: Sequence[str],
                   chunk_rows: int | None = CHUNK_ROWS) -> Iterator[pa.Table]:
    """The file as chunks of at most ``chunk_rows`` rows (None: one chunk)."""
    path = data_file_path(table, partition, bucket, f)
    if path.endswith(".orc"):
        t = _read_orc(table, path, columns, f)
        step = chunk_rows or max(1, t.num_rows)
        for start in range(0, max(1, t.num_rows), step):
            yield t.slice(start, step)
        return
    if not path.endswith(".parquet"):
        raise UnsupportedFeatureError(
            f"{path}: data file format {path.rsplit('.', 1)[-1]!r} is not supported "
            "(lakecore reads parquet and orc)"
        )
    rows = 0
    try:
        with table.file_io.open_input_file(path) as src:
            pf = pq.ParquetFile(src)
            cols = _physical_columns(columns, set(pf.schema_arrow.names))
            if chunk_rows is None:
                t = pf.read(columns=cols)
                rows = t.num_rows
                if rows != f.row_count:
                    raise CorruptFileError(path, f"has {rows} rows, manifest says {f.row_count}")
                yield _fill_missing(table, t, columns)
                return
            for batch in pf.iter_batches(batch_size=chunk_rows, columns=cols):
                rows += batch.num_rows
                yield _fill_missing(table, pa.Table.from_batches([batch]), columns)
    except CorruptFileError:
        raise
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(path, f"cannot read data file: {e}") from e
    if rows != f.row_count:
        raise CorruptFileError(path, f"has {rows} rows, manifest says {f.row_count}")


def iter_sorted_run(table: FileStore, partition: Sequence[Any], bucket: int,
                    files: Sequence[DataFileMeta], columns: Sequence[str],
                    chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
    """Chunks of a sorted run: its files are non-overlapping and in key order."""
    for f in files:
        yield from iter_data_file(table, partition, bucket, f, columns, chunk_rows)


def _read_orc(table: FileStore, path: str, columns: Sequence[str],
              f: DataFileMeta) -> pa.Table:
    """ORC data files (Paimon's default format before 1.0), read whole."""
    import pyarrow.orc as orc

    try:
        with table.file_io.open_input_file(path) as src:
            of = orc.ORCFile(src)
            have = set(of.schema.names)
            t = of.read(columns=[c for c in columns if c in have])
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptFileError(path, f"cannot read data file: {e}") from e
    if t.num_rows != f.row_count:
        raise CorruptFileError(path, f"has {t.num_rows} rows, manifest says {f.row_count}")
    return _fill_missing(table, t, columns)
