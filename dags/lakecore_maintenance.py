"""lakecore_maintenance: daily expire partitions -> expire snapshots -> remove orphan files."""

from __future__ import annotations

from airflow.sdk import DAG, Param, TaskGroup, chain
from lake_airflow.config import load_config
from lake_airflow.dag_support import dag_args, duration_param, tables_doc, tables_param
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

**Dry run.** A run you trigger is a **dry run unless you untick "Dry run"**: it plans and
reports what it would remove and deletes nothing. The **scheduled** run ignores the box and
follows the tables file's `maintenance.dry_run` (DRY_RUN_NOW).

**Triggering unpauses.** Triggering a paused DAG from the UI also unpauses it (Airflow's
"Unpause on trigger", on by default in the trigger form), and from then on the scheduled
runs happen too, with the tables file's setting. Untick "Unpause on trigger" to run once only.
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
        "dry_run": Param(True, type="boolean", title="Dry run",
                         description="On (the default for a run you trigger): report what "
                                     "would be removed, delete nothing. Scheduled runs ignore "
                                     "this box and follow the tables file's "
                                     f"maintenance.dry_run ({str(maint.dry_run).lower()})."),
        "orphan_older_than": duration_param(maint.orphan_older_than),
    },
    doc_md=DOC.replace("DRY_RUN_NOW", "now: dry run" if maint.dry_run
                       else "now: off, so scheduled runs delete") + tables_doc(cfg),
) as dag:
    prepare = prepare_lake(create_tables=False)
    for spec in cfg.tables:
        with TaskGroup(group_id=spec.slug, tooltip=f"maintain {spec.name}"):
            steps = [LakeMaintainOperator(task_id=step.task_id, table=spec.name, step=step)
                     for step in MaintenanceStep]
            chain(prepare, *steps)
