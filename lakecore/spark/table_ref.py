"""A picklable handle to one table for the executors.

Executors never commit, so they never get the catalog lock: the lock's options (which may
carry a database URL) are stripped before anything is shipped. Executors rebuild the table
from the warehouse and check that its schema is the one the driver planned with.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from lakecore.catalog import CatalogFactory, FileSystemCatalog
from lakecore.errors import SchemaError
from lakecore.table import FileStoreTable

# Catalog option keys that belong to the lock (the driver's business only): lakecore.lock's
# ``lock.*`` / ``lock-*`` keys and ``catalog-key``.
LOCK_OPTION_PREFIXES = ("lock.", "lock-", "catalog-key")


def normalize_warehouse(warehouse: str) -> str:
    """An absolute location, so executors with another working directory find the same place."""
    return warehouse if "://" in warehouse else os.path.abspath(warehouse)


def executor_catalog_options(options: Mapping[str, str]) -> dict[str, str]:
    """Catalog options without the lock's, and the lock explicitly off (it defaults to on for
    object stores); filesystem credentials stay, executors need them."""
    out = {k: v for k, v in options.items() if not k.startswith(LOCK_OPTION_PREFIXES)}
    out["lock.enabled"] = "false"
    return out


def open_catalog(warehouse: str, catalog_options: Mapping[str, str] | None) -> FileSystemCatalog:
    return CatalogFactory.create(
        {**dict(catalog_options or {}), "warehouse": normalize_warehouse(warehouse)}
    )


@dataclass(frozen=True)
class TableRef:
    """Where the executors find the table, and the schema the driver planned with."""

    warehouse: str
    identifier: str
    schema_id: int
    catalog_options: tuple[tuple[str, str], ...] = ()
    dynamic_options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(
        table: FileStoreTable, warehouse: str, catalog_options: Mapping[str, str] | None
    ) -> TableRef:
        return TableRef(
            normalize_warehouse(warehouse),
            table.identifier,
            table.schema.id,
            tuple(sorted(executor_catalog_options(catalog_options or {}).items())),
            tuple(sorted(table.dynamic_options.items())),
        )

    def load(self) -> FileStoreTable:
        """The table, cached per Python worker (reused across tasks of one job)."""
        return _load(self)


@functools.lru_cache(maxsize=16)
def _load(ref: TableRef) -> FileStoreTable:
    catalog = open_catalog(ref.warehouse, dict(ref.catalog_options))
    table = catalog.get_table(ref.identifier)
    if ref.dynamic_options:  # time travel switches to the snapshot's schema, as on the driver
        table = table.copy(dict(ref.dynamic_options))
    if table.schema.id != ref.schema_id:
        raise SchemaError(
            f"table {ref.identifier!r} changed schema during the job "
            f"(driver planned with schema {ref.schema_id}, now {table.schema.id})"
        )
    return table
