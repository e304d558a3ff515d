"""lakecore_partition_ready: wait (in the triggerer) for a partition, then report it."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, get_current_context, task
from lake_airflow.config import load_config
from lake_airflow.dag_support import PARTITION_PATTERN, dag_args, tables_doc
from lake_airflow.sensors import LakePartitionSensor

DOC = """
### lakecore partition ready

Trigger it with a **table**, a **partition** (`dt=2026-11-01`) and optionally
**newer_than_snapshot**. `wait` is a deferrable `LakePartitionSensor`: it holds no worker
slot while it waits in Airflow's triggerer, until the partition is **marked done** (its
`_SUCCESS` file or done-partition record, written by the ingest or a backfill of that date
when the table sets `partition.end-input-to-done`), or, with *newer_than_snapshot*, until a
newer snapshot touches the partition. `report` then counts the partition's rows as of the
latest snapshot.
"""

cfg = load_config()
dated = [t.name for t in cfg.tables if t.date_partition] or cfg.table_names


@task(task_id="report")
def report(found: dict[str, Any]) -> dict[str, Any]:
    from lake_airflow.report import partition_rows
    from lake_airflow.tables import get_table, open_catalog

    params = get_current_context()["params"]
    catalog = open_catalog(cfg)
    try:
        table = get_table(catalog, params["table"])
        latest = table.snapshot_manager.latest_id() if table is not None else None
    finally:
        catalog.close()
    label = params["partition"].replace(",", "/").replace(" ", "")
    rows = partition_rows(params["table"], latest, [label], cfg) if latest else {}
    return {"found": found, **rows}


with DAG(
    dag_id="lakecore_partition_ready",
    description="Wait for a lake partition to be done (deferrable), then report it",
    schedule=None,
    **dag_args(cfg, "sensor", max_active_runs=4),
    params={
        "table": Param(dated[0], type="string", enum=dated, title="Table",
                       description="The date-partitioned table to watch."),
        "partition": Param(type="string", pattern=PARTITION_PATTERN, minLength=3,
                           title="Partition",
                           description="The partition to wait for: KEY=VALUE with the "
                                       "table's partition keys, e.g. dt=2026-11-01 (several "
                                       "keys: dt=2026-11-01,region=eu). Anything else is "
                                       "refused when you trigger."),
        "newer_than_snapshot": Param(None, type=["null", "integer"], minimum=0,
                                     title="Newer than snapshot",
                                     description="Empty: wait until the partition is marked "
                                                 "done. A snapshot id: wait until a newer "
                                                 "snapshot touches the partition."),
    },
    doc_md=DOC + tables_doc(cfg),
) as dag:
    found = LakePartitionSensor(task_id="wait", table="{{ params.table }}",
                                partition="{{ params.partition }}",
                                newer_than_snapshot="{{ params.newer_than_snapshot }}",
                                poll_interval=3)
    report(found.output)  # type: ignore[arg-type]
