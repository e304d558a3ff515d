"""What every lakecore DAG shares: default args, tags, typed Params, generated docs.

Parse-time only (Airflow and the tables file); no lakecore, no pyspark.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param

from lake_airflow.config import LakeConfig, TableSpec
from lake_airflow.submit import DURATION_PATTERN, PARTITION_PATTERN

__all__ = ["DURATION_CHOICES", "DURATION_PATTERN", "PARTITION_PATTERN", "START_DATE", "TAG",
           "dag_args", "default_args", "duration_param", "landing_note", "merge_schema_param",
           "one_ingest_at_a_time", "partitions_param", "tables_doc", "tables_param"]
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
TAG = "lakecore"
DURATION_CHOICES = ("1 h", "6 h", "12 h", "1 d", "2 d", "3 d", "7 d", "14 d", "30 d")


def dag_args(cfg: LakeConfig, kind: str, max_active_runs: int = 1) -> dict[str, Any]:
    """The arguments every lakecore DAG shares: no catchup, one start date, the retries and
    owner of ``default_args``, and the ``lakecore`` tag next to its ``kind``."""
    return {"start_date": START_DATE, "catchup": False, "max_active_runs": max_active_runs,
            "default_args": default_args(cfg), "tags": [TAG, kind]}


def one_ingest_at_a_time(cfg: LakeConfig, tables: list[TableSpec]) -> dict[str, Any]:
    """Task arguments that keep ingests of a dynamic-bucket table (``bucket`` -1) from
    overlapping: their writers assign keys from the table's HASH index, and of two
    overlapping ingests into one partition the second commit would be refused (and retried).
    Within a DAG at most one such task runs at a time (``max_active_tis_per_dag``, and per
    run for a mapped backfill); across DAGs the tables file's ``airflow.dynamic_bucket_pool``
    (a one-slot pool) serializes them. Empty when no table in ``tables`` is dynamic."""
    if not any(t.dynamic_bucket for t in tables):
        return {}
    args: dict[str, Any] = {"max_active_tis_per_dag": 1, "max_active_tis_per_dagrun": 1}
    if cfg.dynamic_bucket_pool:
        args["pool"] = cfg.dynamic_bucket_pool
    return args


def default_args(cfg: LakeConfig) -> dict[str, Any]:
    return {
        "owner": "lakecore",
        "retries": cfg.retries,
        "retry_delay": timedelta(minutes=cfg.retry_delay_minutes),
        "depends_on_past": False,
    }


def tables_param(cfg: LakeConfig, what: str, note: str = "") -> Param:
    """A multi-select of the declared tables; empty (the default) means all of them, so the
    field is optional (``null`` allowed: the form sends null for an empty selection)."""
    names = cfg.table_names
    return Param(
        [],
        type=["array", "null"],
        items={"type": "string", "enum": names},
        examples=names,  # the form's multi-select offers these
        uniqueItems=True,
        title="Tables",
        description=f"Tables to {what}: pick one or more of {', '.join(names)}. Empty (the "
                    "default): every declared table." + (f" {note}" if note else ""),
    )


def landing_note(cfg: LakeConfig) -> str:
    """What the run's logical date picks: each table's landing folder for that date."""
    paths = "; ".join(f"{t.name}: {t.source.path.replace('{date}', '<date>')}"
                      for t in cfg.tables)
    return ("The run's logical date picks the landing folder each table reads "
            f"({paths}): choose the date of a day that has landing data.")


def partitions_param() -> Param:
    """Optional partition specs; which keys fit which tables is checked by the first task."""
    return Param(
        [],
        type=["array", "null"],
        items={"type": "string", "pattern": PARTITION_PATTERN},
        title="Partitions",
        description="Only these partitions, one per line, each KEY=VALUE[,KEY=VALUE] with "
                    "the chosen tables' partition keys, e.g. dt=2026-11-01. Empty (the "
                    "default): every partition. Before anything runs, the run is refused "
                    "when a chosen table lacks these keys or the partition.",
    )


def duration_param(default: str) -> Param:
    """The orphan files' minimum age: a choice of Paimon durations (a typo cannot reach the
    job, and a refused value is named with the choices, not a regex)."""
    choices = sorted({*DURATION_CHOICES, default.strip()}, key=_duration_seconds)
    return Param(
        default.strip(), type="string", enum=choices, title="Orphan files older than",
        description="Only unreferenced files older than this are removed (a writer may "
                    "still own a younger one). The tables file's maintenance."
                    f"orphan_older_than ({default.strip()}) is the default.",
    )


def _duration_seconds(text: str) -> float:
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]+)\s*", text)
    if found is None:  # the tables file's value is checked when it is read: not reached
        return float("inf")
    number, unit = found.groups()
    scale = {"ms": 0.001, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "d": 86400,
             "day": 86400, "days": 86400}
    return int(number) * scale[unit]


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
    rows = ["| table | primary key | partitions | buckets | source |",
            "|---|---|---|---|---|"]
    for t in cfg.tables:
        buckets = "dynamic (-1)" if t.dynamic_bucket else t.options.get("bucket", "-1")
        rows.append(f"| `{t.name}` | {', '.join(t.primary_key) or '-'} | "
                    f"{', '.join(t.partition_keys) or '-'} | {buckets} | "
                    f"{t.source.format.value} `{t.source.path}` |")
    return (f"\n\n**Tables** (declared in `{cfg.path}`):\n\n" + "\n".join(rows)
            + f"\n\nWarehouse: `{cfg.warehouse}`. Catalog lock: Airflow connection "
            f"`{cfg.lock_conn_id}`.\n")
