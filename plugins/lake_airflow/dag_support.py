"""What every lakecore DAG shares: default args, tags, typed Params, generated docs.

Parse-time only (Airflow and the tables file); no lakecore, no pyspark.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param

from lake_airflow.config import LakeConfig
from lake_airflow.submit import DURATION_PATTERN, PARTITION_PATTERN

__all__ = ["DURATION_PATTERN", "PARTITION_PATTERN", "START_DATE", "TAG", "dag_args",
           "default_args", "merge_schema_param", "tables_doc", "tables_param"]
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
TAG = "lakecore"


def dag_args(cfg: LakeConfig, kind: str, max_active_runs: int = 1) -> dict[str, Any]:
    """The arguments every lakecore DAG shares: no catchup, one start date, the retries and
    owner of ``default_args``, and the ``lakecore`` tag next to its ``kind``."""
    return {"start_date": START_DATE, "catchup": False, "max_active_runs": max_active_runs,
            "default_args": default_args(cfg), "tags": [TAG, kind]}


def default_args(cfg: LakeConfig) -> dict[str, Any]:
    return {
        "owner": "lakecore",
        "retries": cfg.retries,
        "retry_delay": timedelta(minutes=cfg.retry_delay_minutes),
        "depends_on_past": False,
    }


def tables_param(cfg: LakeConfig, what: str) -> Param:
    names = cfg.table_names
    return Param(
        names,
        type="array",
        items={"type": "string", "enum": names},
        uniqueItems=True,
        title="Tables",
        description=f"Tables to {what}; empty means every declared table "
                    f"({', '.join(names)}).",
    )


def merge_schema_param() -> Param:
    """Paimon's ``write.merge-schema`` for one run: off unless asked."""
    return Param(
        False,
        type="boolean",
        title="Merge schema",
        description="Add the source's new columns (and widen types) to the table with one "
                    "ALTER before writing (Paimon's write.merge-schema). Off: a new source "
                    "column fails the ingest, naming it. Then declare the new columns in the "
                    "tables file.",
    )


def tables_doc(cfg: LakeConfig) -> str:
    """A Markdown table of the declared tables, appended to every DAG's doc_md."""
    rows = ["| table | primary key | partitions | source |", "|---|---|---|---|"]
    for t in cfg.tables:
        rows.append(f"| `{t.name}` | {', '.join(t.primary_key) or '-'} | "
                    f"{', '.join(t.partition_keys) or '-'} | "
                    f"{t.source.format.value} `{t.source.path}` |")
    return (f"\n\n**Tables** (declared in `{cfg.path}`):\n\n" + "\n".join(rows)
            + f"\n\nWarehouse: `{cfg.warehouse}`. Catalog lock: Airflow connection "
            f"`{cfg.lock_conn_id}`.\n")
