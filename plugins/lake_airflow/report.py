"""Downstream of a lake table: read exactly the snapshot an asset event names.

A DAG scheduled on ``lakecore_asset("shop.orders")`` gets the events that triggered it
(``triggering_asset_events``); ``report_new_snapshot`` reads the table **as of** the newest
event's snapshot (time travel, ``scan.snapshot-id``), so a commit landing meanwhile does not
leak into the report, and counts the rows of each partition the events touched. Used by the
example DAG ``lakecore_orders_report`` and by the partition-ready DAG.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lake_airflow.assets import lakecore_asset
from lake_airflow.config import LakeConfig, load_config

log = logging.getLogger(__name__)


def event_extras(events: Any, table: str, cfg: LakeConfig) -> list[dict[str, Any]]:
    """The extras of the triggering events of ``table``'s asset, oldest first."""
    asset = lakecore_asset(table, cfg)
    out: list[dict[str, Any]] = []
    for key, evs in (events or {}).items():
        if getattr(key, "name", None) != asset.name:
            continue
        out += [dict(getattr(e, "extra", None) or {}) for e in evs]
    return sorted(out, key=lambda e: e.get("snapshot_id") or 0)


def partition_rows(table_name: str, snapshot_id: int, partitions: Iterable[str] | None,
                   cfg: LakeConfig | None = None) -> dict[str, Any]:
    """Rows per partition of ``table_name`` as of ``snapshot_id`` (only ``partitions``, labels
    such as ``dt=2026-11-01``, when given)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from lake_airflow.tables import get_table, open_catalog

    cfg = cfg or load_config()
    catalog = open_catalog(cfg)
    try:
        base = get_table(catalog, table_name)
        if base is None:
            raise ValueError(f"{table_name} does not exist")
        table = base.copy({"scan.snapshot-id": str(int(snapshot_id))})
        rb = table.new_read_builder()
        data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        keys = list(table.partition_keys)
    finally:
        catalog.close()
    if keys:
        labels = pc.binary_join_element_wise(
            *[pc.binary_join_element_wise(pa.scalar(f"{k}="), pc.cast(data[k], pa.string()), "")
              for k in keys], "/") if data.num_rows else pa.array([], pa.string())
        counts = pa.table({"p": labels}).group_by("p").aggregate([("p", "count")])
        per = dict(zip(counts["p"].to_pylist(), counts["p_count"].to_pylist(), strict=True))
    else:
        per = {"": data.num_rows}
    wanted = set(partitions) if partitions is not None else None
    shown = {p: n for p, n in sorted(per.items()) if wanted is None or p in wanted}
    return {"table": table_name, "snapshot_id": int(snapshot_id), "rows": data.num_rows,
            "partitions": shown}


def report_new_snapshot(context: Mapping[str, Any], table: str) -> dict[str, Any]:
    """Read the newest snapshot the run's triggering events name; log and return the rows of
    the partitions they touched."""
    cfg = load_config()
    extras = event_extras(context.get("triggering_asset_events"), table, cfg)
    if not extras:
        raise ValueError(f"this run was not triggered by an event of {table}'s asset")
    newest = extras[-1]
    touched: Sequence[str] = sorted({p for e in extras for p in e.get("partitions") or []})
    out = partition_rows(table, int(newest["snapshot_id"]), touched, cfg)
    out.update(events=len(extras), commit_kinds=[e.get("commit_kind") for e in extras],
               event_snapshot_ids=[i for e in extras for i in e.get("snapshot_ids") or []])
    log.info("%s as of snapshot %s (%s): %s", table, out["snapshot_id"],
             ", ".join(str(k) for k in out["commit_kinds"]), out["partitions"])
    return out
