"""Data-aware scheduling with a real Airflow: api-server, scheduler (LocalExecutor) and
triggerer processes (``lake_airflow.stack``) on SQLite, the metadata DB ``make demo`` runs
this stack on.

* An ingest's asset event makes **Airflow's scheduler** queue a run of the downstream DAG
  ``lakecore_orders_report`` (nobody triggers it), and that run reads exactly the snapshot the
  event names: the rows of the partition the commit touched, as of that snapshot.
* ``lakecore_partition_ready``'s deferrable sensor waits in the **triggerer** (its trigger row
  is claimed by the triggerer process) and completes when a backfill marks the partition
  done (``_SUCCESS`` and the done-partition record).
* The compaction DAG skips a table's buckets outside its off-peak window, saying why, and
  compacts exactly the bucket that reached ``num-sorted-run.stop-trigger``.

The writers run in-process (``lake_airflow.localrun``) while their DAGs stay paused, so the
scheduler only runs what the asset events and the sensor DAG give it.

One metadata DB is enough here: what these tests are about (the asset events our commits
emit, the report reading the event's snapshot, the trigger, the compaction plan) goes through
Airflow's ORM and is the same on any DB. What PostgreSQL changes for lakecore (the lock table
in the metadata DB, every DAG run against it, concurrent jobs of one table) is
``test_pipeline.test_every_dag_on_postgres_with_overlapping_runs`` and ``tests/lock``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from lake_airflow.assets import asset_name
from lake_airflow.config import parse_config
from lake_airflow.demo import customer_changes, orders_extract, write_orders
from lake_airflow.stack import AirflowStack
from lake_airflow.tables import ensure_table, open_catalog
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from lakecore.maintenance.inspect import inspect_table
from tests.airflow.conftest import REPO
from tests.airflow.test_pipeline import Lake, task

pytestmark = pytest.mark.slow
D1, D2, D3 = "2026-11-01", "2026-11-02", "2026-11-03"
DOWNSTREAM = ["lakecore_orders_report", "lakecore_partition_ready"]


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 240,
             every: float = 1.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


class Meta:
    """Read-only queries on the Airflow metadata DB."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(url)

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as c:
            return list(c.execute(text(sql), params).all())

    def runs(self, dag_id: str) -> list[Any]:
        return self.rows("SELECT run_id, run_type, state FROM dag_run WHERE dag_id = :d "
                         "ORDER BY id", d=dag_id)

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        got = self.rows("SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r AND "
                        "task_id = :t AND key = 'return_value'", d=dag_id, r=run_id, t=task_id)
        return _json(got[0][0]) if got else None

    def events(self, name: str) -> list[dict[str, Any]]:
        got = self.rows("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                        "WHERE a.name = :n ORDER BY e.id", n=name)
        return [_json(r[0]) for r in got]

    def finished_run(self, dag_id: str, n: int) -> Any:
        """The n-th (1-based) run of ``dag_id``, once it finished (fails on a failed run)."""
        runs = self.runs(dag_id)
        if len(runs) < n or runs[n - 1].state not in ("success", "failed"):
            return None
        assert runs[n - 1].state == "success", (dag_id, runs[n - 1])
        return runs[n - 1]


@pytest.fixture
def stack(tmp_path: Path, spark_zip: Path) -> Iterator[tuple[Lake, AirflowStack, Meta]]:
    lake = Lake(tmp_path)
    db_url = f"sqlite:///{lake.home / 'airflow.db'}"
    st = AirflowStack(lake.env, tmp_path / "logs", unpause=DOWNSTREAM)
    st.start()
    meta = Meta(db_url)
    try:
        yield lake, st, meta
    finally:
        st.stop()
        meta.engine.dispose()


def test_asset_events_drive_the_report_and_the_sensor(
        stack: tuple[Lake, AirflowStack, Meta]) -> None:
    lake, st, meta = stack
    for day in (D1, D2, D3):
        write_orders(lake.landing, day)
    uri = asset_name("shop.orders")

    # a sensor for D3 waits in the triggerer (no worker slot) before any data exists
    st.airflow("dags", "trigger", "lakecore_partition_ready", "-c",
               json.dumps({"table": "shop.orders", "partition": f"dt={D3}"}))
    claimed = wait_for("the triggerer to claim the sensor's trigger", lambda: meta.rows(
        "SELECT t.triggerer_id FROM trigger t JOIN task_instance ti ON ti.trigger_id = t.id "
        "WHERE ti.dag_id = 'lakecore_partition_ready' AND ti.state = 'deferred' "
        "AND t.classpath = 'lake_airflow.sensors.LakePartitionTrigger' "
        "AND t.triggerer_id IS NOT NULL"))
    assert claimed

    # ingest D1 -> an asset event -> the scheduler queues and runs the report DAG
    (r1,) = lake.run({"dag": "lakecore_ingest", "date": D1, "conf": {"tables": ["shop.orders"]}})
    assert task(r1, "ingest_shop__orders")["return_value"]["snapshot_ids"] == [1]
    run1 = wait_for("the report run for snapshot 1",
                    lambda: meta.finished_run("lakecore_orders_report", 1))
    assert run1.run_type == "asset_triggered"
    (e1,) = meta.events(uri)
    assert e1["snapshot_ids"] == [1] and e1["commit_kind"] == "APPEND"
    assert e1["rows"] == 200 and e1["partitions"] == [f"dt={D1}"]
    assert e1["partitions_done"] == [f"dt={D1}"] and e1["job"] == "ingest"
    rep1 = meta.xcom("lakecore_orders_report", run1.run_id, "report")
    assert rep1["snapshot_id"] == 1 and rep1["partitions"] == {f"dt={D1}": 200}

    # ingest D2: the second run reads snapshot 2 and only the partition it touched
    lake.run({"dag": "lakecore_ingest", "date": D2, "conf": {"tables": ["shop.orders"]}})
    run2 = wait_for("the report run for snapshot 2",
                    lambda: meta.finished_run("lakecore_orders_report", 2))
    rep2 = meta.xcom("lakecore_orders_report", run2.run_id, "report")
    assert rep2["snapshot_id"] == 2 and rep2["partitions"] == {f"dt={D2}": 200}
    assert rep2["rows"] == 400  # the table as of snapshot 2: both days, nothing later
    assert [r.run_type for r in meta.runs("lakecore_orders_report")] == ["asset_triggered"] * 2

    # the sensor is still waiting: D3 is not done; a backfill of D3 marks it done
    assert meta.runs("lakecore_partition_ready")[0].state == "running"
    write_orders(lake.landing, D3, version=2)
    (rb,) = lake.run({"dag": "lakecore_backfill", "date": "2026-11-20",
                      "conf": {"table": "shop.orders", "start_date": D3, "end_date": D3}})
    assert task(rb, "overwrite_partition", 0)["state"] == "success"
    done = lake.warehouse / "shop.db" / "orders" / f"dt={D3}" / "_SUCCESS"
    assert set(json.loads(done.read_text())) == {"creationTime", "modificationTime"}
    ready = wait_for("the sensor DAG run to finish",
                     lambda: meta.finished_run("lakecore_partition_ready", 1))
    found = meta.xcom("lakecore_partition_ready", ready.run_id, "wait")
    assert found["condition"] == "done" and found["partition"] == f"dt={D3}"
    assert found["done_partition"] == f"dt={D3}.done" and found["snapshot_id"] == 3
    reported = meta.xcom("lakecore_partition_ready", ready.run_id, "report")
    assert reported["partitions"] == {f"dt={D3}": orders_extract(D3, 2).num_rows}
    # the backfill's OVERWRITE is an event too, and queued a third report
    kinds = [(e["commit_kind"], e["job"]) for e in meta.events(uri)]
    assert kinds == [("APPEND", "ingest"), ("APPEND", "ingest"), ("OVERWRITE", "backfill")]
    run3 = wait_for("the report run for the backfill",
                    lambda: meta.finished_run("lakecore_orders_report", 3))
    rep3 = meta.xcom("lakecore_orders_report", run3.run_id, "report")
    assert rep3["snapshot_id"] == 3 and rep3["commit_kinds"] == ["OVERWRITE"]


def test_compaction_skips_outside_the_window_and_compacts_at_the_stop_trigger(
        tmp_path: Path, spark_zip: Path) -> None:
    """shop.customers with a window two hours from now and a stop trigger of 4 runs."""
    hour = datetime.now().hour
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    customers = next(t for t in data["tables"] if t["name"] == "shop.customers")
    customers["options"].update({
        "compaction.offpeak.start.hour": str((hour + 2) % 24),
        "compaction.offpeak.end.hour": str((hour + 4) % 24),
        "num-sorted-run.stop-trigger": "4"})
    tables = tmp_path / "tables.yaml"
    tables.write_text(yaml.safe_dump(data))
    lake = Lake(tmp_path / "lake")
    lake.env["LAKECORE_TABLES_CONFIG"] = str(tables)
    cfg = parse_config(data, str(tables), {"LAKECORE_WAREHOUSE": str(lake.warehouse)})
    ensure_table(open_catalog(cfg), cfg.table("shop.customers"))
    table = lake.table("shop.customers").copy({"write-only": "true"})

    def commit(rows: list[dict[str, Any]]) -> None:
        batch = pa.Table.from_pylist(rows)
        batch = batch.set_column(3, "updated_at", batch["updated_at"].cast(pa.timestamp("us")))
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(batch)
        wb.new_commit().commit(w.prepare_commit())

    for k in range(3):  # three level-0 runs in both buckets: past trigger 1, below stop 4
        commit(customer_changes(k))
    (r1,) = lake.run({"dag": "lakecore_compaction", "date": "2026-11-05",
                      "conf": {"tables": ["shop.customers"]}})
    plan = task(r1, "shop__customers.plan")
    assert plan["state"] == "skipped"
    assert plan["skipped_reason"].count("outside the off-peak") == 2
    assert f"off-peak {(hour + 2) % 24:02d}:00-{(hour + 4) % 24:02d}:00" in \
        plan["skipped_reason"]
    assert task(r1, "shop__customers.compact")["state"] == "skipped"
    assert [s[1] for s in lake.snapshots("shop.customers")] == ["APPEND"] * 3

    commit([{"customer_id": 7, "name": "late", "city": "Oslo",
             "updated_at": "2026-11-04T10:00:00", "op": "+U"}])  # one more run, one bucket
    (r2,) = lake.run({"dag": "lakecore_compaction", "date": "2026-11-06",
                      "conf": {"tables": ["shop.customers"]}})
    decisions = task(r2, "shop__customers.plan")["return_value"]["decisions"]
    by_bucket = {d["bucket"]: d for d in decisions}
    hot = next(b for b, d in by_bucket.items() if d["compact"])
    assert "4 sorted run(s)" in by_bucket[hot]["reason"]
    assert "reached num-sorted-run.stop-trigger (4)" in by_bucket[hot]["reason"]
    (cold,) = [b for b in by_bucket if b != hot]
    assert not by_bucket[cold]["compact"]
    assert "outside the off-peak" in by_bucket[cold]["reason"]
    compacted = task(r2, "shop__customers.compact")["return_value"]
    assert compacted["buckets"] == 1 and compacted["snapshot_ids"] == [5]
    levels = {b["bucket"]: b["level0_files"]
              for b in inspect_table(lake.table("shop.customers"))["buckets"]}
    assert levels == {hot: 0, cold: 3}  # exactly the bucket at the stop trigger
    # the COMPACT commit is an event of the compaction asset only: it schedules nothing
    meta = Meta(f"sqlite:///{lake.home / 'airflow.db'}")
    (ev,) = meta.events(asset_name("shop.customers") + "/compactions")
    assert ev["commit_kind"] == "COMPACT" and "rows" not in ev and ev["partitions"] == []
    assert ev["records_merged_away"] >= 0 and "data unchanged" in ev["summary"]
    assert meta.events(asset_name("shop.customers")) == []
    meta.engine.dispose()
