"""Parquet sources read by the executors with pyarrow instead of Spark's reader.

Spark's reader hands Python rows re-encoded as Arrow by the JVM, which costs about as much as
Spark writing the data itself. For a plain Parquet path (no reader options), the driver only
lists the files and the executors read them (``FileSplitTask``: one Spark task per file, or per
run of row groups when there are few files), as Spark would: hidden files and directories
(``_*``, ``.*``) are skipped, and Hive-style directories (``dt=2026-11-01/``) become columns (as
text; lakecore casts them to the table's types). Each file is checked against the table on its
own. Anything else goes through Spark's reader (``sources.load_source``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.errors import SchemaError
from lakecore.spark.shuffle import bounded, split_batch_rows, split_rows
from lakecore.spark.table_ref import TableRef
from lakecore.store.file_io import FileIO

PATH_COLUMN = "path"
UNIT_DDL = "path string, first_row_group int, row_groups int"  # row_groups -1: the whole file
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class ParquetSource:
    """A Parquet source as the driver listed it: its files, their base and schema."""

    uri: str  # as given: a local path or a filesystem URI (s3://, gs://, hdfs://, file://)
    base: str  # the directory Hive-style partitions are relative to (filesystem path)
    files: tuple[str, ...]  # filesystem paths, sorted
    schema: pa.Schema  # the first file's columns plus its partition columns


def _hidden(rel: str) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.split("/"))


def hive_partitions(base: str, path: str) -> list[tuple[str, str | None]]:
    """``k=v`` directories between ``base`` and the file, decoded as Spark does."""
    rel = posixpath.relpath(posixpath.dirname(path), base)
    out: list[tuple[str, str | None]] = []
    for part in rel.split("/") if rel != "." else ():
        key, sep, value = part.partition("=")
        if sep and key:
            text = unquote(value)
            out.append((unquote(key), None if text == HIVE_DEFAULT_PARTITION else text))
    return out


def plan_parquet_source(uri: str) -> ParquetSource:
    """List the source's files on the driver (no data is read, only the first footer)."""
    fio, root = FileIO.for_uri(uri)
    if not fio.exists(root):
        raise SchemaError(f"source path {uri!r} does not exist")
    if fio.get_status(root).is_dir:
        base = root.rstrip("/")
        files = sorted(
            s.path for s in fio.list_status(base, recursive=True)
            if not s.is_dir and not _hidden(posixpath.relpath(s.path, base))
        )
    else:
        base, files = posixpath.dirname(root), [root]
    if not files:
        raise SchemaError(f"source path {uri!r} holds no data files")
    with fio.open_input_file(files[0]) as f:
        schema = pq.read_schema(f)
    for key, _ in hive_partitions(base, files[0]):
        if key not in schema.names:
            schema = schema.append(pa.field(key, pa.string()))
    return ParquetSource(uri, base, tuple(files), schema)


def read_units(source: ParquetSource, parallelism: int) -> list[tuple[str, int, int]]:
    """Read tasks: one per file, or, when there are fewer files than ``parallelism``, runs of
    row groups (their footers are read here) so that a single big file still spreads."""
    if len(source.files) >= parallelism:
        return [(f, 0, -1) for f in source.files]
    fio, _ = FileIO.for_uri(source.uri)
    groups: list[tuple[str, int, int]] = []  # (file, row group, rows)
    for f in source.files:
        with fio.open_input_file(f) as fh:
            meta = pq.ParquetFile(fh).metadata
        groups += [(f, i, meta.row_group(i).num_rows) for i in range(meta.num_row_groups)]
    per_unit = max(1, -(-sum(g[2] for g in groups) // parallelism))
    units: list[tuple[str, int, int]] = []
    rows = 0
    for f, i, n in groups:
        last = units[-1] if units else None
        if last is not None and last[0] == f and rows + n <= per_unit:
            units[-1] = (f, last[1], last[2] + 1)
            rows += n
        else:
            units.append((f, i, 1))
            rows = n
    return units


def with_partitions(data: pa.Table, base: str, path: str) -> pa.Table:
    for key, value in hive_partitions(base, path):
        if key not in data.column_names:
            data = data.append_column(key, pa.array([value] * data.num_rows, pa.string()))
    return data


@dataclass(frozen=True)
class FileSplitTask:
    """Stage 1 for a Parquet source: each input row names a file; read it with pyarrow and
    split it exactly as ``SplitTask`` splits a DataFrame's batches."""

    ref: TableRef
    static_partition: tuple[tuple[str, str], ...] | None
    uri: str
    base: str

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fio, _ = FileIO.for_uri(self.uri)
        table = self.ref.load()
        static = dict(self.static_partition) if self.static_partition else None
        for batch in batches:
            for path, first, count in zip(*(batch.column(i).to_pylist() for i in range(3))):
                with fio.open_input_file(path) as f:
                    reader = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
                    groups = None if count < 0 else list(range(first, first + count))
                    for b in reader.iter_batches(batch_size=split_batch_rows(table),
                                                 row_groups=groups):
                        data = with_partitions(pa.Table.from_batches([b]), self.base, path)
                        try:
                            for part in bounded(data):
                                yield split_rows(table, part, static)
                        except SchemaError as e:
                            raise SchemaError(f"{path}: {e}") from None

