"""Table config + run + Params -> spark-submit arguments, as plain data (no Spark, no Airflow)."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import yaml
from lake_airflow import spark_launch
from lake_airflow.config import CompactionStrategy, parse_config
from lake_airflow.lock import LockConfigError, LockTarget, url_from_connection
from lake_airflow.submit import (
    LAUNCHER,
    MaintenanceStep,
    RunInfo,
    commit_identifier,
    compact_spec,
    ingest_spec,
    maintain_spec,
    parse_partition,
)

REPO = Path(__file__).resolve().parents[2]
CFG = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                   "repo", {"LAKECORE_WAREHOUSE": "/wh", "LAKECORE_LANDING": "/land"})
ORDERS, CUSTOMERS = CFG.table("shop.orders"), CFG.table("shop.customers")


def run(run_id: str = "scheduled__2026-11-01T00:00:00+00:00", run_type: str = "scheduled",
        map_index: int = -1, clear_number: int = 0) -> RunInfo:
    return RunInfo("lakecore_ingest", "ingest_shop__orders", run_id, run_type,
                   datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC),
                   map_index, clear_number)


def pairs(args: tuple[str, ...], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_commit_user_is_per_run_and_retry_stable() -> None:
    a, retry = run(), run()
    assert a.commit_user() == retry.commit_user()  # a retry finds its own commit
    assert a.commit_user() == "airflow/lakecore_ingest/ingest_shop__orders/" \
                              "scheduled__2026-11-01T00:00:00+00:00"
    older = run("backfill__2026-10-01T00:00:00+00:00", "backfill")
    assert older.commit_user() != a.commit_user()  # out-of-order run: its own user
    assert run(map_index=0).commit_user().endswith("/0")
    assert run(map_index=3).commit_user() != run(map_index=4).commit_user()
    # an overwrite counts clears (Airflow's Backfill re-types and clears an existing run)
    assert run(clear_number=0).commit_user(True) != run(clear_number=1).commit_user(True)
    assert run(clear_number=1).commit_user() == run(clear_number=0).commit_user()


def test_run_day_prefers_logical_date() -> None:
    assert run().day == date(2026, 11, 1)
    no_logical = RunInfo("d", "t", "manual__x", "manual", None,
                         datetime(2026, 11, 3, 23, tzinfo=UTC))
    assert no_logical.day == date(2026, 11, 3)
    assert run("backfill__x", "backfill").is_backfill and not run().is_backfill
    assert commit_identifier(date(2026, 11, 1)) == 20261101


def test_ingest_spec_write_only_and_overwrite() -> None:
    spec = ingest_spec(CFG, ORDERS, run(), date(2026, 11, 1), overwrite=False, py_files="z.zip")
    a = spec.application_args
    assert spec.application == str(LAUNCHER) and a[0] == "ingest"
    assert pairs(a, "--table") == ["shop.orders"] and pairs(a, "--warehouse") == ["/wh"]
    assert pairs(a, "--source") == ["/land/orders/dt=2026-11-01"]
    assert pairs(a, "--source-format") == ["parquet"]
    assert pairs(a, "--commit-identifier") == ["20261101"]
    assert pairs(a, "--commit-user") == [run().commit_user()]
    assert pairs(a, "--table-option") == ["write-only=true"]
    assert pairs(a, "--catalog-option") == ["lock.enabled=true"]
    assert "--overwrite-partition" not in a and "--merge-schema" not in a
    merged = ingest_spec(CFG, ORDERS, run(), date(2026, 11, 1), overwrite=False,
                         merge_schema=True)
    flags = list(merged.application_args)
    flags.remove("--merge-schema")
    assert flags == list(a)
    assert spec.py_files == "z.zip" and spec.name == "lakecore-ingest-shop.orders"
    assert spec.conf["spark.pyspark.python"] and spec.conf["spark.sql.shuffle.partitions"] == "4"
    over = ingest_spec(CFG, ORDERS, run(), date(2026, 11, 1), overwrite=True)
    assert pairs(over.application_args, "--overwrite-partition") == ["dt=2026-11-01"]
    assert pairs(over.application_args, "--commit-user") == [run().commit_user(True)]
    with pytest.raises(ValueError, match="no date_partition"):
        ingest_spec(CFG, CUSTOMERS, run(), date(2026, 11, 1), overwrite=True)


def test_no_secret_in_any_argument() -> None:
    for spec in (ingest_spec(CFG, ORDERS, run(), date(2026, 11, 1), overwrite=True),
                 compact_spec(CFG, ORDERS, strategy=CompactionStrategy.FULL),
                 maintain_spec(CFG, ORDERS, MaintenanceStep.EXPIRE_SNAPSHOTS, dry_run=False)):
        text = " ".join(spec.application_args) + repr(spec.conf) + repr(spec.env_vars)
        assert "lock.uri" not in text and "postgres" not in text


def test_compact_and_maintain_specs() -> None:
    c = compact_spec(CFG, ORDERS, strategy=CompactionStrategy.FULL,
                     partitions=["dt=2026-11-01"], parallelism=3).application_args
    assert c[0] == "compact" and "--full" in c
    assert pairs(c, "--partition") == ["dt=2026-11-01"] and pairs(c, "--parallelism") == ["3"]
    u = compact_spec(CFG, ORDERS, strategy=CompactionStrategy.UNIVERSAL,
                     commit_user="airflow/d/t/r").application_args
    assert "--full" not in u and "--parallelism" not in u
    assert pairs(u, "--commit-user") == ["airflow/d/t/r"] and "--commit-identifier" not in u
    assert "--bucket" not in u  # no plan: every bucket the job's strategy picks
    b = compact_spec(CFG, ORDERS, strategy=CompactionStrategy.UNIVERSAL,
                     buckets=["dt=2026-11-01:0", "dt=2026-11-02:1"]).application_args
    assert pairs(b, "--bucket") == ["dt=2026-11-01:0", "dt=2026-11-02:1"]
    steps = [maintain_spec(CFG, ORDERS, s, dry_run=True, older_than="2 d").application_args
             for s in MaintenanceStep]
    assert [s[7] for s in steps] == ["--expire-partitions", "--expire-snapshots",
                                     "--remove-orphans"]
    assert all("--dry-run" in s for s in steps)
    assert pairs(steps[2], "--older-than") == ["2 d"] and "--older-than" not in steps[0]
    assert [s.task_id for s in MaintenanceStep] == ["expire_partitions", "expire_snapshots",
                                                    "remove_orphans"]


def test_machine_spark_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKECORE_SPARK_CONF", '{"spark.ui.enabled": false}')
    spec = compact_spec(CFG, ORDERS, strategy=CompactionStrategy.UNIVERSAL)
    assert spec.conf["spark.ui.enabled"] == "False"


def test_parse_partition() -> None:
    assert parse_partition("dt=2026-11-01", ["dt"]) == {"dt": "2026-11-01"}
    with pytest.raises(ValueError, match="not a partition key"):
        parse_partition("id=1", ["dt"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_partition("dt", ["dt"])


def test_lock_urls_from_connections() -> None:
    assert url_from_connection("postgres", "db", "airflow", "s3cret", 5432, "airflow") == \
        "postgresql+psycopg://airflow:s3cret@db:5432/airflow"
    assert url_from_connection("mysql", "m", "root", None, None, "t") == "mysql+pymysql://root@m/t"
    assert url_from_connection("sqlite", "/x/locks.db", None, None, None, None) == \
        "sqlite:////x/locks.db"
    assert url_from_connection("sqlite", None, None, None, None, "/y.db") == "sqlite:////y.db"
    assert url_from_connection("http", None, None, None, None, None,
                               {"sqlalchemy_url": "sqlite:////z.db"}) == "sqlite:////z.db"
    with pytest.raises(LockConfigError, match="http"):
        url_from_connection("http", "h", None, "pw", None, None)
    with pytest.raises(LockConfigError) as e:
        url_from_connection("sqlite", None, None, "pw", None, None)
    assert "pw" not in str(e.value)
    t = LockTarget("postgresql+psycopg://a:s3cret@db/airflow", "lakecore_lock", "connection")
    assert t.dialect == "postgresql" and "s3cret" not in t.describe()


def test_launcher_moves_the_lock_url_from_env_to_the_job() -> None:
    env = {"LAKECORE_LOCK_URI": "postgresql://a:pw@db/x", "OTHER": "1"}
    job, args = spark_launch.job_argv(["ingest", "--table", "db.t"], env)
    assert job == "ingest"
    assert args == ["--table", "db.t", "--catalog-option", "lock.uri=postgresql://a:pw@db/x"]
    assert "LAKECORE_LOCK_URI" not in env  # not inherited by anything the driver starts
    assert spark_launch.job_argv(["maintain"], {})[1] == []
    with pytest.raises(SystemExit):
        spark_launch.job_argv(["drop-everything"], {})
    assert os.path.exists(LAUNCHER)
