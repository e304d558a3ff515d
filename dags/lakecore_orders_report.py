"""lakecore_orders_report: an example downstream DAG, run by shop.orders' asset events."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, get_current_context, task
from lake_airflow.assets import lakecore_asset
from lake_airflow.config import load_config
from lake_airflow.dag_support import dag_args, tables_doc

DOC = """
### lakecore orders report (example downstream DAG)

Scheduled on the **asset** of `shop.orders` (`lakecore_asset("shop.orders")`): Airflow's
scheduler queues a run after every commit that changes the table's data (ingest, backfill,
partition expiry; compaction rewrites files only and emits on
`lakecore://shop.orders/compactions`). `report` reads the table **as of the snapshot the event
names** (time travel), not whatever is latest when it runs, and logs the rows of each partition
the commit touched. The event's extra carries `snapshot_ids`, `commit_kind`, `rows` (net),
`partitions`, `partitions_done` and a one-line `summary`.
"""

TABLE = "shop.orders"
cfg = load_config()


@task(task_id="report")
def report() -> dict[str, Any]:
    from lake_airflow.report import report_new_snapshot

    return report_new_snapshot(get_current_context(), TABLE)


with DAG(
    dag_id="lakecore_orders_report",
    description="Rows per partition of shop.orders after each commit (asset-scheduled)",
    schedule=[lakecore_asset(TABLE, cfg)],
    **dag_args(cfg, "report"),
    doc_md=DOC + tables_doc(cfg),
) as dag:
    report()
