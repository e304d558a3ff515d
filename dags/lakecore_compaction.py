"""lakecore_compaction: off-peak dedicated compaction of the declared tables."""

from __future__ import annotations

from airflow.sdk import DAG, Param, TaskGroup
from lake_airflow.config import load_config
from lake_airflow.dag_support import (
    PARTITION_PATTERN,
    dag_args,
    tables_doc,
    tables_param,
)
from lake_airflow.operators import LakeCompactOperator
from lake_airflow.tasks import plan_compaction, prepare_lake

DOC = """
### lakecore compaction

Scheduled in **off-peak hours** (cron from the tables file). Per table, `plan` reads the
latest snapshot and asks lakecore's compaction strategy which buckets need work; a table with
nothing to compact is **skipped, and the log says why**. `compact` runs lakecore's Spark
**compact** job: the driver plans, executors rewrite buckets, the driver commits one
`COMPACT` snapshot. Ingest may commit meanwhile: a COMPACT commit conflicts only on its own
input files.

Params: **tables**, **partitions** (`key=value[,key=value]`, one per line), **strategy**
(`universal` = Paimon's universal compaction picks, `full` = rewrite every bucket into its top
level), **parallelism** (Spark tasks) and **time_budget_minutes**: a table whose turn comes
after the budget is skipped, and a job still running when it runs out is stopped (an
interrupted compaction commits nothing and leaves the table as it was).
"""

cfg = load_config()
comp = cfg.compaction

with DAG(
    dag_id="lakecore_compaction",
    description="Off-peak compaction of the lake tables",
    schedule=cfg.schedules.compaction,
    **dag_args(cfg, "compaction"),
    params={
        "tables": tables_param(cfg, "compact"),
        "partitions": Param(
            [], type="array", items={"type": "string", "pattern": PARTITION_PATTERN},
            title="Partitions",
            description="Only these partitions, e.g. dt=2026-11-01 (one per line); "
                        "empty: every partition.",
        ),
        "strategy": Param(
            comp.strategy.value, type="string", enum=["universal", "full"], title="Strategy",
            description="universal: compact the buckets Paimon's universal compaction picks; "
                        "full: rewrite every bucket into its top level.",
        ),
        "parallelism": Param(
            comp.parallelism, type="integer", minimum=1, maximum=256, title="Parallelism",
            description="Spark tasks rewriting buckets.",
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
    for spec in cfg.tables:
        with TaskGroup(group_id=spec.slug, tooltip=f"compact {spec.name}"):
            plan = plan_compaction(spec.name)
            plan >> LakeCompactOperator(task_id="compact", table=spec.name)
        prepare >> plan
