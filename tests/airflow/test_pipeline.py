"""End to end: every lakecore DAG run by Airflow itself (``dag.test()``, and Airflow's own
Backfill for runs of type *backfill*) against real local Spark (``spark-submit`` on local[2])
and a real metadata DB, SQLite and PostgreSQL; table contents checked against a model of the
sources after every run.

Each spark-submit costs 30-40 s here, so the runs are few and each checks a lot: the SQLite
scenario runs every DAG and both kinds of backfill; the PostgreSQL one runs every DAG too, with
an ingest and a compaction of one table overlapping in time."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lake_airflow.demo import (
    airflow_env,
    customers_state,
    expected_customers,
    expected_orders,
    orders_state,
    read_table,
    write_customers,
    write_orders,
)

from lakecore import CatalogFactory
from tests.airflow.conftest import migrate_db

pytestmark = pytest.mark.slow
D1, D2 = "2026-11-01", "2026-11-02"
RESULT = "LAKE-RUN "


class Lake:
    """An Airflow home + warehouse + landing, and DAG runs in subprocesses."""

    def __init__(self, tmp: Path, db_url: str | None = None, lock_url: str | None = None):
        self.home, self.warehouse, self.landing = tmp / "airflow", tmp / "wh", tmp / "landing"
        self.home.mkdir(parents=True)
        self.env = airflow_env(self.home, self.warehouse, self.landing, db_url=db_url,
                               lock_url=lock_url)
        self.output: list[str] = []
        migrate_db(self.env)

    def start(self, *specs: dict[str, Any]) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "lake_airflow.localrun", *map(json.dumps, specs)]
        return subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def finish(self, proc: subprocess.Popen[str], check: bool = True) -> list[dict[str, Any]]:
        out, _ = proc.communicate(timeout=900)
        self.output.append(out)
        runs = [json.loads(x[len(RESULT):]) for x in out.splitlines() if x.startswith(RESULT)]
        if check:
            assert proc.returncode == 0 and all(r["state"] == "success" for r in runs), \
                out[-8000:]
        return runs

    def run(self, *specs: dict[str, Any], check: bool = True) -> list[dict[str, Any]]:
        return self.finish(self.start(*specs), check)

    def table(self, name: str) -> Any:
        return CatalogFactory.create({"warehouse": str(self.warehouse)}).get_table(name)

    def read(self, name: str) -> pa.Table:
        return read_table(str(self.warehouse), name)

    def snapshots(self, name: str) -> list[tuple[int, str, str]]:
        sm = self.table(name).snapshot_manager
        return [(s.id, s.commit_kind.value, s.commit_user) for s in sm.snapshots()]


def task(run: dict[str, Any], task_id: str, map_index: int = -1) -> dict[str, Any]:
    return next(t for t in run["tasks"] if t["task_id"] == task_id
                and t["map_index"] == map_index)


def window(t: dict[str, Any]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(t["start"]), datetime.fromisoformat(t["end"])


def ingest(date: str, *tables: str) -> dict[str, Any]:
    return {"dag": "lakecore_ingest", "date": date, "conf": {"tables": list(tables)}}


def backfill(table: str, start: str, end: str) -> dict[str, Any]:
    return {"dag": "lakecore_backfill", "date": "2026-11-20",
            "conf": {"table": table, "start_date": start, "end_date": end}}


def check_maintenance(run: dict[str, Any], slug: str, expired: int) -> None:
    steps = [task(run, f"{slug}.{s}") for s in ("expire_partitions", "expire_snapshots",
                                                 "remove_orphans")]
    assert [t["state"] for t in steps] == ["success"] * 3
    for before, after in zip(steps, steps[1:]):  # in that order, one after the other
        assert window(before)[1] <= window(after)[0]
    reports = [t["return_value"]["steps"][0] for t in steps]
    assert [r["operation"] for r in reports] == ["expire-partitions", "expire-snapshots",
                                                 "remove-orphan-files"]
    assert "partition.expiration-time is not set" in reports[0]["skipped"]
    assert reports[1]["snapshots_removed"] == expired
    assert reports[2]["files_removed"] == 0  # nothing unreferenced is older than a day


def test_every_dag_on_sqlite(tmp_path: Path, spark_zip: Path) -> None:
    lake = Lake(tmp_path)
    write_orders(lake.landing, D1)
    write_customers(lake.landing, D1, 0)
    write_customers(lake.landing, D2, 1)
    # one Airflow process for a sequence of runs (each process costs ~15 s to start)
    r1, r2, r3, r4, r5, bad = lake.run(
        ingest(D1, "shop.orders", "shop.customers"),
        ingest(D2, "shop.customers"),
        ingest(D2, "shop.customers"),  # a rerun of the same run
        {"dag": "lakecore_compaction", "date": "2026-11-03"},
        {"dag": "lakecore_maintenance", "date": "2026-11-03",
         "conf": {"tables": ["shop.customers"], "dry_run": False}},
        backfill("shop.orders", D2, D1),  # invalid: end before start
        check=False)
    assert [r["state"] for r in (r1, r2, r3, r4, r5)] == ["success"] * 5

    # ingest D1: both tables, created by `prepare`; the lock table beside the metadata DB
    assert task(r1, "prepare")["return_value"]["tables"] == {
        "shop.orders": "created", "shop.customers": "created"}
    for name in ("ingest_shop__orders", "ingest_shop__customers"):
        assert task(r1, name)["return_value"]["snapshot_ids"] == [1]
    assert orders_state(lake.read("shop.orders")) == expected_orders({D1: 1})
    locks = sqlite3.connect(lake.home / "lakecore_locks.db")
    assert locks.execute("SELECT name FROM sqlite_master WHERE name = "
                         "'paimon_distributed_locks'").fetchall()
    meta = sqlite3.connect(lake.home / "airflow.db")
    assert not meta.execute("SELECT name FROM sqlite_master WHERE name = "
                            "'paimon_distributed_locks'").fetchall()

    # ingest D2 (customers: updates and deletes), then a rerun of the same run
    assert task(r2, "ingest_shop__customers")["return_value"]["snapshot_ids"] == [2]
    assert "not in this run's 'tables'" in task(r2, "ingest_shop__orders")["skipped_reason"]
    assert r3["run_id"] == r2["run_id"]
    again = task(r3, "ingest_shop__customers")  # nothing committed twice: no event either
    assert again["state"] == "skipped" and "commit was already there" in again["skipped_reason"]

    # compaction: orders has nothing to compact (skipped, with the reason), customers has
    assert task(r4, "shop__orders.plan")["state"] == "skipped"
    assert "not past num-sorted-run.compaction-trigger (5)" in \
        task(r4, "shop__orders.plan")["skipped_reason"]
    assert task(r4, "shop__orders.compact")["state"] == "skipped"
    compacted = task(r4, "shop__customers.compact")["return_value"]
    assert compacted["snapshot_ids"] == [3] and compacted["buckets"] == 2
    assert compacted["commit_user"] == \
        f"airflow/lakecore_compaction/shop__customers.compact/{r4['run_id']}"

    # maintenance: the three steps in order; customers keeps 2 snapshots (max 2)
    check_maintenance(r5, "shop__customers", expired=1)
    history = lake.snapshots("shop.customers")
    assert [(s[0], s[1]) for s in history] == [(2, "APPEND"), (3, "COMPACT")]
    assert customers_state(lake.read("shop.customers")) == expected_customers(2)

    # the backfill DAG: bad Params fail before any Spark job; good ones tag, then overwrite
    assert bad["state"] == "failed" and task(bad, "plan_partitions")["state"] == "failed"
    assert task(bad, "overwrite_partition")["state"] == "upstream_failed"
    write_orders(lake.landing, D1, version=2)
    (r6,) = lake.run(backfill("shop.orders", D1, D1))
    assert task(r6, "plan_partitions")["return_value"] == [D1]
    tag = task(r6, "tag_before_backfill")["return_value"]
    assert tag["snapshot_id"] == 1 and tag["name"].startswith(f"backfill-{D1}_{D1}_")
    assert task(r6, "overwrite_partition", 0)["return_value"]["snapshot_ids"] == [2]
    assert lake.snapshots("shop.orders")[-1][1] == "OVERWRITE"
    assert orders_state(lake.read("shop.orders")) == expected_orders({D1: 2})

    # Airflow's own Backfill of the ingest DAG: the D1 run is re-typed as a backfill and
    # atomically overwrites exactly its partition (v2's extra orders gone, removed ones back)
    write_orders(lake.landing, D1, version=1)
    (r7,) = lake.run({**ingest(D1, "shop.orders"), "backfill": True})
    assert r7["run_type"] == "backfill" and r7["run_id"] == r1["run_id"]
    assert task(r7, "ingest_shop__orders")["return_value"]["snapshot_ids"] == [3]
    assert lake.snapshots("shop.orders")[-1][1] == "OVERWRITE"
    assert orders_state(lake.read("shop.orders")) == expected_orders({D1: 1})
    assert customers_state(lake.read("shop.customers")) == expected_customers(2)


def test_every_dag_on_postgres_with_overlapping_runs(tmp_path: Path, spark_zip: Path,
                                                     pg_database: str) -> None:
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    secret = "lock-pw-5e1f"  # trust auth ignores it; it must never be printed
    lock_url = make_url(pg_database).set(password=secret).render_as_string(hide_password=False)
    lake = Lake(tmp_path, db_url=pg_database, lock_url=lock_url)
    write_customers(lake.landing, D1, 0)
    write_customers(lake.landing, D2, 1)
    write_orders(lake.landing, D1)

    first, rerun = lake.run(ingest(D1, "shop.customers"), ingest(D1, "shop.customers"))
    assert task(first, "ingest_shop__customers")["return_value"]["snapshot_ids"] == [1]
    again = task(rerun, "ingest_shop__customers")  # the rerun committed nothing: no event
    assert again["state"] == "skipped" and "commit was already there" in again["skipped_reason"]
    assert [s[0] for s in lake.snapshots("shop.customers")] == [1]
    engine = create_engine(pg_database)
    assert inspect(engine).has_table("paimon_distributed_locks")  # in the metadata DB
    assert inspect(engine).has_table("dag_run")
    engine.dispose()

    # an ingest run and a compaction run of the same table, at the same time
    compaction = lake.start({"dag": "lakecore_compaction", "date": "2026-11-03",
                             "conf": {"tables": ["shop.customers"], "strategy": "full"}})
    ingesting = lake.start(ingest(D2, "shop.customers"))
    (rc,), (ri,) = lake.finish(compaction), lake.finish(ingesting)
    compact_t, ingest_t = task(rc, "shop__customers.compact"), task(ri, "ingest_shop__customers")
    (c0, c1), (i0, i1) = window(compact_t), window(ingest_t)
    assert max(c0, i0) < min(c1, i1), "the two Spark jobs did not overlap"
    history = lake.snapshots("shop.customers")
    assert [s[0] for s in history] == [1, 2, 3]  # linear: one snapshot per commit
    assert sorted(s[1] for s in history[1:]) == ["APPEND", "COMPACT"]
    assert customers_state(lake.read("shop.customers")) == expected_customers(2)  # no row lost

    rm, rb = lake.run({"dag": "lakecore_maintenance", "date": "2026-11-03",
                       "conf": {"tables": ["shop.customers"], "dry_run": False}},
                      backfill("shop.orders", D1, D1))
    check_maintenance(rm, "shop__customers", expired=1)
    assert customers_state(lake.read("shop.customers")) == expected_customers(2)

    assert task(rb, "tag_before_backfill")["return_value"] is None  # empty table: no tag
    assert task(rb, "overwrite_partition", 0)["return_value"]["snapshot_ids"] == [1]
    assert orders_state(lake.read("shop.orders")) == expected_orders({D1: 1})
    assert not any(secret in out for out in lake.output)
