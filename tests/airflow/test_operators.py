"""The operators' decisions without Spark: which arguments a run gets (a backfill run
overwrites its partition), the compaction time budget (skip when used up, stop a job that
overruns it), and the job summary parsed from spark-submit's output."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.airflow.conftest import REPO

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="lakecore-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from airflow.sdk.exceptions import AirflowSkipException  # noqa: E402
from lake_airflow.config import load_config  # noqa: E402
from lake_airflow.operators import (  # noqa: E402
    LakeCompactOperator,
    LakeIngestOperator,
    budget_deadline,
)


@pytest.fixture(autouse=True)
def tables_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKECORE_TABLES_CONFIG", str(REPO / "dags" / "lakecore_tables.yaml"))
    monkeypatch.setenv("LAKECORE_WAREHOUSE", "/wh")
    monkeypatch.setenv("LAKECORE_LANDING", "/land")


@dataclass
class TI:
    task_id: str
    map_index: int = -1
    prepared: dict[str, Any] | None = None
    pushed: dict[str, Any] = field(default_factory=dict)

    def xcom_pull(self, task_ids: str) -> Any:
        assert task_ids == "prepare"
        return self.prepared

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@dataclass
class DagRun:
    run_type: str
    run_id: str = "scheduled__2026-11-01T00:00:00+00:00"
    dag_id: str = "lakecore_ingest"
    logical_date: datetime | None = datetime(2026, 11, 1, tzinfo=UTC)
    run_after: datetime = datetime(2026, 11, 2, tzinfo=UTC)
    clear_number: int = 0
    start_date: datetime | None = None


def context(task_id: str, run_type: str = "scheduled", params: dict[str, Any] | None = None,
            prepared: dict[str, Any] | None = None, **run: Any) -> dict[str, Any]:
    return {"ti": TI(task_id, prepared=prepared), "dag_run": DagRun(run_type, **run),
            "params": params or {}}


def args_of(op: Any) -> list[str]:
    return list(op.application_args)


def test_a_backfill_run_overwrites_exactly_its_partition() -> None:
    op = LakeIngestOperator(task_id="ingest_shop__orders", table="shop.orders")
    op._apply_spec(context("ingest_shop__orders"))
    assert "--overwrite-partition" not in args_of(op) and "--merge-schema" not in args_of(op)
    op = LakeIngestOperator(task_id="ingest_shop__orders", table="shop.orders")
    op._apply_spec(context("ingest_shop__orders", params={"merge_schema": True}))
    assert args_of(op)[-1] == "--merge-schema"  # the run's merge_schema Param
    op = LakeIngestOperator(task_id="ingest_shop__orders", table="shop.orders")
    op._apply_spec(context("ingest_shop__orders", "backfill", clear_number=1,
                           run_id="scheduled__2026-11-01T00:00:00+00:00"))
    a = args_of(op)
    assert a[a.index("--overwrite-partition") + 1] == "dt=2026-11-01"
    assert a[a.index("--commit-user") + 1].endswith("/overwrite-1")
    assert op.application.endswith("spark_launch.py") and op.name == \
        "lakecore-ingest-shop.orders"
    # a table without a date partition appends even in a backfill (sequence.field)
    op = LakeIngestOperator(task_id="ingest_shop__customers", table="shop.customers")
    op._apply_spec(context("ingest_shop__customers", "backfill"))
    assert "--overwrite-partition" not in args_of(op)


def test_the_backfill_dags_explicit_date() -> None:
    op = LakeIngestOperator(task_id="overwrite_partition", table="shop.orders",
                            partition_date="2026-10-05", overwrite=True)
    op._apply_spec(context("overwrite_partition", "manual"))
    a = args_of(op)
    assert a[a.index("--source") + 1] == "/land/orders/dt=2026-10-05"
    assert a[a.index("--overwrite-partition") + 1] == "dt=2026-10-05"
    assert a[a.index("--commit-identifier") + 1] == "20261005"


def test_budget_counts_from_prepare() -> None:
    started = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    ctx = context("x.compact", params={"time_budget_minutes": 30},
                  prepared={"started_at": started.isoformat()})
    assert budget_deadline(ctx) == started + timedelta(minutes=30)
    assert budget_deadline(context("x.compact", params={})) is None


def test_compaction_skips_when_the_budget_is_used_up() -> None:
    op = LakeCompactOperator(task_id="compact", table="shop.customers")
    long_ago = (datetime.now(UTC) - timedelta(hours=3)).isoformat()
    ctx = context("shop__customers.compact", params={"time_budget_minutes": 60},
                  prepared={"started_at": long_ago})
    with pytest.raises(AirflowSkipException, match="time budget of 60 min is used up"):
        op.check_skip(ctx, load_config())
    assert "time budget" in ctx["ti"].pushed["skipped_reason"]
    recent = datetime.now(UTC).isoformat()
    ctx = context("shop__customers.compact", params={"time_budget_minutes": 60},
                  prepared={"started_at": recent})
    op.check_skip(ctx, load_config())
    assert op._deadline is not None and 3500 < op._deadline - time.time() <= 3600
    with pytest.raises(AirflowSkipException, match="not in this run's 'tables'"):
        op.check_skip(context("c", params={"tables": ["shop.orders"]}),
                      load_config())


def test_a_job_overrunning_the_budget_is_stopped() -> None:
    op = LakeCompactOperator(task_id="compact", table="shop.customers")
    killed = threading.Event()

    class Hook:
        def on_kill(self) -> None:
            killed.set()

    op._hook = Hook()  # type: ignore[assignment]
    op._deadline = time.time() + 0.2
    timer = op._arm_budget()
    assert timer is not None and killed.wait(5) and op._over_budget


def test_summary_line_is_parsed_from_the_job_output() -> None:
    op = LakeCompactOperator(task_id="compact", table="shop.customers")
    lines = ["26/11/22 WARN something\n",
             '{"job": "compact", "status": "ok", "snapshot_ids": [4], "buckets": 2}\n',
             "shutdown hook\n"]
    assert list(op._tap(iter(lines))) == lines
    assert op.summary == {"job": "compact", "status": "ok", "snapshot_ids": [4], "buckets": 2}


def test_backfill_tag_name() -> None:
    from lake_airflow.tasks import tag_name

    name = tag_name("manual__2026-11-06T00:00:00+00:00", "2026-11-01", "2026-11-02")
    assert name == "backfill-2026-11-01_2026-11-02_manual__2026-11-06T00-00-00-00-00"


def test_maintenance_dry_run_by_run_type() -> None:
    """A run you trigger is dry unless its Param says otherwise; a scheduled run follows the
    tables file (maintenance.dry_run: false in the repo's file)."""
    from lake_airflow.operators import maintenance_dry_run

    cfg = load_config()
    assert cfg.maintenance.dry_run is False
    assert maintenance_dry_run(context("t", "manual"), cfg) is True
    assert maintenance_dry_run(context("t", "manual", {"dry_run": False}), cfg) is False
    assert maintenance_dry_run(context("t", "scheduled", {"dry_run": True}), cfg) is False


def test_job_errors_a_retry_cannot_fix() -> None:
    from lake_airflow.operators import not_transient

    assert not_transient("SchemaError: column 'x' is not in the table")
    assert not_transient("lakecore.errors.PartitionValueError: bad partition")
    assert not_transient("FileNotFoundError: /landing/orders/dt=2026-11-02")
    assert not not_transient("CommitRetryableError: lost the race 10 times")
    assert not not_transient("CatalogLockTimeoutError: held by pid=7")
    assert not not_transient("ConnectionResetError: peer reset")
    assert not not_transient("")
