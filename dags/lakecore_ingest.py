"""lakecore_ingest: scheduled, write-only ingest of every declared table (one Spark job each)."""

from __future__ import annotations

from airflow.sdk import DAG
from lake_airflow.config import load_config
from lake_airflow.dag_support import (
    dag_args,
    landing_note,
    merge_schema_param,
    one_ingest_at_a_time,
    tables_doc,
    tables_param,
)
from lake_airflow.operators import LakeIngestOperator
from lake_airflow.tasks import check_ingest, prepare_lake

DOC = """
### lakecore ingest

Every run reads each table's source for the run's **logical date**: the date picks the
landing folder (`{date}` in the source path, e.g. `landing/orders/dt=<date>`), so trigger a
manual run with the logical date of a day that has landing data. It writes the data with
lakecore's Spark **ingest** job in `write-only` mode (no compaction, no expiry:
`lakecore_compaction` and `lakecore_maintenance` do those) as **one commit**.

* **Idempotent:** the commit user is derived from the DAG run (`airflow/<dag>/<task>/<run id>`)
  and the commit identifier from the date, so a retry or a cleared rerun of a run that already
  committed writes nothing; an old date's run is a different commit user, never mistaken for
  "already committed".
* **Backfill-safe:** a run started by Airflow's built-in *Backfill* ("Run this Dag for a range
  of dates" in the trigger menu) atomically **overwrites exactly its own partition**
  (`date_partition` in the tables file), so backfilling a range replaces those partitions.
  Tables without a date partition append; their `sequence.field` makes a replay harmless.
* `check` runs first, changes nothing and starts no Spark: a chosen table without landing data
  for the date fails the run at once, without retry, naming the missing path and the dates
  that have data.
* `prepare` creates the catalog lock table (connection `lakecore_lock`) and missing tables.
* A **dynamic-bucket** table (`bucket: "-1"`, Paimon's default for a primary-key table) is
  ingested by one task at a time (`max_active_tis_per_dag`, and the tables file's
  `airflow.dynamic_bucket_pool` across DAGs): its writers share the table's HASH index.
* Param **tables** restricts a manual run to some tables (empty: all).
* Triggering a paused DAG from the UI also unpauses it (Airflow's "Unpause on trigger"), so its
  daily schedule starts too.
* Param **merge_schema** (off by default): a source with new columns adds them to the table
  (one ALTER, Paimon's `write.merge-schema`) instead of failing the ingest.
* A compatible change of a table's declaration in the tables file (new columns, wider types,
  comments, options) becomes an ALTER in `prepare`; an incompatible one fails `prepare`.
"""

cfg = load_config()

with DAG(
    dag_id="lakecore_ingest",
    description="Write-only ingest of each declared lake table for the run's date",
    schedule=cfg.schedules.ingest,
    **dag_args(cfg, "ingest", max_active_runs=2),
    params={"tables": tables_param(cfg, "ingest", landing_note(cfg)),
            "merge_schema": merge_schema_param()},
    doc_md=DOC + tables_doc(cfg),
) as dag:
    prepare = prepare_lake()
    check_ingest() >> prepare
    for spec in cfg.tables:
        prepare >> LakeIngestOperator(
            task_id=f"ingest_{spec.slug}",
            table=spec.name,
            doc_md=f"Ingest `{spec.name}` from `{spec.source.path}` ({spec.source.format.value}).",
            **one_ingest_at_a_time(cfg, [spec]),
        )
