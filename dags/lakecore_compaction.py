"""lakecore_compaction: dedicated compaction of the declared tables, nightly and on their
asset events, per bucket inside Paimon's off-peak window (or at once at the stop trigger)."""

from __future__ import annotations

from airflow.sdk import DAG, AssetAny, AssetOrTimeSchedule, CronTriggerTimetable, Param, TaskGroup
from lake_airflow.assets import lakecore_assets
from lake_airflow.config import load_config
from lake_airflow.dag_support import dag_args, partitions_param, tables_doc, tables_param
from lake_airflow.operators import LakeCompactOperator
from lake_airflow.tasks import check_compaction, plan_compaction, prepare_lake

DOC = """
### lakecore compaction

Runs on the nightly cron of the tables file **and whenever a table's asset receives an
event** (an ingest, backfill or partition-expiry commit: `lakecore_asset("db.table")`). Per table,
`plan` reads the latest snapshot and decides **per bucket**, with the table's Paimon options:

* not picked by the compaction strategy (sorted runs below `num-sorted-run.compaction-trigger`,
  size amplification under its limit): **skip**;
* sorted runs at `num-sorted-run.stop-trigger` (where writers would stall): **compact at once**;
* otherwise **compact only inside the off-peak window** `compaction.offpeak.start.hour` to
  `compaction.offpeak.end.hour` (local hour, end exclusive; no window set: any time).

Every bucket's decision and its reason is logged (and kept in the XCom `decisions`); a table
with no bucket chosen is **skipped, saying why**. `compact` runs lakecore's Spark **compact**
job on exactly the chosen buckets (`--bucket dt=...:N`) and commits one `COMPACT` snapshot, an
event of the table's **compaction asset** (`lakecore://<table>/compactions`), not of the
table's asset this DAG is scheduled on: compaction never schedules itself. Ingest may commit
meanwhile: a COMPACT commit conflicts only on its own input files.

`check` runs first and changes nothing: Partitions that a chosen table is not partitioned
by, or does not have, refuse the run at once (no retry), before `prepare` and Spark.

Params: **tables** (empty: all), **partitions** (`key=value[,key=value]`, one per line),
**strategy** (`universal` = Paimon's universal compaction picks, `full` = rewrite every
bucket into its top level), **parallelism** (Spark tasks) and **time_budget_minutes**: a
table whose turn comes after the budget is skipped, and a job still running when it runs out
is stopped (an interrupted compaction commits nothing and leaves the table as it was).
"""

cfg = load_config()
comp = cfg.compaction
tables = AssetAny(*lakecore_assets(cfg))
schedule = (AssetOrTimeSchedule(timetable=CronTriggerTimetable(cfg.schedules.compaction,
                                                               timezone="UTC"), assets=tables)
            if cfg.schedules.compaction else tables)

with DAG(
    dag_id="lakecore_compaction",
    description="Compaction of the lake tables: nightly and on their asset events, off-peak",
    schedule=schedule,
    **dag_args(cfg, "compaction"),
    params={
        "tables": tables_param(cfg, "compact"),
        "partitions": partitions_param(),
        "strategy": Param(
            comp.strategy.value, type="string", enum=["universal", "full"], title="Strategy",
            description="universal: compact the buckets Paimon's universal compaction picks; "
                        "full: rewrite every bucket into its top level.",
        ),
        "parallelism": Param(
            comp.parallelism, type="integer", minimum=1, maximum=256, title="Parallelism",
            description="Spark tasks rewriting buckets.",
        ),
        "ignore_offpeak": Param(
            False, type="boolean", title="Ignore the off-peak window",
            description="Compact every bucket past its triggers now, even outside the "
                        "tables' compaction.offpeak window.",
        ),
        "time_budget_minutes": Param(
            comp.time_budget_minutes, type="integer", minimum=1, maximum=1440,
            title="Time budget (minutes)",
            description="Counted from the run's start: later tables are skipped and a "
                        "running job is stopped when it runs out.",
        ),
    },
    doc_md=DOC + tables_doc(cfg),
) as dag:
    prepare = prepare_lake(create_tables=False)
    check_compaction() >> prepare
    for spec in cfg.tables:
        with TaskGroup(group_id=spec.slug, tooltip=f"compact {spec.name}"):
            plan = plan_compaction(spec.name)
            plan >> LakeCompactOperator(task_id="compact", table=spec.name)
        prepare >> plan
