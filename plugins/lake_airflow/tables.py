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
    from lake_airflow.offpeak import BucketState, Window
    from lakecore.catalog import FileSystemCatalog
    from lakecore.schema import Schema
    from lakecore.schema.diff import SchemaUpdatePlan
    from lakecore.table import FileStoreTable

log = logging.getLogger(__name__)


class TableMismatchError(ValueError):
    """The tables file declares a table that its current schema cannot become by an ALTER
    (a dropped or renamed column, a narrowed type, another key, another bucket count...):
    the message names the table and each column or option; nothing was changed."""


def open_catalog(cfg: LakeConfig, lock: LockTarget | None = None) -> FileSystemCatalog:
    from lakecore import CatalogFactory

    options = {**cfg.catalog_options, "warehouse": cfg.warehouse}
    if lock is not None and not cfg.conditional_put:
        options.update(lock.catalog_options())
    elif not cfg.conditional_put:
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


def plan_table_update(table: FileStoreTable, spec: TableSpec) -> SchemaUpdatePlan:
    """What ALTER brings ``table`` to its declaration (a value; ``lakecore.schema.diff``)."""
    from lakecore.schema.diff import plan_declared_update

    return plan_declared_update(table.schema, schema_for(spec), table=spec.name,
                                has_snapshots=table.snapshot_manager.latest_id() is not None)


def ensure_table(catalog: FileSystemCatalog, spec: TableSpec) -> str:
    """Make the table what the tables file declares: "created" if it was missing, "altered"
    if a compatible change of the declaration (new columns, widened types, comments, options)
    was applied with one ALTER, "exists" if it already matched. An incompatible change raises
    ``TableMismatchError`` naming the table and the columns/options, and changes nothing."""
    from lakecore.errors import IncompatibleSchemaError, TableNotExistError

    catalog.create_database(spec.database, ignore_if_exists=True)
    try:
        table = catalog.get_table(spec.name)
    except TableNotExistError:
        catalog.create_table(spec.name, schema_for(spec), ignore_if_exists=True)
        log.info("created table %s", spec.name)
        return "created"
    plan = plan_table_update(table, spec)
    try:
        plan.check()
    except IncompatibleSchemaError as e:
        raise TableMismatchError(f"{e} (the tables file declares it differently; "
                                 "fix the declaration or change the table with `lakecore alter`)"
                                 ) from None
    for name in plan.kept_options:
        log.info("%s: option %r is set on the table but not declared: left as it is",
                 spec.name, name)
    if not plan.changes:
        return "exists"
    catalog.alter_table(spec.name, plan.changes)
    log.info("altered table %s to its declaration: %s", spec.name, "; ".join(plan.describe()))
    return "altered"


def ensure_tables(catalog: FileSystemCatalog, specs: Sequence[TableSpec]) -> dict[str, str]:
    """``ensure_table`` for several tables, all checked first: one incompatible declaration
    (``TableMismatchError`` naming each) leaves every table as it was."""
    problems = []
    for spec in specs:
        table = get_table(catalog, spec.name)
        if table is None:
            continue
        plan = plan_table_update(table, spec)
        if not plan.compatible:
            problems.append(f"table {spec.name!r}: " + "; ".join(map(str, plan.refusals)))
    if problems:
        raise TableMismatchError(
            "the tables file declares a change that cannot be made by ALTER, nothing was "
            "changed: " + " | ".join(problems) + " (fix the declaration, or change the table "
            "with `lakecore alter` first)")
    return {spec.name: ensure_table(catalog, spec) for spec in specs}


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


def compaction_window(table: FileStoreTable) -> Window:
    """The table's off-peak window and sorted-run triggers (its Paimon options)."""
    from lake_airflow.offpeak import Window

    o = table.options
    return Window(o.compaction_offpeak_start_hour, o.compaction_offpeak_end_hour,
                  o.num_sorted_run_compaction_trigger, o.num_sorted_run_stop_trigger)


def bucket_states(table: FileStoreTable, partitions: Sequence[dict[str, str]] | None,
                  full: bool) -> tuple[int | None, list[BucketState]]:
    """(latest snapshot, each bucket's sorted runs, level-0 files and whether the compaction
    strategy picks it), optionally only in ``partitions``."""
    from lake_airflow.offpeak import BucketState
    from lakecore.compact.job import BucketTask, plan_compaction
    from lakecore.format.bucket import POSTPONE_BUCKET
    from lakecore.format.partition_string import partition_value_string
    from lakecore.maintenance.inspect import inspect_table

    plan = plan_compaction(table, list(partitions) if partitions else None, full)
    types = table.partition_codec.types

    def label(values: Sequence[Any]) -> str:
        return "/".join(f"{k}={partition_value_string(v, t)}"
                        for k, v, t in zip(table.partition_keys, values, types))

    picked = {(label(t.partition), t.bucket) for t in plan.tasks if isinstance(t, BucketTask)}
    postpone = any(not isinstance(t, BucketTask) for t in plan.tasks)  # pending postpone files
    wanted = ({"/".join(f"{k}={p[k]}" for k in table.partition_keys) for p in partitions}
              if partitions else None)
    report = inspect_table(table, max_snapshots=1)
    states = [BucketState(b["partition"], b["bucket"], b["sorted_runs"], b["level0_files"],
                          (b["partition"], b["bucket"]) in picked
                          or (postpone and b["bucket"] == POSTPONE_BUCKET))
              for b in report["buckets"] if wanted is None or b["partition"] in wanted]
    return plan.snapshot_id, states


def tag_latest(table: FileStoreTable, name: str) -> dict[str, Any] | None:
    """Tag the latest snapshot (idempotent for a retried task); None for an empty table."""
    from lakecore.maintenance import create_tag

    if table.snapshot_manager.latest_id() is None:
        return None
    return create_tag(table, name, ignore_if_exists=True).to_dict()
