"""Read builder, scan and read in pypaimon's shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from lakecore.errors import SchemaError
from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.read.scan import Plan, Split, TableScan
from lakecore.read.split_read import ROW_KIND_COLUMN, SplitRead
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore
from lakecore.utils.threads import map_buckets


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
    """Reads planned splits into Arrow, pandas or a batch reader."""

    def __init__(
        self, table: FileStore, projection: list[str] | None, predicate: Predicate | None
    ) -> None:
        self.table = table
        self._read = SplitRead(table, projection, predicate)
        rt = table.schema.row_type
        names = projection or rt.names
        self.schema = pa.schema(
            [pa.field(n, to_arrow(rt.field(n).type), rt.field(n).type.nullable) for n in names]
        )

    def _schema_for(self, splits: list[Split]) -> pa.Schema:
        if splits and splits[0].is_changelog:
            return self.schema.append(pa.field(ROW_KIND_COLUMN, pa.string(), False))
        return self.schema

    def _batches(self, splits: list[Split]) -> Iterator[pa.RecordBatch]:
        schema = self._schema_for(splits)
        for split in splits:
            for t in self._read.read_split(split):
                yield from _as(t, schema).to_batches()

    def to_arrow_batch_reader(self, splits: list[Split]) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self._schema_for(splits), self._batches(splits))

    def to_arrow(self, splits: list[Split]) -> pa.Table:
        """Every split read, side by side on the bucket threads (decoding, merging and
        filtering release the GIL), concatenated in split order."""
        schema = self._schema_for(splits)

        def read(split: Split) -> list[pa.Table]:
            return [_as(t, schema) for t in self._read.read_split(split)]

        tables = [t for part in map_buckets(read, splits) for t in part]
        if not tables:
            return schema.empty_table()
        return pa.concat_tables(tables)

    def to_pandas(self, splits: list[Split]) -> Any:
        return self.to_arrow(splits).to_pandas()


def _as(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` in the read's schema (its types already, as a rule: then as it is)."""
    return t if t.schema.equals(schema, check_metadata=True) else t.cast(schema)


__all__ = ["Plan", "ReadBuilder", "TableRead"]
