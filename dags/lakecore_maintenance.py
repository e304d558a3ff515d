"""lakecore_maintenance: daily expire partitions -> expire snapshots -> remove orphan files."""

from __future__ import annotations

from airflow.sdk import DAG, Param, TaskGroup, chain
from lake_airflow.config import load_config
from lake_airflow.dag_support import (
    DURATION_PATTERN,
    dag_args,
    tables_doc,
    tables_param,
)
from lake_airflow.operators import LakeMaintainOperator
from lake_airflow.submit import MaintenanceStep
from lake_airflow.tasks import prepare_lake

DOC = """
### lakecore maintenance

Per table, three Spark jobs **in this order** (lakecore's one maintenance order), each
logging its report:

1. `expire_partitions`: partitions older than `partition.expiration-time` (skipped, with the
   reason in the report, for tables that do not set it); it commits an OVERWRITE snapshot;
2. `expire_snapshots`: by the table's `snapshot.num-retained.min/max` and
   `snapshot.time-retained` (tags keep what they pin), freeing what step 1 dropped once its
   snapshots expire;
3. `remove_orphans`: files no snapshot or tag references and older than
   **orphan_older_than** (a writer may still own a younger one).

Param **dry_run** plans and reports without deleting anything.
"""

cfg = load_config()
maint = cfg.maintenance

with DAG(
    dag_id="lakecore_maintenance",
    description="Expire partitions and snapshots, remove orphan files",
    schedule=cfg.schedules.maintenance,
    **dag_args(cfg, "maintenance"),
    params={
        "tables": tables_param(cfg, "maintain"),
        "dry_run": Param(maint.dry_run, type="boolean", title="Dry run",
                         description="Report what would be removed; delete nothing."),
        "orphan_older_than": Param(
            maint.orphan_older_than, type="string", pattern=DURATION_PATTERN,
            title="Orphan files older than",
            description="Only unreferenced files older than this are removed, e.g. '1 d', "
                        "'12 h'.",
        ),
    },
    doc_md=DOC + tables_doc(cfg),
) as dag:
    prepare = prepare_lake(create_tables=False)
    for spec in cfg.tables:
        with TaskGroup(group_id=spec.slug, tooltip=f"maintain {spec.name}"):
            steps = [LakeMaintainOperator(task_id=step.task_id, table=spec.name, step=step)
                     for step in MaintenanceStep]
            chain(prepare, *steps)
