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

1. `plan_partitions` runs first and changes nothing: it checks the range (end date not before
   start date, at most `backfill_max_days` partitions) and that every date has landing data,
   and lists the dates. A run that cannot work fails here, at once and without retry, with one
   line saying what is wrong (Airflow checks each field on its own when you trigger; only this
   task sees them together);
2. `prepare` creates the catalog lock table and the table if missing;
3. `tag_before_backfill` tags the latest snapshot (`backfill-<range>-<run id>`) so the whole
   backfill can be undone with `lakecore rollback --tag ...`;
4. `overwrite_partition` is **mapped over the dates**: each mapped task is one Spark ingest job
   that atomically replaces exactly its partition with an `OVERWRITE` commit (its own commit
   user, so a retry never commits twice), marks it done (`partition.mark-done-action`, when the
   table sets `partition.end-input-to-done`) and emits the table's asset event.

Airflow's built-in Backfill of `lakecore_ingest` does the same per logical date.
Triggering a paused DAG from the UI also unpauses it (Airflow's "Unpause on trigger"); this DAG
has no schedule, so nothing else starts.
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
                       description="The table whose partitions are rewritten. Lists only "
                                   "the tables partitioned by date (date_partition in the "
                                   "tables file): one partition per date."),
        "start_date": Param(type="string", format="date", title="Start date",
                            description="First partition date to rewrite (YYYY-MM-DD)."),
        "end_date": Param(type="string", format="date", title="End date",
                          description="Last partition date to rewrite, inclusive: on or "
                                      "after the start date, at most "
                                      f"{cfg.backfill_max_days} dates. Each date reads the "
                                      "table's landing/<table>/dt=<date>."),
    },
    doc_md=DOC + tables_doc(cfg),
) as dag:
    dates = plan_partitions()
    tag = tag_before_backfill(dates)  # type: ignore[arg-type]  # an XComArg at parse time
    dates >> prepare_lake() >> tag
    tag >> LakeIngestOperator.partial(
        task_id="overwrite_partition",
        table="{{ params.table }}",
        overwrite=True,
        outlets=[commit_alias(None)],  # a mapped task declares its outlets here
        # one at a time when a dynamic-bucket table may be backfilled (the table is a Param)
        **{"max_active_tis_per_dagrun": 2,
           **one_ingest_at_a_time(cfg, [cfg.table(n) for n in dated])},
    ).expand(partition_date=dates)
