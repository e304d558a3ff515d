"""lakecore_backfill: manual, atomic overwrite of a date range of one table's partitions."""

from __future__ import annotations

from airflow.sdk import DAG, Param
from lake_airflow.assets import commit_alias
from lake_airflow.config import load_config
from lake_airflow.dag_support import dag_args, one_ingest_at_a_time, tables_doc
from lake_airflow.operators import LakeIngestOperator
from lake_airflow.tasks import plan_partitions, prepare_lake, tag_before_backfill

DOC = """
### lakecore backfill

Rewrites the partitions of one table for a range of dates from its source. Trigger it with
**table**, **start_date** and **end_date** (inclusive).

1. `plan_partitions` validates the range (end not before start, at most
   `backfill_max_days` partitions, source data present) and lists the dates;
2. `tag_before_backfill` tags the latest snapshot (`backfill-<range>-<run id>`) so the whole
   backfill can be undone with `lakecore rollback --tag ...`;
3. `overwrite_partition` is **mapped over the dates**: each mapped task is one Spark ingest job
   that atomically replaces exactly its partition with an `OVERWRITE` commit (its own commit
   user, so a retry never commits twice), marks it done (`partition.mark-done-action`, when the
   table sets `partition.end-input-to-done`) and emits the table's asset event.

Airflow's built-in Backfill of `lakecore_ingest` does the same per logical date.
"""

cfg = load_config()
dated = [t.name for t in cfg.tables if t.date_partition] or cfg.table_names

with DAG(
    dag_id="lakecore_backfill",
    description="Atomically overwrite a date range of partitions of one table",
    schedule=None,
    **dag_args(cfg, "backfill"),
    params={
        "table": Param(dated[0], type="string", enum=dated, title="Table",
                       description="The table whose partitions are rewritten."),
        "start_date": Param(type="string", format="date", title="Start date",
                            description="First partition date to rewrite (YYYY-MM-DD)."),
        "end_date": Param(type="string", format="date", title="End date",
                          description="Last partition date to rewrite, inclusive "
                                      f"(at most {cfg.backfill_max_days} dates)."),
    },
    doc_md=DOC + tables_doc(cfg),
) as dag:
    dates = plan_partitions()
    tag = tag_before_backfill(dates)  # type: ignore[arg-type]  # an XComArg at parse time
    prepare_lake() >> dates
    tag >> LakeIngestOperator.partial(
        task_id="overwrite_partition",
        table="{{ params.table }}",
        overwrite=True,
        outlets=[commit_alias(None)],  # a mapped task declares its outlets here
        # one at a time when a dynamic-bucket table may be backfilled (the table is a Param)
        **{"max_active_tis_per_dagrun": 2,
           **one_ingest_at_a_time(cfg, [cfg.table(n) for n in dated])},
    ).expand(partition_date=dates)
