"""Run lakecore DAGs through Airflow without the scheduler deciding when (``make demo``, the
end-to-end tests): the run is created here, the way ``dag.test()`` creates one, and driven to
its end by the same loop; runs of type *backfill* come from Airflow's own Backfill machinery
(``_create_backfill``).

    python -m lake_airflow.localrun '{"dag": "lakecore_ingest", "date": "2026-11-01"}' ...

Each argument is one run: ``dag``, optional ``date`` (logical date, YYYY-MM-DD), ``conf``
(the run's Params), ``run_id`` (default ``manual__<logical date>``, as the UI names a run it
triggers for that date; a repeated date is a rerun of the same DAG run), ``backfill: true``
(a Backfill of that date: run id ``backfill__<date>``) and ``mark_success`` (a regex of task
ids marked successful instead of run, as ``dag.test(mark_success_pattern=...)``, e.g. to run
only a DAG's ``prepare``). The runs execute in order; each prints one line ``LAKE-RUN {json}``
with the run's state, its task instances and their return values. Exit status 1 if a run did
not succeed. Airflow must be configured by the environment (AIRFLOW_HOME, the metadata DB, the
dags/plugins folders).

With an api-server configured (``AIRFLOW__CORE__EXECUTION_API_SERVER_URL``, as
``lake_airflow.stack`` sets) the tasks run on the LocalExecutor exactly as the scheduler runs
them: a supervised process per task, its start and end recorded by the Execution API, its log
written under ``base_log_folder`` where the UI reads it. Without one they run in this process
(``dag.test()``'s way: faster, but no task log files). Either way a run starts when it starts:
its start date is the wall clock, not its logical date.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

RESULT_PREFIX = "LAKE-RUN "
log = logging.getLogger("lake_airflow.localrun")


def _day(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def load_dags() -> dict[str, Any]:
    from airflow.configuration import conf
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=conf.get("core", "dags_folder"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    return bag.dags


_synced: list[bool] = []


def sync_dags() -> None:
    """Serialize the DAGs into the metadata DB (what the dag-processor does), once a process."""
    if _synced:
        return
    _synced.append(True)
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path,
                           bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)


def create_run(dag: Any, day: datetime | None, conf: dict[str, Any] | None,
               run_id: str | None = None) -> str:
    """A manual DagRun of ``dag`` for logical date ``day`` (replacing one of that date, as
    ``dag.test()`` does), started now; returns its run id."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType
    from sqlalchemy import false, or_, select

    sync_dags()
    now = datetime.now(UTC)
    run_id = run_id or f"manual__{(day or now).isoformat()}"
    interval = (coerce_to_core_timetable(dag.timetable).infer_manual_data_interval(run_after=day)
                if day else None)
    assert settings.Session is not None, "Airflow's ORM is not configured"
    session = settings.Session()
    try:
        same = DagRun.logical_date == day if day else false()
        for old in session.scalars(select(DagRun).where(
                DagRun.dag_id == dag.dag_id, or_(DagRun.run_id == run_id, same))).all():
            session.delete(old)
        session.commit()
        scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
        scheduler_dag.create_dagrun(
            run_id=run_id, logical_date=day, data_interval=interval, run_after=now, conf=conf,
            run_type=DagRunType.MANUAL, state=DagRunState.RUNNING,
            triggered_by=DagRunTriggeredByType.TEST, triggering_user_name="localrun",
            start_date=now, session=session)
        session.commit()
        return run_id
    finally:
        session.close()


def _drive(dag: Any, run_id: str, mark_success: str | None = None) -> None:
    """Run an existing DagRun to completion from this process, as ``dag.test()`` does: on the
    LocalExecutor when an api-server is configured, else in this process."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert settings.Session is not None, "Airflow's ORM is not configured"
    session = settings.Session()
    dr = session.scalars(select(DagRun).where(DagRun.dag_id == dag.dag_id,
                                              DagRun.run_id == run_id)).one()
    dr.dag = scheduler_dag
    dr.state = DagRunState.RUNNING
    dr.start_date = datetime.now(UTC)
    session.commit()
    marked = re.compile(mark_success) if mark_success else None
    runner = (_ExecutorRunner() if os.environ.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL")
              else _InProcessRunner(dag))
    try:
        while dr.state == DagRunState.RUNNING:
            session.expire_all()
            schedulable, _ = dr.update_state(session=session)
            for ti in schedulable:
                if ti.state != TaskInstanceState.UP_FOR_RESCHEDULE:
                    ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
                ti.scheduled_dttm = datetime.now(UTC)
            session.commit()
            scheduled = [t for t in dr.get_task_instances(session=session)
                         if t.state == TaskInstanceState.SCHEDULED]
            for ti in scheduled:
                if marked is not None and marked.fullmatch(ti.task_id):
                    ti.set_state(TaskInstanceState.SUCCESS, session=session)
                    session.commit()
                else:
                    runner.run(ti, session)
            runner.poll(session)
    finally:
        runner.end()
        session.close()


class _InProcessRunner:
    """Each task in this process, one after the other (``dag.test()``)."""

    def __init__(self, dag: Any) -> None:
        self.dag = dag

    def run(self, ti: Any, session: Any) -> None:
        from airflow.sdk.definitions.dag import _run_task
        from airflow.utils.state import State, TaskInstanceState

        try:
            _run_task(ti=ti, task=self.dag.task_dict[ti.task_id], run_triggerer=True)
        except Exception:
            log.exception("task %s failed", ti.task_id)
            if ti.state not in State.finished:
                ti.set_state(TaskInstanceState.FAILED)

    def poll(self, session: Any) -> None:
        pass

    def end(self) -> None:
        pass


class _ExecutorRunner:
    """Tasks as the scheduler runs them: workloads queued on the configured executor
    (LocalExecutor), its events processed by the scheduler's own code."""

    def __init__(self) -> None:
        from airflow.executors.base_executor import ExecutorLoader

        self.executor = ExecutorLoader.get_default_executor()
        self.executor.start()

    def run(self, ti: Any, session: Any) -> None:
        from airflow.executors import workloads
        from airflow.utils.state import TaskInstanceState

        if self.executor.has_task(ti):
            return
        workload = workloads.ExecuteTask.make(ti, generator=self.executor.jwt_generator)
        self.executor.queue_workload(workload, session=session)
        ti.state = TaskInstanceState.QUEUED
        session.commit()

    def poll(self, session: Any) -> None:
        from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
        from airflow.models.dagbag import DBDagBag

        self.executor.heartbeat()
        session.expire_all()
        SchedulerJobRunner.process_executor_events(
            executor=self.executor, job_id=None, scheduler_dag_bag=DBDagBag(), session=session)
        time.sleep(1)

    def end(self) -> None:
        self.executor.end()


def run_backfill(dag: Any, day: datetime, conf: dict[str, Any] | None) -> str:
    """A Backfill of one logical date, created the way the UI and REST API create one,
    then run here; returns the run id."""
    from airflow.models.backfill import (
        Backfill,
        BackfillDagRun,
        ReprocessBehavior,
        _create_backfill,
    )
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    sync_dags()
    backfill = _create_backfill(dag_id=dag.dag_id, from_date=day, to_date=day,
                                max_active_runs=1, reverse=False, dag_run_conf=conf,
                                triggering_user_name="localrun",
                                reprocess_behavior=ReprocessBehavior.COMPLETED)
    with create_session() as session:
        run_ids = session.scalars(
            select(DagRun.run_id).join(BackfillDagRun, BackfillDagRun.dag_run_id == DagRun.id)
            .where(BackfillDagRun.backfill_id == backfill.id)).all()
    if len(run_ids) != 1:
        raise RuntimeError(f"backfill {backfill.id} created {len(run_ids)} runs")
    try:
        _drive(dag, run_ids[0])
    finally:
        with create_session() as session:  # what the scheduler does when the runs end
            b = session.get(Backfill, backfill.id)
            if b is not None:
                b.completed_at = datetime.now(UTC)
    return run_ids[0]


def describe_run(dag_id: str, run_id: str) -> dict[str, Any]:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        dr = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id,
                                                  DagRun.run_id == run_id)).one()
        tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id,
                                                         TaskInstance.run_id == run_id)).all()
        tasks = []
        for ti in sorted(tis, key=lambda t: (t.start_date or datetime.max.replace(tzinfo=UTC),
                                             t.task_id, t.map_index)):
            query = select(XComModel.key, XComModel.value).where(
                XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                XComModel.task_id == ti.task_id, XComModel.map_index == ti.map_index)
            xcoms: dict[str, Any] = dict(session.execute(query).all())
            tasks.append({
                "task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state),
                "try_number": ti.try_number,
                "start": ti.start_date.isoformat() if ti.start_date else None,
                "end": ti.end_date.isoformat() if ti.end_date else None,
                "return_value": _json(xcoms.get("return_value")),
                "skipped_reason": _json(xcoms.get("skipped_reason")),
            })
        run_type = str(getattr(dr.run_type, "value", dr.run_type))
        return {"dag_id": dag_id, "run_id": run_id, "run_type": run_type,
                "state": str(dr.state), "logical_date": dr.logical_date.isoformat()
                if dr.logical_date else None, "clear_number": dr.clear_number,
                "tasks": tasks}


def _json(value: Any) -> Any:
    """XCom values as stored: JSON text, or already decoded by the column type."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def run(spec: dict[str, Any], dags: dict[str, Any]) -> dict[str, Any]:
    dag = dags[spec["dag"]]
    day = _day(spec.get("date"))
    conf = spec.get("conf") or None
    if spec.get("backfill"):
        if day is None:
            raise ValueError("a backfill run needs a date")
        run_id = run_backfill(dag, day, conf)
        return describe_run(dag.dag_id, run_id)
    run_id = create_run(dag, day, conf, spec.get("run_id"))
    _drive(dag, run_id, spec.get("mark_success"))
    return describe_run(dag.dag_id, run_id)


def main(argv: Sequence[str] | None = None) -> int:
    specs = [json.loads(a) for a in (sys.argv[1:] if argv is None else argv)]
    dags = load_dags()
    ok = True
    for spec in specs:
        result = run(spec, dags)
        ok = ok and result["state"] == "success"
        print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
