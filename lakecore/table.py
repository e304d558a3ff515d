"""``FileStoreTable``: one table's schema, options, paths and the builders users start from."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lakecore.fileio import FileIO
from lakecore.lock.base import CatalogLock
from lakecore.manifest_io import ManifestIO, PartitionCodec
from lakecore.options import CoreOptions
from lakecore.paths import PathFactory
from lakecore.schema import TableSchema
from lakecore.snapshot_manager import SnapshotManager

if TYPE_CHECKING:
    from lakecore.compact.job import CompactReport
    from lakecore.maintenance import (
        ExpireReport,
        MaintainReport,
        OrphanReport,
        PartitionExpireReport,
        RollbackReport,
        TagDeleteReport,
        TagInfo,
    )
    from lakecore.read.read_builder import ReadBuilder
    from lakecore.write.write_builder import BatchWriteBuilder, StreamWriteBuilder

T = TypeVar("T")


CatalogLockLike = CatalogLock  # the name this module used before lakecore.lock existed


class FileStoreTable:
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

    def run_with_lock(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the catalog lock; the commit path's publish step only."""
        if self.lock is None:
            return fn()
        return self.lock.run_with_lock(self.database, self.name, fn)

    def copy(self, options: dict[str, Any]) -> FileStoreTable:
        """The same table with dynamic options (e.g. ``scan.snapshot-id`` for time travel)."""
        dyn = {**self.dynamic_options, **{k: str(v) for k, v in options.items()}}
        return FileStoreTable(self.file_io, self.identifier, self.table_path, self.schema,
                              self.lock, dyn)

    # -- builders ------------------------------------------------------------------------
    def new_batch_write_builder(self) -> BatchWriteBuilder:
        from lakecore.write.write_builder import BatchWriteBuilder

        return BatchWriteBuilder(self)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        from lakecore.write.write_builder import StreamWriteBuilder

        return StreamWriteBuilder(self)

    def compact(
        self,
        partitions: list[dict[str, Any]] | None = None,
        full: bool = False,
        commit_user: str | None = None,
    ) -> CompactReport:
        """Dedicated compaction of every bucket that needs it; one COMPACT snapshot."""
        from lakecore.compact.job import compact

        return compact(self, partitions, full, commit_user)

    def expire_snapshots(self, *args: Any, **kwargs: Any) -> ExpireReport:
        """Expire snapshots by the table's retention (dry run unless ``dry_run=False``)."""
        from lakecore import maintenance

        return maintenance.expire_snapshots(self, *args, **kwargs)

    def expire_partitions(self, *args: Any, **kwargs: Any) -> PartitionExpireReport:
        """Expire partitions older than ``partition.expiration-time`` (an OVERWRITE commit)."""
        from lakecore import maintenance

        return maintenance.expire_partitions(self, *args, **kwargs)

    def remove_orphan_files(self, *args: Any, **kwargs: Any) -> OrphanReport:
        """Delete files no snapshot, tag or running commit references, older than ``older_than``."""
        from lakecore import maintenance

        return maintenance.remove_orphan_files(self, *args, **kwargs)

    def list_tags(self, *args: Any, **kwargs: Any) -> list[TagInfo]:
        """Tags, each pinning a snapshot."""
        from lakecore import maintenance

        return maintenance.list_tags(self, *args, **kwargs)

    def delete_tag(self, *args: Any, **kwargs: Any) -> TagDeleteReport:
        """Delete a tag (and files only it kept alive)."""
        from lakecore import maintenance

        return maintenance.delete_tag(self, *args, **kwargs)

    def rollback_to(self, *args: Any, **kwargs: Any) -> RollbackReport:
        """Roll back to ``snapshot_id=`` or ``tag=`` (later snapshots removed)."""
        from lakecore import maintenance

        return maintenance.rollback_to(self, *args, **kwargs)

    def maintain(self, *args: Any, **kwargs: Any) -> MaintainReport:
        """compact (optional) -> expire snapshots -> expire partitions -> orphans."""
        from lakecore import maintenance

        return maintenance.maintain(self, *args, **kwargs)

    def create_tag(self, name: str, snapshot_id: int | None = None, **kwargs: Any) -> TagInfo:
        """Pin ``snapshot_id`` (default: latest) under ``name``; expiry keeps what it needs."""
        from lakecore import maintenance

        return maintenance.create_tag(self, name, snapshot_id, **kwargs)

    def new_read_builder(self) -> ReadBuilder:
        from lakecore.read.read_builder import ReadBuilder

        return ReadBuilder(self)

    def __repr__(self) -> str:
        return f"FileStoreTable({self.identifier!r}, path={self.table_path!r})"
