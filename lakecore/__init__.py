"""lakecore: an LSM lake table library that writes Apache Paimon's on-disk format."""

from __future__ import annotations

from typing import Any

__all__ = ["CatalogFactory", "FileSystemCatalog", "Schema", "SchemaChange"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a leaf module (lakecore.schema.types, ...) stays cheap.
    if name in ("CatalogFactory", "FileSystemCatalog"):
        from lakecore import catalog

        return getattr(catalog, name)
    if name == "Schema":
        from lakecore.schema import Schema

        return Schema
    if name == "SchemaChange":
        from lakecore.schema.schema_change import SchemaChange

        return SchemaChange
    raise AttributeError(name)
