"""Tiny helpers for table-level tests: create, write+commit, read everything."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakecore import CatalogFactory, Schema
from lakecore.table import FileStoreTable


def make_table(
    warehouse: str,
    schema: pa.Schema,
    primary_keys: list[str] | None = None,
    partition_keys: list[str] | None = None,
    options: dict[str, str] | None = None,
    name: str = "db.t",
) -> FileStoreTable:
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(name.split(".")[0], ignore_if_exists=True)
    catalog.create_table(
        name,
        Schema.from_pyarrow_schema(schema, partition_keys=partition_keys,
                                   primary_keys=primary_keys, options=options),
    )
    return catalog.get_table(name)


def write(table: FileStoreTable, *batches: pa.Table | dict[str, list[Any]],
          overwrite: dict[str, Any] | None = None) -> tuple[int, ...]:
    """One batch commit of ``batches``; returns the snapshot ids it created."""
    wb = table.new_batch_write_builder()
    if overwrite is not None:
        wb.overwrite(overwrite)
    w = wb.new_write()
    try:
        for b in batches:
            w.write_arrow(pa.table(b) if isinstance(b, dict) else b)
        return wb.new_commit().commit(w.prepare_commit()).snapshot_ids
    finally:
        w.close()


def read(table: FileStoreTable, sort_by: str | list[str] | None = None, predicate=None,
         projection: list[str] | None = None) -> list[dict[str, Any]]:
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate(rb.new_predicate_builder()))
    if projection is not None:
        rb = rb.with_projection(projection)
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    rows = t.to_pylist()
    if sort_by:
        keys = [sort_by] if isinstance(sort_by, str) else sort_by
        rows.sort(key=lambda r: tuple(r[k] for k in keys))
    return rows


def table_files(table: FileStoreTable) -> list[str]:
    """Every file under the table directory (relative paths), for 'left unchanged' checks."""
    fio = table.file_io
    base = table.table_path
    return sorted(s.path[len(base) + 1:] for s in fio.list_status(base, recursive=True)
                  if not s.is_dir)
