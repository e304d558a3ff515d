"""The Python tasks of the lakecore DAGs (the Spark work is in ``operators``).

They run in the Airflow worker, import lakecore only when they run, and log what they found:
``prepare`` (the lock table and the declared tables), ``plan`` (per bucket: compact now,
inside the off-peak window or at the stop trigger, or skip, and say why),
``plan_partitions`` and ``tag_before_backfill`` (the backfill). The first task of a run
(``check``, the backfill's ``plan_partitions``) changes nothing and fails without retry when
the Params cannot work (``lake_airflow.checks``).
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime
from typing import Any

from airflow.sdk import get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from lake_airflow.checks import (
    RunRefused,
    backfill_dates,
    check_partition_keys,
    check_partitions_exist,
    check_sources,
    missing_source,
)
from lake_airflow.config import CompactionStrategy, LakeConfig, load_config
from lake_airflow.lock import LOCK_TABLE, ensure_lock_table, resolve_lock
from lake_airflow.operators import budget_deadline, selected_tables, skip
from lake_airflow.submit import RunInfo, parse_partition
from lake_airflow.tables import (
    TableMismatchError,
    ensure_tables,
    get_table,
    open_catalog,
)
from lake_airflow.tables import tag_latest as _tag_latest

log = logging.getLogger(__name__)


def _tables_of_run(params: Any, cfg: LakeConfig) -> list[str]:
    if params.get("table"):
        return [params["table"]]
    return selected_tables(params, cfg)


@task(task_id="prepare")
def prepare_lake(create_tables: bool = True) -> dict[str, Any]:
    """Create the catalog lock table in the lock database, and the run's tables if missing;
    an existing table whose declaration changed compatibly is altered to it (one ALTER), an
    incompatible change fails the task (no retry) naming the table and the column/option."""
    ctx = get_current_context()
    started = datetime.now(UTC).isoformat()
    cfg = load_config()
    lock = None if cfg.conditional_put else resolve_lock(cfg.lock_conn_id)
    if lock is not None:
        ensure_lock_table(lock)
    out: dict[str, Any] = {
        "lock": lock.describe() if lock else "none: commits use conditional writes",
        "lock_table": LOCK_TABLE if lock else None, "tables": {}, "started_at": started}
    if create_tables:
        catalog = open_catalog(cfg, lock)
        try:
            specs = [cfg.table(name) for name in _tables_of_run(ctx["params"], cfg)]
            try:
                out["tables"] = ensure_tables(catalog, specs)
            except TableMismatchError as e:  # the tables file must change: no retry
                raise AirflowFailException(str(e)) from None
        finally:
            catalog.close()
    log.info("prepared: %s", out)
    return out


@task(task_id="plan")
def plan_compaction(table: str) -> dict[str, Any]:
    """Decide per bucket (``lake_airflow.offpeak``): compact a bucket past the table's
    triggers inside its off-peak window, or at once at the stop trigger; skip the rest. Logs
    every bucket's decision and why; skips the task (saying why) when no bucket is chosen."""
    from lake_airflow.offpeak import decide
    from lake_airflow.tables import bucket_states, compaction_window

    ctx = get_current_context()
    cfg = load_config()
    params = ctx["params"]
    if table not in selected_tables(params, cfg):
        raise skip(ctx, f"{table} is not in this run's 'tables' Param")
    deadline = budget_deadline(ctx)
    if deadline is not None and datetime.now(deadline.tzinfo) >= deadline:
        raise skip(ctx, f"{table}: the run's time budget is used up")
    spec = cfg.table(table)
    try:
        partitions = [parse_partition(p, spec.partition_keys)
                      for p in params.get("partitions") or []]
    except ValueError as e:
        raise AirflowFailException(str(e)) from None
    catalog = open_catalog(cfg)
    try:
        t = get_table(catalog, table)
        if t is None:
            raise skip(ctx, f"{table} does not exist yet: nothing to compact")
        full = CompactionStrategy(params.get("strategy", "universal")) is CompactionStrategy.FULL
        snapshot_id, states = bucket_states(t, partitions, full)
        window = compaction_window(t)
    finally:
        catalog.close()
    hour = datetime.now().hour  # local time, as Paimon's OffPeakHours reads it
    ignore = bool(params.get("ignore_offpeak", False))
    decisions = [decide(b, window, hour, ignore) for b in states]
    log.info("%s at snapshot %s: %s; num-sorted-run.compaction-trigger %d, stop-trigger %d; "
             "local hour %02d", table, snapshot_id, window.describe(),
             window.compaction_trigger, window.stop_trigger, hour)
    for d in decisions:
        log.info("%s %s: %s", table, d.label, d.reason)
    chosen = [d for d in decisions if d.compact]
    out = {"snapshot_id": snapshot_id, "window": window.to_dict(), "hour": hour,
           "decisions": [d.to_dict() for d in decisions],
           "buckets": [d.arg for d in chosen]}
    ctx["ti"].xcom_push(key="decisions", value=out["decisions"])
    if not chosen:
        why = ("no bucket in the table yet" if not decisions else
               f"no bucket to compact now ({len(decisions)} checked: "
               + "; ".join(f"{d.label}: {d.reason}" for d in decisions[:6])
               + (" ..." if len(decisions) > 6 else "") + ")")
        raise skip(ctx, f"nothing to compact in {table}: {why}")
    log.info("%s: compacting %d bucket(s): %s", table, len(chosen), ", ".join(out["buckets"]))
    return out


def _refuse(e: RunRefused) -> AirflowFailException:
    """A run its Params cannot make work: fail now, without retry, with the one line."""
    log.error("refused: %s", e)
    return AirflowFailException(str(e))


@task(task_id="check", retries=0)
def check_ingest() -> dict[str, Any]:
    """The ingest's first task (before ``prepare``, no Spark, changes nothing): every chosen
    table has landing data for the run's date (``source.path`` with its ``{date}``)."""
    ctx = get_current_context()
    cfg = load_config()
    specs = [cfg.table(n) for n in selected_tables(ctx["params"], cfg)]
    day = RunInfo.from_context(ctx).day
    try:
        check_sources(specs, day)
    except RunRefused as e:
        raise _refuse(e) from None
    sources = {s.name: s.source.path_for(day) for s in specs}
    log.info("landing data for %s: %s", day, sources)
    return {"date": day.isoformat(), "sources": sources}


@task(task_id="check", retries=0)
def check_compaction() -> dict[str, Any]:
    """The compaction's first task (before ``prepare``, no Spark, changes nothing): the
    Partitions Param fits every chosen table's partition keys, and each exists there."""
    from lake_airflow.changes import live_partitions

    ctx = get_current_context()
    cfg = load_config()
    specs = [cfg.table(n) for n in selected_tables(ctx["params"], cfg)]
    partitions = list(ctx["params"].get("partitions") or [])
    try:
        parsed = check_partition_keys(specs, partitions)
        if partitions:
            catalog = open_catalog(cfg)
            try:
                for spec in specs:
                    table = get_table(catalog, spec.name)
                    if table is None:
                        raise RunRefused(f"{spec.name} does not exist yet: it has no "
                                         f"partition {', '.join(partitions)}")
                    check_partitions_exist(spec.name, parsed[spec.name],
                                           live_partitions(table))
            finally:
                catalog.close()
    except RunRefused as e:
        raise _refuse(e) from None
    log.info("compacting %s, partitions: %s", [s.name for s in specs], partitions or "all")
    return {"tables": [s.name for s in specs], "partitions": partitions}


@task(task_id="plan_partitions", retries=0)
def plan_partitions() -> list[str]:
    """The backfill's first task (before ``prepare``, no Spark, changes nothing): the table
    is date-partitioned, the range is valid and every date has landing data; one partition
    date per mapped overwrite task."""
    ctx = get_current_context()
    cfg = load_config()
    p = ctx["params"]
    spec = cfg.table(p["table"])
    try:
        if not spec.date_partition:
            raise RunRefused(f"{spec.name} has no date_partition: it cannot be backfilled by "
                             "partition")
        dates = backfill_dates(p["start_date"], p["end_date"], cfg.backfill_max_days)
        missing = [m for d in dates if (m := missing_source(spec, date.fromisoformat(d)))]
        if missing:
            raise RunRefused(f"no landing data for {len(missing)} of the {len(dates)} "
                             f"date(s): {missing[0]}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    except RunRefused as e:
        raise _refuse(e) from None
    log.info("backfilling %s: %d partition(s) %s", spec.name, len(dates), dates)
    return dates


def tag_name(run_id: str, start: str, end: str) -> str:
    return "backfill-" + re.sub(r"[^A-Za-z0-9._-]+", "-", f"{start}_{end}_{run_id}").strip("-")


@task(task_id="tag_before_backfill")
def tag_before_backfill(partitions: list[str]) -> dict[str, Any] | None:
    """Tag the table's latest snapshot so the whole backfill can be rolled back."""
    ctx = get_current_context()
    cfg = load_config()
    p = ctx["params"]
    name = tag_name(ctx["dag_run"].run_id, partitions[0], partitions[-1])
    catalog = open_catalog(cfg)
    try:
        table = get_table(catalog, p["table"])
        info = _tag_latest(table, name) if table is not None else None
    finally:
        catalog.close()
    if info is None:
        log.info("%s has no snapshot yet: nothing to tag before the backfill", p["table"])
        return None
    log.info("tagged snapshot %s of %s as %r; to undo the backfill: lakecore rollback "
             "--warehouse %s --table %s --tag %s", info["snapshot_id"], p["table"], name,
             cfg.warehouse, p["table"], name)
    return info
