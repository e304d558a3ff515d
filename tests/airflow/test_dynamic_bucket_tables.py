"""Dynamic-bucket tables (``bucket: "-1"``, Paimon's default for a primary-key table) in the
tables file: declared and validated, never ingested twice at once by the DAGs, and shown on
the Lake tables page with their buckets per partition and row counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from fastapi.testclient import TestClient
from lake_airflow.config import LakeConfigError, parse_config
from lake_airflow.dag_support import one_ingest_at_a_time
from lake_airflow.demo import airflow_env
from lake_airflow.health.app import create_app
from lake_airflow.health.report import health_report
from lake_airflow.lock import LockTarget, ensure_lock_table
from lake_airflow.tables import ensure_table, open_catalog

from tests.airflow.conftest import REPO, run_python
from tests.airflow.test_health import fake_login


def tables_file(tmp: Path, dynamic: dict[str, Any] | None = None,
                pool: str | None = None) -> dict[str, Any]:
    """The repo's tables file plus a dynamic-bucket table ``shop.events``."""
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    data["tables"].append(dynamic or {
        "name": "shop.events",
        "columns": [{"name": "dt", "type": "STRING NOT NULL"},
                    {"name": "event_id", "type": "BIGINT NOT NULL"},
                    {"name": "kind", "type": "STRING"}],
        "primary_key": ["dt", "event_id"], "partition_keys": ["dt"], "date_partition": "dt",
        "options": {"bucket": "-1", "dynamic-bucket.target-row-num": "4"},
        "source": {"path": str(tmp / "landing" / "events" / "dt={date}")},
    })
    if pool:
        data.setdefault("airflow", {})["dynamic_bucket_pool"] = pool
    return data


ENV = {"LAKECORE_WAREHOUSE": "/wh", "LAKECORE_LANDING": "/land"}


def test_tables_file_declares_dynamic_bucket_tables(tmp_path: Path) -> None:
    cfg = parse_config(tables_file(tmp_path, pool="lake_dyn"), "t.yaml", ENV)
    assert cfg.table("shop.events").dynamic_bucket
    assert not cfg.table("shop.orders").dynamic_bucket  # bucket "2"
    assert cfg.dynamic_bucket_pool == "lake_dyn"
    unset = tables_file(tmp_path)
    del unset["tables"][-1]["options"]["bucket"]  # Paimon's default for a primary key: -1
    assert parse_config(unset, "t.yaml", ENV).table("shop.events").dynamic_bucket


def test_cross_partition_dynamic_table_is_refused_naming_the_fix(tmp_path: Path) -> None:
    data = tables_file(tmp_path)
    data["tables"][-1]["primary_key"] = ["event_id"]
    with pytest.raises(LakeConfigError) as info:
        parse_config(data, "t.yaml", ENV)
    text = str(info.value)
    assert "tables[shop.events].options.bucket" in text and "['dt']" in text
    assert "fixed number of buckets" in text


def test_only_dynamic_tables_are_ingested_one_at_a_time(tmp_path: Path) -> None:
    cfg = parse_config(tables_file(tmp_path, pool="lake_dyn"), "t.yaml", ENV)
    assert one_ingest_at_a_time(cfg, [cfg.table("shop.orders")]) == {}
    assert one_ingest_at_a_time(cfg, [cfg.table("shop.events")]) == {
        "max_active_tis_per_dag": 1, "max_active_tis_per_dagrun": 1, "pool": "lake_dyn"}


PARSE = r"""
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=DAGS)
out = {"errors": {k: str(v)[-500:] for k, v in bag.import_errors.items()}, "tasks": {}}
for dag_id in ("lakecore_ingest", "lakecore_backfill"):
    for t in bag.dags[dag_id].tasks:
        out["tasks"][f"{dag_id}.{t.task_id}"] = {
            "per_dag": t.max_active_tis_per_dag, "per_run": t.max_active_tis_per_dagrun,
            "pool": t.pool}
print("REPORT " + json.dumps(out))
"""


def test_dags_never_run_two_ingests_of_a_dynamic_table(tmp_path: Path) -> None:
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump(tables_file(tmp_path, pool="lake_dyn")))
    env = airflow_env(tmp_path / "home", tmp_path / "wh", tmp_path / "landing",
                      extra={"LAKECORE_TABLES_CONFIG": str(path)})
    out = run_python(PARSE.replace("DAGS", repr(str(REPO / "dags"))), env)
    report = json.loads([x for x in out.splitlines() if x.startswith("REPORT ")][-1][7:])
    assert report["errors"] == {}
    tasks = report["tasks"]
    events = tasks["lakecore_ingest.ingest_shop__events"]
    assert events["per_dag"] == 1 and events["pool"] == "lake_dyn"
    orders = tasks["lakecore_ingest.ingest_shop__orders"]
    assert orders["per_dag"] is None and orders["pool"] == "default_pool"
    backfill = tasks["lakecore_backfill.overwrite_partition"]  # shop.events may be chosen
    assert backfill["per_run"] == 1 and backfill["per_dag"] == 1
    assert backfill["pool"] == "lake_dyn"


def test_lake_tables_page_shows_buckets_per_partition(tmp_path: Path) -> None:
    cfg = parse_config(tables_file(tmp_path), "t.yaml",
                       {"LAKECORE_WAREHOUSE": str(tmp_path / "wh"),
                        "LAKECORE_LANDING": str(tmp_path / "landing")})
    lock = LockTarget(f"sqlite:///{tmp_path / 'locks.db'}", "lakecore_lock", "connection")
    ensure_lock_table(lock)
    catalog = open_catalog(cfg, lock)
    for spec in cfg.tables:
        ensure_table(catalog, spec)
    events = catalog.get_table("shop.events")
    wb = events.new_batch_write_builder()
    w = wb.new_write()
    ids = list(range(10)) + list(range(3))
    w.write_arrow(pa.table({"dt": ["2026-11-01"] * 10 + ["2026-11-02"] * 3,
                            "event_id": pa.array(ids, pa.int64()), "kind": ["k"] * 13}))
    wb.new_commit().commit(w.prepare_commit())
    catalog.close()

    report = health_report(cfg, lock_resolver=lambda _: lock)
    ev = next(t for t in report["tables"] if t["name"] == "shop.events")
    # target-row-num 4: 10 keys fill buckets 0 and 1 and put 2 in bucket 2
    assert ev["dynamic_buckets"] == [
        {"partition": "dt=2026-11-01", "buckets": 3, "keys": 10,
         "rows_per_bucket": {"0": 4, "1": 4, "2": 2}},
        {"partition": "dt=2026-11-02", "buckets": 1, "keys": 3, "rows_per_bucket": {"0": 3}},
    ]
    orders = next(t for t in report["tables"] if t["name"] == "shop.orders")
    assert orders["dynamic_buckets"] == []
    client = TestClient(create_app(fake_login, lambda: report))
    page = client.get("/", headers={"Authorization": "Bearer good-token"}).text
    assert "Dynamic buckets" in page
    assert "<td>dt=2026-11-01</td><td>3</td><td>10</td><td>0: 4, 1: 4, 2: 2</td>" in page


def test_lake_tables_page_shows_deleted_rows_per_bucket(tmp_path: Path) -> None:
    """A deletion-vector table: after an update of 1 of 10 keys and a compaction, the page
    shows per bucket the rows its vectors delete and the ratio (issue 13, item 4). (Under
    compaction.delete-ratio-threshold, 0.2, the file keeps its vector instead of a rewrite.)"""
    cfg = parse_config(tables_file(tmp_path, {
        "name": "shop.visits",
        "columns": [{"name": "dt", "type": "STRING NOT NULL"},
                    {"name": "id", "type": "BIGINT NOT NULL"},
                    {"name": "v", "type": "STRING"}],
        "primary_key": ["dt", "id"], "partition_keys": ["dt"], "date_partition": "dt",
        "options": {"bucket": "1", "deletion-vectors.enabled": "true"},
        "source": {"path": str(tmp_path / "landing" / "visits" / "dt={date}")},
    }), "t.yaml", {"LAKECORE_WAREHOUSE": str(tmp_path / "wh"),
                   "LAKECORE_LANDING": str(tmp_path / "landing")})
    lock = LockTarget(f"sqlite:///{tmp_path / 'locks.db'}", "lakecore_lock", "connection")
    ensure_lock_table(lock)
    catalog = open_catalog(cfg, lock)
    for spec in cfg.tables:
        ensure_table(catalog, spec)
    visits = catalog.get_table("shop.visits")
    for ids, v in ((list(range(10)), "a"), ([5], "b")):
        wb = visits.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.table({"dt": ["2026-11-01"] * len(ids),
                                "id": pa.array(ids, pa.int64()), "v": [v] * len(ids)}))
        wb.new_commit().commit(w.prepare_commit())  # a writer compacts level 0 at each commit
        w.close()
    catalog.close()

    report = health_report(cfg, lock_resolver=lambda _: lock)
    t = next(t for t in report["tables"] if t["name"] == "shop.visits")
    assert [(b["partition"], b["bucket"], b["deleted_rows"], b["rows"]) for b in
            t["deletion_vectors"]] == [("dt=2026-11-01", 0, 1, 10)]
    page = TestClient(create_app(fake_login, lambda: report)).get(
        "/", headers={"Authorization": "Bearer good-token"}).text
    assert "Deletion vectors (deleted rows per bucket)" in page
    assert "<td>dt=2026-11-01</td><td>0</td><td>1</td><td>1</td><td>10</td><td>10.0%</td>" in page
