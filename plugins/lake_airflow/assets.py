"""Every lake table is an Airflow asset: ``lakecore_asset("shop.orders")``.

The asset is named after the table, ``lakecore://shop.orders``: the name stays when the
warehouse moves or is copied, so its history and the DAGs scheduled on it stay too. Where the
table lives is the asset's ``extra`` (``location``: Paimon's layout with a ``paimon+``
scheme, ``paimon+file:/data/warehouse/shop.db/orders`` or
``paimon+s3://lake/warehouse/shop.db/orders``, never with credentials: user info, query
strings and fragments are dropped).

Tasks whose table is known when the DAG is parsed declare the asset as an outlet, so its page
in the UI lists them as producing tasks: the ingests emit on the table's asset, compaction on
the table's **compaction asset** ``lakecore://shop.orders/compactions`` (a COMPACT commit
rewrites files, not data, and must not schedule compaction again). Such a task that committed
nothing is skipped, saying why, so it emits no event. The backfill (its table is a Param) and
maintenance (which commits only when a partition expires) emit through an ``AssetAlias``
(``commit_alias``) only when they commit. The event's extra (``event_extra``) says what
changed: snapshot ids, commit kinds, rows, partitions and a one-line summary. A downstream DAG
schedules on ``lakecore_asset("shop.orders")`` and reads those snapshots
(``triggering_asset_events``).

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
ASSET_SCHEME = "lakecore://"
COMPACTIONS = "/compactions"  # the suffix of a table's compaction asset
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
    """Where ``db.table`` lives in ``warehouse`` (Paimon's ``<db>.db/<table>`` layout), as a
    URI: the ``location`` in the table's asset extra."""
    database, _, name = table.partition(".")
    scheme, host, path = warehouse_location(warehouse)
    # Airflow stores URIs normalized (urlunsplit): a local path has no "//" authority part
    return urllib.parse.urlunsplit((f"{SCHEME_PREFIX}{scheme}", host,
                                    f"{path}/{database}.db/{name}", "", ""))


def asset_name(table: str) -> str:
    """The stable name of a table's asset: ``lakecore://shop.orders``."""
    return f"{ASSET_SCHEME}{table}"


def _asset(name: str, table: str, cfg: LakeConfig, what: str) -> Asset:
    from airflow.sdk import Asset

    cfg.table(table)  # a typo fails at parse time, naming the declared tables
    return Asset(name=name, uri=name, group=ASSET_GROUP,
                 extra={"table": table, "location": table_uri(cfg.warehouse, table),
                        "events": what})


def lakecore_asset(table: str, cfg: LakeConfig | None = None) -> Asset:
    """The Airflow asset of a declared lake table; schedule a DAG on it to run after each
    commit that changes its data (``schedule=[lakecore_asset("shop.orders")]``)."""
    return _asset(asset_name(table), table, cfg or load_config(),
                  "commits that change the data: ingest, backfill, partition expiry")


def compaction_asset(table: str, cfg: LakeConfig | None = None) -> Asset:
    """The asset of a table's compactions (``lakecore://shop.orders/compactions``): COMPACT
    commits rewrite files, not data, so they are not events of the table's own asset."""
    return _asset(asset_name(table) + COMPACTIONS, table, cfg or load_config(),
                  "COMPACT commits (files rewritten, data unchanged)")


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
    and ``partitions`` (labels such as ``dt=2026-11-01``; an unpartitioned table has none).
    ``rows`` is the net change of the data commits; a COMPACT's negative delta is not a
    change of data but row versions merged away (``records_merged_away``)."""
    kinds = [str(s["kind"]) for s in snapshots]
    partitions = sorted({p for s in snapshots for p in s.get("partitions", ()) if p})
    data = [s for s in snapshots if s["kind"] != "COMPACT"]
    compacts = [s for s in snapshots if s["kind"] == "COMPACT"]
    extra: dict[str, Any] = {
        "table": table,
        "job": job,
        "snapshot_ids": [int(s["id"]) for s in snapshots],
        "snapshot_id": int(snapshots[-1]["id"]) if snapshots else None,
        "commit_kinds": kinds,
        "commit_kind": kinds[-1] if kinds else None,
    }
    if data or not compacts:
        extra["rows"] = sum(int(s.get("rows") or 0) for s in data)
    if compacts:
        extra["records_merged_away"] = -sum(int(s.get("rows") or 0) for s in compacts)
    extra.update({
        "partitions": partitions,
        "partitions_done": list(done),
        "summary": _summary(job, snapshots, extra, partitions),
        "dag_id": run.get("dag_id"), "task_id": run.get("task_id"),
        "run_id": run.get("run_id"), "commit_user": run.get("commit_user"),
    })
    return extra


def _summary(job: str, snapshots: Sequence[Mapping[str, Any]], extra: Mapping[str, Any],
             partitions: Sequence[str]) -> str:
    """One line for people: ``ingest: APPEND snapshot 4, +200 rows in dt=2026-11-02``."""
    ids = ", ".join(str(s["id"]) for s in snapshots)
    what = f"{job}: {'/'.join(dict.fromkeys(extra['commit_kinds']))} snapshot(s) {ids}"
    parts = []
    if "rows" in extra:
        parts.append(f"{extra['rows']:+d} rows (net)")
    if "records_merged_away" in extra:
        parts.append(f"{extra['records_merged_away']} superseded or deleted row versions "
                     "merged away, data unchanged")
    where = f" in {', '.join(partitions[:5])}" + (" ..." if len(partitions) > 5 else "") \
        if partitions else ""
    return f"{what}: {'; '.join(parts)}{where}"


def emit(context: Mapping[str, Any], outlet: Asset | AssetAlias, table: str,
         extra: Mapping[str, Any], cfg: LakeConfig | None = None) -> None:
    """One event with ``extra``: on ``outlet`` itself when it is an asset, else for the
    table's asset through the ``outlet`` alias."""
    from airflow.sdk import AssetAlias

    if isinstance(outlet, AssetAlias):
        context["outlet_events"][outlet].add(lakecore_asset(table, cfg), extra=dict(extra))
    else:
        context["outlet_events"][outlet].extra = dict(extra)
