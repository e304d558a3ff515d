"""Table config + run + Params -> the arguments of one ``spark-submit`` (pure functions).

The plan is a value (``SparkSubmitSpec``); ``LakeSparkSubmitOperator`` hands it to the
apache-spark provider. Nothing here imports lakecore, pyspark or touches the network, so the
arguments are unit-tested as data. The lock's URL is not part of the spec: the operator adds it
to the job's environment at run time (see ``lock.py``).

DAGs are parsed without lakecore, so what they need of it is copied here, each copy pinned to
lakecore's own by ``tests/airflow/test_text_parsers.py``: the maintenance order
(``MaintenanceStep``, lakecore's ``lakecore.maintenance.maintain.MaintenanceStep``), the
partition-spec parser (``parse_partition``, lakecore's ``lakecore.options.cli_text``) and the
Params' patterns, which accept only texts those parsers accept.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from lake_airflow.config import DURATION_PATTERN as DURATION_PATTERN  # re-exported
from lake_airflow.config import CompactionStrategy, LakeConfig, TableSpec

LAUNCHER = Path(__file__).with_name("spark_launch.py")
PY_FILES_ENV = "LAKECORE_PY_FILES"  # the --py-files artifact (dist/lakecore.zip)
PYSPARK_PYTHON_ENV = "LAKECORE_PYSPARK_PYTHON"  # Python of the driver and the executors
SPARK_CONF_ENV = "LAKECORE_SPARK_CONF"  # JSON object of extra Spark conf (this machine's)
BACKFILL_RUN_TYPE = "backfill"  # DagRunType.BACKFILL_JOB
# Param patterns: an age in Paimon's units ('1 d', '12 h': config.DURATION_PATTERN), one
# partition spec ('dt=2026-11-01')
PARTITION_PATTERN = (r"^[A-Za-z_][A-Za-z0-9_]*=[^,=]*[^,=\s][^,=]*"
                     r"(,[A-Za-z_][A-Za-z0-9_]*=[^,=]*[^,=\s][^,=]*)*$")


class Job(StrEnum):
    INGEST = "ingest"
    COMPACT = "compact"
    MAINTAIN = "maintain"


class MaintenanceStep(StrEnum):
    """The maintain job's switches, in the order the maintenance DAG runs them: lakecore's one
    maintenance order (partition expiry commits a snapshot, snapshot expiry may then free its
    files, orphan files last)."""

    EXPIRE_PARTITIONS = "expire-partitions"
    EXPIRE_SNAPSHOTS = "expire-snapshots"
    REMOVE_ORPHANS = "remove-orphans"

    @property
    def task_id(self) -> str:
        return self.value.replace("-", "_")


@dataclass(frozen=True)
class RunInfo:
    """What identifies one task attempt's work: the DAG run, not the attempt."""

    dag_id: str
    task_id: str
    run_id: str
    run_type: str
    logical_date: datetime | None
    run_after: datetime
    map_index: int = -1
    clear_number: int = 0

    @staticmethod
    def from_context(context: Mapping[str, Any]) -> RunInfo:
        dr, ti = context["dag_run"], context["ti"]
        map_index = getattr(ti, "map_index", None)
        return RunInfo(dr.dag_id, ti.task_id, dr.run_id,
                       str(getattr(dr.run_type, "value", dr.run_type)), dr.logical_date,
                       dr.run_after, -1 if map_index is None else int(map_index),
                       int(getattr(dr, "clear_number", 0) or 0))

    @property
    def is_backfill(self) -> bool:
        return self.run_type == BACKFILL_RUN_TYPE

    @property
    def day(self) -> date:
        """The partition date of the run: its logical date (UTC), else when it was due."""
        moment = self.logical_date or self.run_after
        return moment.astimezone(UTC).date() if moment.tzinfo else moment.date()

    def commit_user(self, overwrite: bool = False) -> str:
        """One commit user per (DAG, task, run[, map index]) ("Commit users" in
        docs/architecture.md): a retry or a cleared rerun of a run that committed finds its own
        commit and writes nothing, and an old date's run is a different user, never taken for
        "already committed".

        An overwrite also counts the run's clears: Airflow's Backfill re-types an existing run
        (same run id) as a backfill and clears it, and that must overwrite again. A retry keeps
        the clear number, so it still never commits twice; a cleared overwrite replaces the
        partition again, which leaves the same rows."""
        user = f"airflow/{self.dag_id}/{self.task_id}/{self.run_id}"
        if self.map_index >= 0:
            user += f"/{self.map_index}"
        return f"{user}/overwrite-{self.clear_number}" if overwrite else user


def commit_identifier(day: date) -> int:
    """A readable, deterministic identifier: 2026-11-01 -> 20261101."""
    return int(day.strftime("%Y%m%d"))


@dataclass(frozen=True)
class SparkSubmitSpec:
    application: str
    name: str
    application_args: tuple[str, ...]
    conf: Mapping[str, str] = field(default_factory=dict)
    py_files: str | None = None
    env_vars: Mapping[str, str] = field(default_factory=dict)


def default_py_files() -> str | None:
    """``$LAKECORE_PY_FILES``, else ``dist/lakecore.zip`` beside the lakecore checkout (the
    Makefile's ``dist/lakecore.zip`` target builds it); None when neither exists, which is
    fine in ``local[*]`` where lakecore is installed."""
    explicit = os.environ.get(PY_FILES_ENV)
    if explicit:
        return explicit
    import importlib.util

    spec = importlib.util.find_spec("lakecore")  # locates, does not import
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).resolve().parents[1] / "dist" / "lakecore.zip"
    return str(candidate) if candidate.exists() else None


def machine_spark_conf() -> dict[str, str]:
    """Extra Spark conf for this machine from ``$LAKECORE_SPARK_CONF`` (a JSON object)."""
    text = os.environ.get(SPARK_CONF_ENV)
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{SPARK_CONF_ENV} must be a JSON object")
    return {str(k): str(v) for k, v in value.items()}


def _base(cfg: LakeConfig, job: Job, table: TableSpec, args: Sequence[str],
          py_files: str | None) -> SparkSubmitSpec:
    python = os.environ.get(PYSPARK_PYTHON_ENV) or sys.executable
    conf = {"spark.ui.showConsoleProgress": "false", **dict(cfg.spark.conf),
            **machine_spark_conf(),
            "spark.pyspark.python": python, "spark.pyspark.driver.python": python}
    # the lock's URL and cfg.catalog_options reach the driver through its environment
    # (operators.py, spark_launch.py); conditional writes need no lock at all
    lock = () if cfg.conditional_put else ("--catalog-option", "lock.enabled=true")
    head = (job.value, "--warehouse", cfg.warehouse, "--table", table.name, *lock)
    return SparkSubmitSpec(str(LAUNCHER), f"lakecore-{job.value}-{table.name}",
                           (*head, *args), conf, py_files)


def ingest_spec(cfg: LakeConfig, table: TableSpec, run: RunInfo, day: date, *,
                overwrite: bool, merge_schema: bool = False,
                py_files: str | None = None) -> SparkSubmitSpec:
    """Write-only ingest of ``day``'s source; ``overwrite`` replaces exactly that partition;
    ``merge_schema`` adds the source's new columns first (``--merge-schema``)."""
    args = ["--source", table.source.path_for(day), "--source-format",
            table.source.format.value, "--commit-identifier", str(commit_identifier(day)),
            "--commit-user", run.commit_user(overwrite), "--table-option", "write-only=true"]
    for k, v in table.source.options.items():
        args += ["--source-option", f"{k}={v}"]
    if overwrite:
        spec = table.partition_spec(day)
        if not spec:
            raise ValueError(f"{table.name} has no date_partition to overwrite")
        for k, v in spec.items():
            args += ["--overwrite-partition", f"{k}={v}"]
    if merge_schema:
        args.append("--merge-schema")
    return _base(cfg, Job.INGEST, table, args, py_files)


def compact_spec(cfg: LakeConfig, table: TableSpec, *, strategy: CompactionStrategy,
                 partitions: Sequence[str] = (), parallelism: int | None = None,
                 commit_user: str | None = None, buckets: Sequence[str] | None = None,
                 py_files: str | None = None) -> SparkSubmitSpec:
    """The commit identifier stays the job's default (the snapshot it compacts), so a retry
    that finds its COMPACT committed stops; ``commit_user`` names the DAG run in history;
    ``buckets`` (``dt=2026-11-01:0``) limits the job to the buckets the plan chose."""
    args: list[str] = ["--commit-user", commit_user] if commit_user else []
    for b in buckets or ():
        args += ["--bucket", b]
    for p in partitions:
        args += ["--partition", p]
    if strategy is CompactionStrategy.FULL:
        args.append("--full")
    if parallelism:
        args += ["--parallelism", str(parallelism)]
    return _base(cfg, Job.COMPACT, table, args, py_files)


def maintain_spec(cfg: LakeConfig, table: TableSpec, step: MaintenanceStep, *,
                  dry_run: bool, older_than: str | None = None,
                  py_files: str | None = None) -> SparkSubmitSpec:
    args = [f"--{step.value}"]
    if step is MaintenanceStep.REMOVE_ORPHANS and older_than:
        args += ["--older-than", older_than]
    if dry_run:
        args.append("--dry-run")
    return _base(cfg, Job.MAINTAIN, table, args, py_files)


def parse_partition(text: str, keys: Sequence[str]) -> dict[str, str]:
    """``"dt=2026-11-01"`` (several keys joined by commas) -> a spec of partition keys; the
    Airflow-free copy of lakecore's ``parse_partition`` (same results, same errors)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        k, sep, v = item.partition("=")
        k, v = k.strip(), v.strip()
        if not sep or not k or not v:
            raise ValueError(f"partition {text!r}: expected KEY=VALUE[,KEY=VALUE]")
        if k not in keys:
            raise ValueError(f"partition {text!r}: {k!r} is not a partition key {list(keys)}")
        out[k] = v
    return out
