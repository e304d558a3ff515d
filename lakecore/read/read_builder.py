"""Read builder, scan and read in pypaimon's shape."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from lakecore.errors import SchemaError
from lakecore.format.kv import RowKind
from lakecore.read.diff_read import DiffRead
from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.read.scan import Plan, Split, TableScan
from lakecore.read.split_read import ROW_KIND_COLUMN, SplitRead
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore
from lakecore.utils.threads import map_buckets

_INSERT = RowKind.INSERT.short_string


class ReadBuilder:
    """Starts a read: filter and projection, then a scan and a read (pypaimon's shape)."""

    def __init__(self, table: FileStore) -> None:
        self.table = table
        self.predicate: Predicate | None = None
        self.projection: list[str] | None = None

    def with_filter(self, predicate: Predicate | None) -> ReadBuilder:
        self.predicate = predicate
        return self

    def with_projection(self, names: list[str] | None) -> ReadBuilder:
        if names is not None:
            unknown = [n for n in names if n not in self.table.schema.row_type.names]
            if unknown:
                raise SchemaError(f"projection names unknown column(s) {unknown}")
        self.projection = list(names) if names is not None else None
        return self

    def new_predicate_builder(self) -> PredicateBuilder:
        return PredicateBuilder(self.table.schema.row_type)

    def new_scan(self) -> TableScan:
        return TableScan(self.table, self.predicate)

    def new_read(self) -> TableRead:
        return TableRead(self.table, self.projection, self.predicate)

    def read_type(self) -> pa.Schema:
        rt = self.table.schema.row_type
        names = self.projection or rt.names
        return pa.schema([pa.field(n, to_arrow(rt.field(n).type), rt.field(n).type.nullable)
                          for n in names])


class TableRead:
    """Reads planned splits into Arrow, pandas or a batch reader.

    An incremental read (``incremental-between``, or the raw / diff splits it plans) has one
    more column, ``_ROW_KIND`` (``+I``, ``-U``, ``+U``, ``-D``): each record's kind (delta and
    changelog reads; ``+I`` for an append table), or in a diff the kind of the record that won
    (``-D`` for a key gone, with ``force_keep_delete``)."""

    def __init__(
        self, table: FileStore, projection: list[str] | None, predicate: Predicate | None
    ) -> None:
        self.table = table
        self._projection = projection
        self._predicate = predicate
        self._read = SplitRead(table, projection, predicate)
        self._diff: DiffRead | None = None
        self._diff_lock = threading.Lock()
        self._keep_delete = False
        self._incremental = table.options.incremental_between is not None
        rt = table.schema.row_type
        names = projection or rt.names
        self.schema = pa.schema(
            [pa.field(n, to_arrow(rt.field(n).type), rt.field(n).type.nullable) for n in names]
        )

    def force_keep_delete(self) -> TableRead:
        """Keep deletions in diff reads (Paimon's ``forceKeepDelete``, what its ``audit_log``
        table reads with): each side is merged with its retractions kept, and a key the end
        snapshot no longer has comes as a ``-D`` row of its start value. Delta and changelog
        reads keep their ``-D`` records anyway. Reads of one snapshot are unaffected (unlike
        Paimon's, whose merge then also shows a key whose last record is a ``-D``)."""
        self._keep_delete = True
        if self._diff is not None:
            self._diff.keep_delete = True
        return self

    def _diff_read(self) -> DiffRead:
        with self._diff_lock:
            if self._diff is None:
                self._diff = DiffRead(self.table, self._projection, self._predicate,
                                      self._keep_delete)
            return self._diff

    def _read_split(self, split: Split) -> Iterator[pa.Table]:
        if split.is_diff:
            return self._diff_read().read_split(split)
        return self._read.read_split(split)

    def _schema_for(self, splits: list[Split]) -> pa.Schema:
        if self._incremental or (splits and (splits[0].is_changelog or splits[0].is_diff)):
            return self.schema.append(pa.field(ROW_KIND_COLUMN, pa.string(), False))
        return self.schema

    def _batches(self, splits: list[Split]) -> Iterator[pa.RecordBatch]:
        schema = self._schema_for(splits)
        for split in splits:
            for t in self._read_split(split):
                yield from _as(t, schema).to_batches()

    def to_arrow_batch_reader(self, splits: list[Split]) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self._schema_for(splits), self._batches(splits))

    def to_arrow(self, splits: list[Split]) -> pa.Table:
        """Every split read, side by side on the bucket threads (decoding, merging and
        filtering release the GIL), concatenated in split order."""
        schema = self._schema_for(splits)

        def read(split: Split) -> list[pa.Table]:
            return [_as(t, schema) for t in self._read_split(split)]

        tables = [t for part in map_buckets(read, splits) for t in part]
        if not tables:
            return schema.empty_table()
        return pa.concat_tables(tables)

    def to_pandas(self, splits: list[Split]) -> Any:
        return self.to_arrow(splits).to_pandas()


def _as(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` in the read's schema (its types already, as a rule: then as it is). Rows of an
    append table in an incremental read are inserts: ``+I``."""
    if t.schema.equals(schema, check_metadata=True):
        return t
    if ROW_KIND_COLUMN in schema.names and ROW_KIND_COLUMN not in t.column_names:
        t = t.append_column(ROW_KIND_COLUMN, pa.array([_INSERT] * t.num_rows, pa.string()))
    return t.cast(schema)


__all__ = ["Plan", "ReadBuilder", "TableRead"]
