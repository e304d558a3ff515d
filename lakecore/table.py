"""``FileStoreTable``: the user-facing table, with the builders and the maintenance methods.

It is a ``FileStore`` (the context every operation takes) plus the entry points users start
from. Only the layers above it (catalog, command line, Spark) import it, so it may import every
operation at module level without closing a cycle.
"""

from __future__ import annotations

from typing import Any, Self

from lakecore import maintenance
from lakecore.compact.job import CompactReport, compact
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
from lakecore.store.file_store import FileStore
from lakecore.store.time_travel import TIME_TRAVEL_KEYS, travel_schema_id
from lakecore.write.write_builder import BatchWriteBuilder, StreamWriteBuilder


class FileStoreTable(FileStore):
    """A lake table: write and read builders, compaction, expiry, tags and rollback."""

    def copy(self, options: dict[str, Any]) -> Self:
        """The same table with dynamic options (e.g. ``scan.snapshot-id`` for time travel).

        Time travel (``scan.snapshot-id``, ``scan.tag-name``, ``scan.timestamp-millis``) also
        switches to the schema the snapshot was committed with, as Paimon's ``copy`` does: a
        snapshot older than an added column reads without it."""
        table = super().copy(options)
        if TIME_TRAVEL_KEYS & set(options):
            schema_id = travel_schema_id(table)
            if schema_id is not None and schema_id != table.schema.id:
                table = table.with_schema(table.schema_of(schema_id))
        return table

    # -- builders ------------------------------------------------------------------------
    def new_batch_write_builder(self) -> BatchWriteBuilder:
        return BatchWriteBuilder(self, after_commit=maintenance.after_commit)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        return StreamWriteBuilder(self, after_commit=maintenance.after_commit)

    def new_read_builder(self) -> ReadBuilder:
        return ReadBuilder(self)

    # -- compaction and maintenance ------------------------------------------------------
    def compact(
        self,
        partitions: list[dict[str, Any]] | None = None,
        full: bool = False,
        commit_user: str | None = None,
    ) -> CompactReport:
        """Dedicated compaction of every bucket that needs it; one COMPACT snapshot."""
        return compact(self, partitions, full, commit_user)

    def expire_snapshots(self, *args: Any, **kwargs: Any) -> ExpireReport:
        """Expire snapshots by the table's retention (dry run unless ``dry_run=False``)."""
        return maintenance.expire_snapshots(self, *args, **kwargs)

    def expire_partitions(self, *args: Any, **kwargs: Any) -> PartitionExpireReport:
        """Expire partitions older than ``partition.expiration-time`` (an OVERWRITE commit)."""
        return maintenance.expire_partitions(self, *args, **kwargs)

    def remove_orphan_files(self, *args: Any, **kwargs: Any) -> OrphanReport:
        """Delete files no snapshot, tag or running commit references, older than ``older_than``."""
        return maintenance.remove_orphan_files(self, *args, **kwargs)

    def list_tags(self) -> list[TagInfo]:
        """Tags, each pinning a snapshot."""
        return maintenance.list_tags(self)

    def create_tag(self, name: str, snapshot_id: int | None = None, **kwargs: Any) -> TagInfo:
        """Pin ``snapshot_id`` (default: latest) under ``name``; expiry keeps what it needs."""
        return maintenance.create_tag(self, name, snapshot_id, **kwargs)

    def delete_tag(self, *args: Any, **kwargs: Any) -> TagDeleteReport:
        """Delete a tag (and files only it kept alive)."""
        return maintenance.delete_tag(self, *args, **kwargs)

    def rollback_to(self, *args: Any, **kwargs: Any) -> RollbackReport:
        """Roll back to ``snapshot_id=`` or ``tag=`` (later snapshots removed)."""
        return maintenance.rollback_to(self, *args, **kwargs)

    def maintain(self, *args: Any, **kwargs: Any) -> MaintainReport:
        """compact (optional) -> expire partitions -> expire snapshots -> orphans (one order)."""
        return maintenance.maintain(self, *args, **kwargs)
