"""lakecore at task run time: open the catalog, create declared tables, plan, tag.

Every lakecore import is inside a function, so that DAG files (which import this package's
task callables) never load lakecore or pyarrow while they are parsed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lake_airflow.config import LakeConfig, TableSpec
from lake_airflow.lock import LockTarget

if TYPE_CHECKING:
    from lakecore.catalog import FileSystemCatalog
    from lakecore.schema import Schema
    from lakecore.table import FileStoreTable

log = logging.getLogger(__name__)


class TableMismatchError(ValueError):
    """The table on disk does not have the columns the config declares."""


def open_catalog(cfg: LakeConfig, lock: LockTarget | None = None) -> FileSystemCatalog:
    from lakecore import CatalogFactory

    options = {"warehouse": cfg.warehouse}
    if lock is not None:
        options.update(lock.catalog_options())
    else:
        options["lock.enabled"] = "false"  # read-only use: no commit, no lock
    return CatalogFactory.create(options)


def schema_for(spec: TableSpec) -> Schema:
    """The lakecore schema of a declared table (Paimon type names, Paimon option keys)."""
    import pyarrow as pa

    from lakecore import Schema
    from lakecore.schema.types import parse_type, to_arrow

    fields = []
    for c in spec.columns:
        t = parse_type(c.type)
        meta = {"description": c.description} if c.description else None
        fields.append(pa.field(c.name, to_arrow(t), nullable=t.nullable, metadata=meta))
    return Schema.from_pyarrow_schema(pa.schema(fields), partition_keys=list(spec.partition_keys),
                                      primary_keys=list(spec.primary_key),
                                      options=dict(spec.options),
                                      comment=spec.description or None)


def _columns(fields: Sequence[Any]) -> list[tuple[str, str]]:
    return [(f.name, str(f.type.copy(nullable=True))) for f in fields]


def ensure_table(catalog: FileSystemCatalog, spec: TableSpec) -> str:
    """Create the table if it is missing; "created" or "exists". A table whose columns
    differ from the declaration is an error (lakecore has no schema evolution here)."""
    from lakecore.errors import TableNotExistError

    catalog.create_database(spec.database, ignore_if_exists=True)
    try:
        table = catalog.get_table(spec.name)
    except TableNotExistError:
        catalog.create_table(spec.name, schema_for(spec), ignore_if_exists=True)
        log.info("created table %s", spec.name)
        return "created"
    want = _columns(schema_for(spec).fields)
    have = _columns(table.schema.fields)
    if want != have:
        raise TableMismatchError(f"{spec.name}: the table has columns {have} but the tables "
                                 f"file declares {want}")
    return "exists"


def get_table(catalog: FileSystemCatalog, name: str) -> FileStoreTable | None:
    from lakecore.errors import DatabaseNotExistError, TableNotExistError

    try:
        return catalog.get_table(name)
    except (TableNotExistError, DatabaseNotExistError):
        return None


def compaction_preview(table: FileStoreTable, partitions: Sequence[dict[str, str]] | None,
                       full: bool) -> dict[str, Any]:
    """What the compaction job would do now: buckets to rewrite, or why none."""
    from lakecore.compact.job import plan_compaction

    plan = plan_compaction(table, list(partitions) if partitions else None, full)
    return {
        "snapshot_id": plan.snapshot_id,
        "buckets_considered": plan.buckets_considered,
        "buckets": len(plan.tasks),
        "files": sum(len(t.files) for t in plan.tasks),
        "bytes": sum(t.bytes for t in plan.tasks),
        "skipped_reason": plan.skipped_reason,
    }


def tag_latest(table: FileStoreTable, name: str) -> dict[str, Any] | None:
    """Tag the latest snapshot (idempotent for a retried task); None for an empty table."""
    from lakecore.maintenance import create_tag

    if table.snapshot_manager.latest_id() is None:
        return None
    return create_tag(table, name, ignore_if_exists=True).to_dict()
