"""``FileStore``: one table's files, schema and options, the context every operation takes.

Reads, writes, commits, compaction and maintenance all take a ``FileStore``; none of them
imports ``lakecore.table``. ``FileStore`` (the user-facing facade with the builders and the
maintenance methods) extends it, so a table is passed wherever a store is expected.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Self, TypeVar

from lakecore.format.index_manifest import IndexManifestEntry
from lakecore.format.snapshot import Snapshot
from lakecore.lock.base import CatalogLock
from lakecore.options import CoreOptions
from lakecore.schema import TableSchema
from lakecore.store.file_io import FileIO
from lakecore.store.manifest_io import ManifestIO, PartitionCodec
from lakecore.store.paths import PathFactory
from lakecore.store.schema_manager import SchemaManager
from lakecore.store.snapshot_manager import SnapshotManager

T = TypeVar("T")


class FileStore:
    """A table's file I/O, paths, schema, typed options, snapshot manager and catalog lock."""

    def __init__(
        self,
        file_io: FileIO,
        identifier: str,
        table_path: str,
        schema: TableSchema,
        lock: CatalogLock | None = None,
        dynamic_options: dict[str, str] | None = None,
    ) -> None:
        self.file_io = file_io
        self.identifier = identifier
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.lock = lock
        self.dynamic_options = dict(dynamic_options or {})
        base = CoreOptions.from_map(
            schema.options,
            primary_keys=schema.primary_keys,
            column_names=[f.name for f in schema.fields],
            strict=False,  # a table another writer made may carry options we do not know
        )
        self.options: CoreOptions = (
            base.with_options(self.dynamic_options) if self.dynamic_options else base
        )
        part_types = [schema.row_type.field(k).type for k in schema.partition_keys]
        self.paths = PathFactory(
            self.table_path,
            schema.partition_keys,
            part_types,
            default_partition_name=self.options.partition_default_name,
            legacy_partition_name=self.options.partition_legacy_name,
        )
        self.partition_codec = PartitionCodec(part_types)
        self.snapshot_manager = SnapshotManager(file_io, self.paths)
        # schema versions by id, shared by the copies and views of this table
        self._schemas: dict[int, TableSchema] = {schema.id: schema}
        self._views: dict[int, Self] = {}  # this table as of other schema versions

    # -- facts ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.identifier.split(".", 1)[1]

    @property
    def database(self) -> str:
        return self.identifier.split(".", 1)[0]

    @property
    def primary_keys(self) -> list[str]:
        return list(self.schema.primary_keys)

    @property
    def partition_keys(self) -> list[str]:
        return list(self.schema.partition_keys)

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.schema.primary_keys)

    @property
    def bucket(self) -> int:
        return self.options.bucket

    @functools.cache  # noqa: B019 - one per table object, which is short-lived
    def manifest_io(self) -> ManifestIO:
        return ManifestIO(
            self.file_io,
            self.paths,
            self.partition_codec,
            self.schema.id,
            self.options.manifest_target_file_size,
            self.options.manifest_compression,
        )

    def index_entries(
        self, snapshot: Snapshot | None, index_type: str | None = None
    ) -> list[IndexManifestEntry]:
        """The live index files of ``snapshot`` (of ``index_type`` only, when given)."""
        if snapshot is None:
            return []
        entries = self.manifest_io().read_index_manifest(snapshot.index_manifest)
        if index_type is None:
            return entries
        return [e for e in entries if e.index_file.index_type == index_type]

    def run_with_lock(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the catalog lock; the commit path's publish step only."""
        if self.lock is None:
            return fn()
        return self.lock.run_with_lock(self.database, self.name, fn)

    def copy(self, options: dict[str, Any]) -> Self:
        """The same table with dynamic options added (the schema stays; ``FileStoreTable.copy``
        also switches to a time-travel snapshot's schema)."""
        dyn = {**self.dynamic_options, **{k: str(v) for k, v in options.items()}}
        table = type(self)(self.file_io, self.identifier, self.table_path, self.schema,
                           self.lock, dyn)
        table._schemas = self._schemas
        return table

    # -- schema versions -----------------------------------------------------------------
    @property
    def schema_manager(self) -> SchemaManager:
        return SchemaManager(self.file_io, self.table_path)

    def schema_of(self, schema_id: int) -> TableSchema:
        """Schema version ``schema_id`` of this table (data files name theirs); cached."""
        schema = self._schemas.get(schema_id)
        if schema is None:
            schema = self._schemas[schema_id] = self.schema_manager.schema(schema_id)
        return schema

    def with_schema(self, schema: TableSchema) -> Self:
        """The same table (and dynamic options) read or written as schema version ``schema``."""
        if schema.id == self.schema.id:
            return self
        table = self._views.get(schema.id)
        if table is None:
            table = type(self)(self.file_io, self.identifier, self.table_path, schema,
                               self.lock, self.dynamic_options)
            self._schemas.setdefault(schema.id, schema)
            table._schemas = self._schemas
            self._views[schema.id] = table
        return table

    def with_latest_schema(self) -> Self:
        """This table at its newest schema version (what writers and compaction write)."""
        latest = self.schema_manager.latest_id()
        if latest is None or latest == self.schema.id:
            return self
        return self.with_schema(self.schema_of(latest))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.identifier!r}, path={self.table_path!r})"
