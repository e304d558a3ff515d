"""Table health as plain data, for the page and its JSON API.

Per declared table: recent snapshots, live files and sorted runs per bucket, level-0 backlog,
size amplification (``lakecore.maintenance.inspect``), for a dynamic-bucket table (``bucket``
-1) the buckets of each partition with their key counts (its HASH index), what compaction
would do now, last
compaction and last expiry, tags, and who holds the catalog lock; the table's Airflow asset
(its URI, its page in the UI and its recent asset events from the metadata DB), the
partitions marked done (``_SUCCESS`` / done-partition records) and the off-peak compaction
window with the sorted-run triggers. Nothing secret is in it: the
lock database is described by dialect and connection id, never by URL.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lake_airflow.config import LakeConfig, TableSpec, load_config
from lake_airflow.lock import LOCK_TABLE, LockTarget, resolve_lock

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_SECONDS = 5  # every database the page opens answers within this, or is "unknown"
_USERINFO = re.compile(r"(//)[^/@]*@")


def scrub(text: str) -> str:
    """Drop credentials embedded in a URI (``s3://key:secret@bucket`` -> ``s3://***@bucket``)."""
    return _USERINFO.sub(r"\1***@", text)


def _millis(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def page_connect_args(url: str, seconds: int = CONNECT_TIMEOUT_SECONDS) -> dict[str, Any]:
    """The driver's connect arguments that bound a connection attempt to ``seconds`` (a
    silent lock host must not hang the page): SQLite's busy timeout, else the driver's
    connect timeout (``lakecore.lock.drivers``)."""
    from sqlalchemy.engine import make_url

    from lakecore.lock.drivers import connect_args

    u = make_url(url)
    return {"timeout": seconds} if u.get_backend_name() == "sqlite" else connect_args(u, seconds)


def lock_holder(lock: LockTarget, spec: TableSpec) -> dict[str, Any]:
    """The current holder of the table's catalog lock (never the database URL)."""
    from sqlalchemy import create_engine, inspect

    from lakecore.lock.sql import SqlCatalogLock

    args = page_connect_args(lock.url)
    engine = create_engine(lock.url, connect_args=args)
    try:
        if not inspect(engine).has_table(LOCK_TABLE):
            return {"state": "no lock table yet", "database": lock.describe()}
    finally:
        engine.dispose()
    sql_lock = SqlCatalogLock(lock.url, engine_options={"connect_args": args})
    try:
        holder = sql_lock.holder(spec.database, spec.table)
    finally:
        sql_lock.close()
    if holder is None:
        return {"state": "free", "database": lock.describe()}
    return {"state": "stale" if holder.stale else "held", "owner": holder.who,
            "since": holder.acquired_at.isoformat(timespec="seconds"),
            "expires": holder.expires_at.isoformat(timespec="seconds"),
            "database": lock.describe()}


def last_task_run(dag_id: str, task_id: str) -> dict[str, Any] | None:
    """The latest finished run of a task from the Airflow metadata DB (API server side)."""
    try:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance)
                .where(TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id,
                       TaskInstance.end_date.is_not(None))
                .order_by(TaskInstance.end_date.desc()).limit(1)
            ).first()
            if ti is None or ti.end_date is None:
                return None
            return {"dag_id": dag_id, "task_id": task_id, "run_id": ti.run_id,
                    "state": str(ti.state), "end": ti.end_date.isoformat(timespec="seconds")}
    except Exception:  # no metadata DB in this process (tests of the bare app)
        log.debug("cannot read task history", exc_info=True)
        return None


def asset_events(name: str, limit: int = 5) -> dict[str, Any]:
    """The asset named ``name`` in the Airflow metadata DB (API server side): its id, the UI
    page and its latest events (newest first), or ``{"id": None}`` when Airflow has not seen
    it."""
    try:
        from airflow.models.asset import AssetEvent, AssetModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            asset = session.scalars(select(AssetModel).where(AssetModel.name == name)).first()
            if asset is None:
                return {"id": None, "events": []}
            rows = session.scalars(
                select(AssetEvent).where(AssetEvent.asset_id == asset.id)
                .order_by(AssetEvent.timestamp.desc()).limit(limit)).all()
            events = [{"id": e.id, "time": e.timestamp.isoformat(timespec="seconds"),
                       "dag_id": e.source_dag_id, "task_id": e.source_task_id,
                       "run_id": e.source_run_id, "extra": _event_summary(e.extra or {})}
                      for e in rows]
            return {"id": asset.id, "url": f"/assets/{asset.id}", "events": events}
    except Exception:  # no metadata DB in this process (tests of the bare app)
        log.debug("cannot read asset events", exc_info=True)
        return {"id": None, "events": [], "unavailable": True}


def _event_summary(extra: dict[str, Any]) -> dict[str, Any]:
    keys = ("commit_kind", "snapshot_ids", "rows", "records_merged_away", "partitions",
            "partitions_done", "job", "summary")
    return {k: extra.get(k) for k in keys if k in extra}


def _table_report(cfg: LakeConfig, spec: TableSpec, catalog: Any,
                  lock: LockTarget | None) -> dict[str, Any]:
    from lake_airflow.assets import COMPACTIONS, asset_name, table_uri
    from lake_airflow.changes import partition_marks
    from lake_airflow.tables import compaction_preview, compaction_window, get_table
    from lakecore.maintenance import list_tags
    from lakecore.maintenance.inspect import inspect_table

    name = asset_name(spec.name)
    out: dict[str, Any] = {
        "name": spec.name, "description": spec.description, "slug": spec.slug,
        "asset": {"name": name, "location": scrub(table_uri(cfg.warehouse, spec.name)),
                  **asset_events(name)},
        "compaction_asset": {"name": name + COMPACTIONS,
                             **asset_events(name + COMPACTIONS, limit=3)}}
    table = get_table(catalog, spec.name)
    if table is None:
        out["exists"] = False
        return out
    r = inspect_table(table, max_snapshots=10)
    snaps = [{**s, "time": _millis(s["time_millis"])} for s in r["snapshots"]]
    last_compact = next((s for s in snaps if s["kind"] == "COMPACT"), None)
    levels: dict[tuple[str, int], dict[int, int]] = {}
    for f in r["files"]:
        levels.setdefault((f["partition"], f["bucket"]), {})[f["level"]] = f["files"]
    buckets = [{**b, "files_per_level": levels.get((b["partition"], b["bucket"]), {})}
               for b in r["buckets"]]
    amps = [b["size_amplification_percent"] for b in buckets
            if b["size_amplification_percent"] is not None]
    out.update(
        exists=True,
        path=scrub(r["path"]),
        primary_keys=r["primary_keys"], partition_keys=r["partition_keys"], bucket=r["bucket"],
        latest_snapshot=r["latest_snapshot"], earliest_snapshot=r["earliest_snapshot"],
        snapshots=snaps,
        buckets=buckets,
        dynamic_buckets=(r.get("hash_index") or []) if r["bucket"] == -1 and r["primary_keys"]
        else [],
        deletion_vectors=r.get("deletion_vectors") or [],
        level0_backlog=r["level0_files_pending"],
        max_size_amplification_percent=max(amps) if amps else None,
        total_files=r["total_files"], total_rows_in_files=r["total_rows_in_files"],
        total_bytes=r["total_bytes"],
        last_compaction=last_compact,
        snapshots_retained=len(snaps),
        last_compaction_task=last_task_run("lakecore_compaction", f"{spec.slug}.compact"),
        last_expiry=last_task_run("lakecore_maintenance", f"{spec.slug}.expire_snapshots"),
        compaction_preview=compaction_preview(table, None, full=False),
        tags=[t.to_dict() for t in list_tags(table)],
        done_partitions=partition_marks(table)[:20],
        mark_done_actions=[a.value for a in table.options.partition_mark_done_actions]
        if table.options.partition_end_input_to_done else [],
        offpeak={**compaction_window(table).to_dict(),
                 "now_hour": datetime.now().hour,
                 "in_window_now": compaction_window(table).contains(datetime.now().hour)},
    )
    if lock is not None:
        try:
            out["lock"] = lock_holder(lock, spec)
        except Exception as e:  # an unreachable lock DB must not take the page down
            out["lock"] = {"state": "unknown", "error": type(e).__name__,
                           "database": lock.describe()}
    return out


def health_report(cfg: LakeConfig | None = None,
                  lock_resolver: Callable[[str], LockTarget] = resolve_lock) -> dict[str, Any]:
    from lake_airflow.tables import open_catalog

    cfg = cfg or load_config()
    try:
        lock: LockTarget | None = (None if cfg.conditional_put
                                   else lock_resolver(cfg.lock_conn_id))
    except Exception:
        log.warning("cannot resolve the catalog lock connection", exc_info=True)
        lock = None
    catalog = open_catalog(cfg)
    tables = []
    try:
        for spec in cfg.tables:
            try:
                tables.append(_table_report(cfg, spec, catalog, lock))
            except Exception as e:
                log.exception("health of %s", spec.name)
                tables.append({"name": spec.name, "slug": spec.slug, "exists": None,
                               "error": f"{type(e).__name__}: {scrub(str(e))[:300]}"})
    finally:
        catalog.close()
    lock_text = ("none (commits use conditional writes)" if cfg.conditional_put
                 else lock.describe() if lock else "unresolved")
    return {"warehouse": scrub(cfg.warehouse), "generated": datetime.now(UTC).isoformat(
        timespec="seconds"), "lock": lock_text, "tables": tables,
        # the keys only: values may be credentials (s3.secret-key, ...)
        "catalog_options": sorted(cfg.catalog_options)}
