"""``SparkSubmitOperator``s that run lakecore's Spark jobs for one declared table.

Each operator turns (table config, DAG run, Params) into a ``SparkSubmitSpec`` when its
templates are rendered, so the UI's *Rendered Template* view shows the exact spark-submit
arguments; the catalog lock's URL is added only to the spark-submit process environment when
the job starts, never to a field Airflow stores or shows. The job's one JSON summary line is
parsed from its output, logged and returned (XCom ``return_value``).

A job that committed emits one asset event for its table (``lake_airflow.assets``) with the
snapshots, commit kinds, rows and partitions in its extra; an ingest or backfill of a table
with ``partition.end-input-to-done`` first marks the partition it wrote done
(``partition.mark-done-action``: ``_SUCCESS`` and/or the done-partition record).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import AssetAlias
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from lake_airflow.assets import commit_alias, compaction_asset, emit, event_extra, lakecore_asset
from lake_airflow.config import CompactionStrategy, LakeConfig, TableSpec, load_config
from lake_airflow.lock import LOCK_URI_ENV, mask_catalog_options, resolve_lock
from lake_airflow.spark_launch import CATALOG_OPTIONS_ENV
from lake_airflow.submit import (
    LAUNCHER,
    MaintenanceStep,
    RunInfo,
    SparkSubmitSpec,
    compact_spec,
    default_py_files,
    ingest_spec,
    maintain_spec,
)

SUMMARY_PREFIX = '{"job"'
SCHEDULED_RUN_TYPE = "scheduled"  # DagRunType.SCHEDULED
# job errors that a retry cannot fix (bad input, a table or declaration that must change):
# lakecore's validation errors, and these Python ones
_NOT_TRANSIENT = ("FileNotFoundError", "ValueError", "KeyError", "TypeError",
                  "AnalysisException", "IllegalArgumentException")


@contextmanager
def _secret_in_environment(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in this process's environment while spark-submit starts from it.

    spark-submit inherits it, and in client mode so does the Spark driver (the only process
    that commits, so the only one that needs the lock). Nothing Airflow stores or shows (the
    rendered fields, the command line it logs) contains it; the provider's ``env_vars`` would
    put it on the command line as ``--conf`` on YARN and Kubernetes."""
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def not_transient(error: str) -> bool:
    """Whether a job's one-line error (``SomeError: message``) is one a retry cannot fix."""
    name = error.partition(":")[0].strip().rpartition(".")[2]
    if not name:
        return False
    if name in _NOT_TRANSIENT:
        return True
    import lakecore.errors as errors

    kind = getattr(errors, name, None)
    return isinstance(kind, type) and issubclass(kind, errors.LakecoreValidationError)


def skip(context: Mapping[str, Any], reason: str) -> AirflowSkipException:
    """The exception to raise to skip a task; the reason is logged and kept as the XCom
    ``skipped_reason`` (the UI and the demo show it)."""
    logging.getLogger("lake_airflow").info("skipping: %s", reason)
    context["ti"].xcom_push(key="skipped_reason", value=reason)
    return AirflowSkipException(reason)


def selected_tables(params: Mapping[str, Any], cfg: LakeConfig) -> list[str]:
    """The ``tables`` Param (empty or absent: every declared table)."""
    chosen = params.get("tables") or []
    return list(chosen) or cfg.table_names


def budget_deadline(context: Mapping[str, Any]) -> datetime | None:
    """When the run's ``time_budget_minutes`` Param runs out, counted from when its
    ``prepare`` task started (its return value carries the wall clock; a DAG run's own
    start_date is its logical date under ``dag.test()``)."""
    minutes = context["params"].get("time_budget_minutes")
    if not minutes:
        return None
    prepared = context["ti"].xcom_pull(task_ids="prepare") or {}
    started = prepared.get("started_at") if isinstance(prepared, dict) else None
    start = datetime.fromisoformat(started) if started else context["dag_run"].start_date
    if start is None:
        return None
    return start + timedelta(minutes=int(minutes))


class LakeSparkSubmitOperator(SparkSubmitOperator):
    """Base: ``table`` (templated) names a table of ``lakecore_tables.yaml``."""

    template_fields = (*SparkSubmitOperator.template_fields, "table")
    ui_color = "#cfe8ff"

    def __init__(self, *, table: str, **kwargs: Any) -> None:
        cfg = load_config()
        kwargs.setdefault("conn_id", cfg.spark.conn_id)
        kwargs.setdefault("name", "lakecore")
        if cfg.spark.driver_memory:
            kwargs.setdefault("driver_memory", cfg.spark.driver_memory)
        if cfg.spark.executor_memory:
            kwargs.setdefault("executor_memory", cfg.spark.executor_memory)
        # where its commits are events: the table's asset when known at parse time, else the
        # backfill's alias (a Param table)
        kwargs.setdefault("outlets", [self.outlet(table, cfg) if "{{" not in table
                                      else commit_alias(None)])
        super().__init__(application=str(LAUNCHER), **kwargs)
        self.table = table
        self.lock_conn_id = cfg.lock_conn_id
        self.summary: dict[str, Any] | None = None
        self._deadline: float | None = None
        self._over_budget = False
        self._applied = False

    job_label = "job"

    @staticmethod
    def outlet(table: str, cfg: LakeConfig) -> Any:
        """This task's outlet for a table known at parse time: an Asset is listed as produced
        by the task and gets an event whenever the task succeeds (so a task that committed
        nothing is skipped); an alias only when the task adds one."""
        return commit_alias(table)

    # -- the plan ------------------------------------------------------------------------
    def build_spec(self, context: Mapping[str, Any], cfg: LakeConfig,
                   table: TableSpec) -> SparkSubmitSpec:
        raise NotImplementedError

    def check_skip(self, context: Mapping[str, Any], cfg: LakeConfig) -> None:
        """Raise AirflowSkipException (after logging why) when there is nothing to do."""
        if self.table not in selected_tables(context["params"], cfg):
            raise skip(context, f"{self.table} is not in this run's 'tables' Param")

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)
        self._apply_spec(context)

    def _apply_spec(self, context: Any) -> None:
        """Put the plan into the provider's fields (at render time, so the UI shows it; a
        mapped task is rendered by its MappedOperator, so execute() applies it then)."""
        self._applied = True
        cfg = load_config()
        spec = self.build_spec(context, cfg, cfg.table(self.table))
        self.application = spec.application
        self.application_args = list(spec.application_args)
        self.conf = {**dict(spec.conf), **dict(self.conf or {})}
        self.py_files = self.py_files or spec.py_files or default_py_files()
        self.name = spec.name
        if spec.env_vars:
            self.env_vars = {**dict(spec.env_vars), **dict(self.env_vars or {})}

    # -- running -------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any] | None:  # type: ignore[override]
        cfg = load_config()
        self.check_skip(context, cfg)
        if not self._applied:
            self._apply_spec(context)
        mask_catalog_options(dict(cfg.catalog_options))
        if cfg.conditional_put:
            lock_url = None
            self.log.info("lakecore job for %s; commits with conditional writes, no catalog "
                          "lock", self.table)
        else:
            lock = resolve_lock(self.lock_conn_id)
            lock_url = lock.url
            self.log.info("lakecore job for %s; catalog lock in the %s", self.table,
                          lock.describe())
        timer = self._arm_budget()
        try:
            with _secret_in_environment(LOCK_URI_ENV, lock_url), _secret_in_environment(
                    CATALOG_OPTIONS_ENV, json.dumps(dict(cfg.catalog_options))):
                super().execute(context)
        except Exception:
            if self._over_budget:
                raise skip(context, f"stopped {self.table}: the run's time budget ran out; "
                           "the job was killed (an interrupted compaction leaves the table "
                           "as it was)") from None
            if self.summary:
                self.log.error("job summary: %s", json.dumps(self.summary))
                error = str(self.summary.get("error") or "")
                if not_transient(error):
                    raise AirflowFailException(f"{self.table}: {error} (not transient: not "
                                               "retried)") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
        self.report(self.summary or {})
        self.after_commit(context, cfg, self.summary or {})
        return self.summary

    def report(self, summary: Mapping[str, Any]) -> None:
        self.log.info("lakecore %s summary: %s", self.table, json.dumps(summary, default=str))

    # -- after the job: done marks and the asset event ----------------------------------
    def committed_snapshots(self, summary: Mapping[str, Any]) -> list[int]:
        """The snapshot ids the job committed (its summary, or each step's)."""
        ids = [int(i) for i in summary.get("snapshot_ids") or []]
        for step in summary.get("steps") or []:
            ids += [int(i) for i in step.get("snapshot_ids") or []]
        return sorted(set(ids))

    def partitions_to_mark(self, context: Mapping[str, Any], cfg: LakeConfig
                           ) -> list[dict[str, str]]:
        """The partitions this run completed (the ingest's date partition); none here."""
        return []

    def after_commit(self, context: Mapping[str, Any], cfg: LakeConfig,
                     summary: Mapping[str, Any]) -> None:
        from lake_airflow.changes import mark_done, snapshot_changes
        from lake_airflow.tables import get_table, open_catalog

        ids = self.committed_snapshots(summary)
        to_mark = self.partitions_to_mark(context, cfg)
        direct = not isinstance(self.outlets[0], AssetAlias)
        if not ids and not to_mark:
            self._nothing_committed(context, summary, direct)
            return
        catalog = open_catalog(cfg)
        try:
            table = get_table(catalog, self.table)
            if table is None:
                return
            done = []
            if to_mark and table.options.partition_end_input_to_done:
                actions = ",".join(a.value for a in table.options.partition_mark_done_actions)
                for spec in to_mark:
                    paths = mark_done(table, spec, ids[-1] if ids else None)
                    label = "/".join(f"{k}={v}" for k, v in spec.items())
                    done.append(label)
                    self.log.info("%s: partition %s marked done (%s): %s", self.table, label,
                                  actions, ", ".join(paths))
            changes = snapshot_changes(table, ids)
        finally:
            catalog.close()
        if not ids:
            self._nothing_committed(context, summary, direct)
            return
        run = {"dag_id": context["dag_run"].dag_id, "task_id": context["ti"].task_id,
               "run_id": context["dag_run"].run_id, "commit_user": summary.get("commit_user")}
        extra = event_extra(table=self.table, job=self.event_job(context, summary),
                            snapshots=changes, run=run, done=done)
        emit(context, self.outlets[0], self.table, extra, cfg)
        self.log.info("%s: asset event %s", self.table, json.dumps(extra))

    def event_job(self, context: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
        """The event's ``job``: what the task is, in the words of its DAG."""
        return str(summary.get("job", ""))

    def _nothing_committed(self, context: Mapping[str, Any], summary: Mapping[str, Any],
                           direct: bool) -> None:
        why = (summary.get("skipped_reason") or ("its commit was already there (an earlier "
               "attempt of this run made it)" if summary.get("skipped") else "no commit"))
        if direct:  # an asset outlet would get an event on success: skip instead
            raise skip(context, f"{self.table}: nothing committed ({why}), no asset event")
        self.log.info("%s: nothing committed (%s), no asset event", self.table, why)

    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        process = hook._process_spark_submit_log
        hook._process_spark_submit_log = lambda itr: process(self._tap(itr))  # type: ignore[method-assign]
        return hook

    def _tap(self, lines: Iterator[str]) -> Iterator[str]:
        for line in lines:
            text = line.strip()
            if text.startswith(SUMMARY_PREFIX):
                try:
                    self.summary = json.loads(text)
                except ValueError:
                    pass
            yield line

    def _arm_budget(self) -> threading.Timer | None:
        if self._deadline is None:
            return None
        remaining = self._deadline - time.time()
        timer = threading.Timer(max(0.0, remaining), self._budget_exhausted)
        timer.daemon = True
        timer.start()
        return timer

    def _budget_exhausted(self) -> None:
        self._over_budget = True
        self.log.warning("time budget exhausted: stopping the Spark job of %s", self.table)
        if self._hook is not None:
            self._hook.on_kill()


class LakeIngestOperator(LakeSparkSubmitOperator):
    """Write-only ingest of one run's partition date.

    ``partition_date`` (YYYY-MM-DD, templated/mappable) is the backfill DAG's explicit date;
    without it the run's logical date is used, and a run of type *backfill* (Airflow's
    built-in Backfill) atomically overwrites exactly that partition. The run's
    ``merge_schema`` Param (default off) passes ``--merge-schema``: new source columns are
    added to the table before the write instead of failing it.
    """

    template_fields = (*LakeSparkSubmitOperator.template_fields, "partition_date")

    def __init__(self, *, partition_date: str | None = None, overwrite: bool | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.partition_date = partition_date
        self.overwrite = overwrite

    @staticmethod
    def outlet(table: str, cfg: LakeConfig) -> Any:
        return lakecore_asset(table, cfg)

    def event_job(self, context: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
        """``backfill`` for the backfill DAG's overwrites and Airflow's Backfill runs."""
        if self.partition_date or RunInfo.from_context(context).is_backfill:
            return "backfill"
        return "ingest"

    def build_spec(self, context: Mapping[str, Any], cfg: LakeConfig,
                   table: TableSpec) -> SparkSubmitSpec:
        run = RunInfo.from_context(context)
        day = date.fromisoformat(str(self.partition_date)) if self.partition_date else run.day
        overwrite = self.overwrite if self.overwrite is not None else run.is_backfill
        if overwrite and not table.date_partition:
            # no partition to replace: the sequence.field makes a replayed batch harmless
            overwrite = False
        merge_schema = bool((context.get("params") or {}).get("merge_schema", False))
        return ingest_spec(cfg, table, run, day, overwrite=overwrite, merge_schema=merge_schema)

    def check_skip(self, context: Mapping[str, Any], cfg: LakeConfig) -> None:
        """Beyond the run's ``check`` task (a cleared task runs without it): no Spark start
        for a missing landing folder; fail at once, without retry."""
        from lake_airflow.checks import RunRefused, check_sources

        super().check_skip(context, cfg)
        table = cfg.table(self.table)
        day = (date.fromisoformat(str(self.partition_date)) if self.partition_date
               else RunInfo.from_context(context).day)
        try:
            check_sources([table], day)
        except RunRefused as e:
            raise AirflowFailException(str(e)) from None

    def partitions_to_mark(self, context: Mapping[str, Any], cfg: LakeConfig
                           ) -> list[dict[str, str]]:
        """A run writes its date partition whole (the day's extract, or a backfill's
        replacement): once committed, that partition is complete."""
        table = cfg.table(self.table)
        day = (date.fromisoformat(str(self.partition_date)) if self.partition_date
               else RunInfo.from_context(context).day)
        spec = table.partition_spec(day)
        return [spec] if spec and len(spec) == len(table.partition_keys) else []

    def report(self, summary: Mapping[str, Any]) -> None:
        if summary.get("skipped"):
            self.log.info("%s: (%s, %s) was already committed by an earlier attempt of this "
                          "run; nothing was written", self.table, summary.get("commit_user"),
                          summary.get("commit_identifier"))
        else:
            self.log.info("%s: %s rows -> snapshot(s) %s", self.table, summary.get("rows"),
                          summary.get("snapshot_ids"))
        super().report(summary)


class LakeCompactOperator(LakeSparkSubmitOperator):
    """Dedicated compaction of one table, shaped by the compaction DAG's Params; its commits
    are events of the table's compaction asset, so they never schedule compaction."""

    @staticmethod
    def outlet(table: str, cfg: LakeConfig) -> Any:
        return compaction_asset(table, cfg)

    def build_spec(self, context: Mapping[str, Any], cfg: LakeConfig,
                   table: TableSpec) -> SparkSubmitSpec:
        p = context["params"]
        group, _, _ = self.task_id.rpartition(".")
        plan_task = f"{group}.plan" if group else "plan"
        plan = context["ti"].xcom_pull(task_ids=plan_task) if "ti" in context else None
        buckets = plan.get("buckets") if isinstance(plan, dict) else None
        return compact_spec(cfg, table, strategy=CompactionStrategy(p.get("strategy",
                                                                          "universal")),
                            partitions=list(p.get("partitions") or []),
                            parallelism=p.get("parallelism"),
                            commit_user=RunInfo.from_context(context).commit_user(),
                            buckets=buckets)

    def check_skip(self, context: Mapping[str, Any], cfg: LakeConfig) -> None:
        super().check_skip(context, cfg)
        deadline = budget_deadline(context)
        if deadline is not None:
            remaining = (deadline - datetime.now(deadline.tzinfo)).total_seconds()
            if remaining <= 0:
                raise skip(context, f"{self.table}: the run's time budget of "
                           f"{context['params']['time_budget_minutes']} min is used up; "
                           "left for the next run")
            self._deadline = time.time() + remaining

    def report(self, summary: Mapping[str, Any]) -> None:
        if summary.get("skipped"):
            self.log.info("%s: nothing compacted: %s", self.table, summary.get("skipped_reason"))
        else:
            self.log.info("%s: compacted %s bucket(s), %s -> %s files, snapshot(s) %s",
                          self.table, summary.get("buckets"), summary.get("files_before"),
                          summary.get("files"), summary.get("snapshot_ids"))
        super().report(summary)


def maintenance_dry_run(context: Mapping[str, Any], cfg: LakeConfig) -> bool:
    """A scheduled run follows the tables file's ``maintenance.dry_run``; any other run (one
    you trigger, a backfill) its ``dry_run`` Param, which defaults to a dry run."""
    if RunInfo.from_context(context).run_type == SCHEDULED_RUN_TYPE:
        return cfg.maintenance.dry_run
    return bool((context.get("params") or {}).get("dry_run", True))


class LakeMaintainOperator(LakeSparkSubmitOperator):
    """One maintenance step (expire snapshots / partitions, remove orphans) of one table."""

    template_fields = (*LakeSparkSubmitOperator.template_fields, "step")

    def __init__(self, *, step: MaintenanceStep | str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = MaintenanceStep(step).value

    def build_spec(self, context: Mapping[str, Any], cfg: LakeConfig,
                   table: TableSpec) -> SparkSubmitSpec:
        p = context["params"]
        return maintain_spec(cfg, table, MaintenanceStep(self.step),
                             dry_run=maintenance_dry_run(context, cfg),
                             older_than=p.get("orphan_older_than") or
                             cfg.maintenance.orphan_older_than)

    def check_skip(self, context: Mapping[str, Any], cfg: LakeConfig) -> None:
        super().check_skip(context, cfg)
        scheduled = RunInfo.from_context(context).run_type == SCHEDULED_RUN_TYPE
        dry = maintenance_dry_run(context, cfg)
        self.log.info("%s: %s (%s)", self.table, "dry run, nothing is deleted" if dry
                      else "deletes what it reports", "a scheduled run: the tables file's "
                      "maintenance.dry_run" if scheduled else "the run's 'Dry run' Param")

    def report(self, summary: Mapping[str, Any]) -> None:
        for step in summary.get("steps", []):
            shown = {k: v for k, v in step.items() if k not in ("plan", "paths")}
            self.log.info("%s %s report: %s", self.table, step.get("operation"),
                          json.dumps(shown, default=str))
        super().report(summary)
