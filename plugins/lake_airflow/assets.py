"""Every lake table is an Airflow asset: ``lakecore_asset("shop.orders")``.

The asset's name and URI are the table's location in Paimon's layout with a ``paimon+``
scheme, ``paimon+file:/data/warehouse/shop.db/orders`` (Airflow's normalized form) or
``paimon+s3://lake/warehouse/shop.db/orders``: they identify the warehouse and the table, and
never carry credentials (user info, query strings and fragments are dropped; S3 keys live in
the catalog options, never in the warehouse URI).

Committing tasks (ingest, compaction, maintenance, backfill) emit one asset event per commit
through an ``AssetAlias`` (``commit_alias``): a task that committed nothing (a retry that
finds its commit, a compaction or expiry with nothing to do, a dry run) emits no event. The
event's extra (``event_extra``) says what changed: snapshot ids, commit kinds, rows and
partitions. A downstream DAG schedules on ``lakecore_asset("shop.orders")`` and reads those
snapshots (``triggering_asset_events``).

Parse-time only: Airflow (imported where an Asset is built) and the tables file, no lakecore.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lake_airflow.config import LakeConfig, load_config

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

ASSET_GROUP = "lakecore"
SCHEME_PREFIX = "paimon+"
BACKFILL_ALIAS = "lakecore-backfill-commits"


def warehouse_location(warehouse: str) -> tuple[str, str, str]:
    """(scheme, host, path) of a warehouse path or URI, without user info or query."""
    parts = urllib.parse.urlsplit(warehouse)
    if not parts.scheme or len(parts.scheme) == 1:  # a path (or a Windows drive letter)
        return "file", "", warehouse.rstrip("/") or "/"
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return parts.scheme.lower(), host, parts.path.rstrip("/")


def table_uri(warehouse: str, table: str) -> str:
    """The asset URI of ``db.table`` in ``warehouse`` (Paimon's ``<db>.db/<table>`` layout)."""
    database, _, name = table.partition(".")
    scheme, host, path = warehouse_location(warehouse)
    # Airflow stores URIs normalized (urlunsplit): a local path has no "//" authority part
    return urllib.parse.urlunsplit((f"{SCHEME_PREFIX}{scheme}", host,
                                    f"{path}/{database}.db/{name}", "", ""))


def lakecore_asset(table: str, cfg: LakeConfig | None = None) -> Asset:
    """The Airflow asset of a declared lake table; schedule a DAG on it to run after each
    commit (``schedule=[lakecore_asset("shop.orders")]``)."""
    from airflow.sdk import Asset

    cfg = cfg or load_config()
    cfg.table(table)  # a typo fails at parse time, naming the declared tables
    uri = table_uri(cfg.warehouse, table)
    return Asset(name=uri, uri=uri, group=ASSET_GROUP)


def lakecore_assets(cfg: LakeConfig | None = None) -> list[Asset]:
    cfg = cfg or load_config()
    return [lakecore_asset(t.name, cfg) for t in cfg.tables]


def commit_alias(table: str | None) -> AssetAlias:
    """The outlet of a committing task: the alias its table's events are added through (a
    backfill, whose table is a Param, shares ``BACKFILL_ALIAS``)."""
    from airflow.sdk import AssetAlias

    return AssetAlias(name=f"lakecore-commits:{table}" if table else BACKFILL_ALIAS,
                      group=ASSET_GROUP)


def event_extra(*, table: str, job: str, snapshots: Sequence[Mapping[str, Any]],
                run: Mapping[str, Any], done: Sequence[str] = ()) -> dict[str, Any]:
    """The extra of one asset event: what the task's commits changed (JSON values only).

    ``snapshots``: per committed snapshot ``id``, ``kind``, ``rows`` (its delta record count)
    and ``partitions`` (labels such as ``dt=2026-11-01``)."""
    kinds = [str(s["kind"]) for s in snapshots]
    partitions = sorted({p for s in snapshots for p in s.get("partitions", ())})
    return {
        "table": table,
        "job": job,
        "snapshot_ids": [int(s["id"]) for s in snapshots],
        "snapshot_id": int(snapshots[-1]["id"]) if snapshots else None,
        "commit_kinds": kinds,
        "commit_kind": kinds[-1] if kinds else None,
        "rows": sum(int(s.get("rows") or 0) for s in snapshots),
        "partitions": partitions,
        "partitions_done": list(done),
        "dag_id": run.get("dag_id"), "task_id": run.get("task_id"),
        "run_id": run.get("run_id"), "commit_user": run.get("commit_user"),
    }


def emit(context: Mapping[str, Any], alias: AssetAlias, table: str, extra: Mapping[str, Any],
         cfg: LakeConfig | None = None) -> None:
    """Add one event for ``table``'s asset through the task's ``alias`` outlet."""
    context["outlet_events"][alias].add(lakecore_asset(table, cfg), extra=dict(extra))
