"""Evolving a table from the tables file: the prepare step's ALTER (``ensure_tables``) on a
real warehouse, and once through Airflow itself (``dag.test()`` on SQLite)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from lake_airflow.config import LakeConfig, parse_config
from lake_airflow.demo import airflow_env, read_table
from lake_airflow.tables import TableMismatchError, ensure_table, ensure_tables, open_catalog

from lakecore import CatalogFactory
from tests.airflow.conftest import migrate_db

REPO = Path(__file__).resolve().parents[2]
ORDERS, CUSTOMERS = "shop.orders", "shop.customers"


def tables_file() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    assert isinstance(data, dict)
    return data


def declared(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in data["tables"] if t["name"] == name)


def evolved(data: dict[str, Any]) -> dict[str, Any]:
    """shop.orders with a new column in the middle, one at the end, a widened type, a comment
    and a changed option: every kind of change the tables file may make."""
    data = copy.deepcopy(data)
    t = declared(data, ORDERS)
    cols = t["columns"]
    cols[3] = {"name": "amount", "type": "DOUBLE", "description": "order total"}
    cols.insert(4, {"name": "currency", "type": "STRING"})
    cols.append({"name": "channel", "type": "STRING", "description": "web or shop"})
    t["options"]["snapshot.num-retained.max"] = "5"
    return data


def narrowed(data: dict[str, Any]) -> dict[str, Any]:
    """Incompatible: customer_id BIGINT -> INT, and the status column dropped."""
    data = copy.deepcopy(data)
    cols = declared(data, ORDERS)["columns"]
    cols[2] = {"name": "customer_id", "type": "INT"}
    del cols[4]
    return data


def config(data: dict[str, Any], tmp: Path) -> LakeConfig:
    return parse_config(data, "test", {"LAKECORE_WAREHOUSE": str(tmp / "wh"),
                                       "LAKECORE_LANDING": str(tmp / "landing")})


def write_order(warehouse: Path) -> None:
    table = CatalogFactory.create({"warehouse": str(warehouse), "lock.enabled": "false"}
                                  ).get_table(ORDERS)
    rows = pa.table({"dt": ["2026-11-01"], "order_id": [1], "customer_id": [7],
                     "amount": [9.5], "status": ["new"],
                     "updated_at": pa.array([None], pa.timestamp("us"))})
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(rows)
    wb.new_commit().commit(w.prepare_commit())


def schema_of(warehouse: Path, name: str) -> Any:
    return CatalogFactory.create({"warehouse": str(warehouse)}).get_table(name).schema


def test_a_compatible_declaration_alters_an_incompatible_one_changes_nothing(
        tmp_path: Path) -> None:
    base = tables_file()
    cfg = config(base, tmp_path)
    wh = tmp_path / "wh"
    catalog = open_catalog(cfg)
    try:
        assert ensure_tables(catalog, list(cfg.tables)) == {ORDERS: "created",
                                                            CUSTOMERS: "created"}
        write_order(wh)
        assert ensure_table(catalog, cfg.table(ORDERS)) == "exists"

        # incompatible (orders) beside compatible (customers gains a column): nothing changes
        bad = narrowed(base)
        declared(bad, CUSTOMERS)["columns"].append({"name": "email", "type": "STRING"})
        with pytest.raises(TableMismatchError) as e:
            ensure_tables(catalog, list(config(bad, tmp_path).tables))
        text = str(e.value)
        assert "'shop.orders'" in text and "column 'customer_id'" in text
        assert "BIGINT -> INT is not a widening" in text and "column 'status'" in text
        assert schema_of(wh, ORDERS).id == 0 and schema_of(wh, CUSTOMERS).id == 0

        # compatible: one ALTER, new schema exactly the declaration, the row still there
        good = config(evolved(base), tmp_path)
        assert ensure_tables(catalog, list(good.tables)) == {ORDERS: "altered",
                                                             CUSTOMERS: "exists"}
        schema = schema_of(wh, ORDERS)
        assert schema.id == 1
        assert schema.field_names == ["dt", "order_id", "customer_id", "amount", "currency",
                                      "status", "updated_at", "channel"]
        assert schema.row_type.field("amount").description == "order total"
        assert schema.options["snapshot.num-retained.max"] == "5"
        assert ensure_table(catalog, good.table(ORDERS)) == "exists"
        rows = read_table(str(wh), ORDERS)
        assert rows.column_names == schema.field_names and rows["currency"].to_pylist() == [None]
        assert rows["order_id"].to_pylist() == [1]

        # the bucket count of a table holding data cannot change
        more = evolved(base)
        declared(more, ORDERS)["options"]["bucket"] = "4"
        with pytest.raises(TableMismatchError, match="option 'bucket': 2 -> 4"):
            ensure_table(catalog, config(more, tmp_path).table(ORDERS))
        assert schema_of(wh, ORDERS).id == 1
    finally:
        catalog.close()


@pytest.mark.slow
def test_prepare_step_alters_or_fails_in_airflow(tmp_path: Path) -> None:
    """The ingest DAG's ``prepare`` in ``dag.test()`` on SQLite (ingest tasks marked
    successful): a compatible change is an ALTER, an incompatible one fails the task once
    (no retry) with the message, the table unchanged."""
    base = tables_file()
    cfg = config(base, tmp_path)
    wh = tmp_path / "wh"
    catalog = open_catalog(cfg)
    try:
        ensure_tables(catalog, list(cfg.tables))
    finally:
        catalog.close()
    write_order(wh)
    home = tmp_path / "airflow"
    home.mkdir()
    tables = tmp_path / "tables.yaml"
    env = airflow_env(home, wh, tmp_path / "landing",
                      extra={"LAKECORE_TABLES_CONFIG": str(tables)})
    tables.write_text(yaml.safe_dump(base))
    migrate_db(env)

    def prepare(data: dict[str, Any], date: str) -> dict[str, Any]:
        tables.write_text(yaml.safe_dump(data))
        # the ingest's first task refuses a date without landing data (checks.py); the ingest
        # itself is marked successful, so an empty partition folder is enough
        (tmp_path / "landing" / "orders" / f"dt={date}").mkdir(parents=True, exist_ok=True)
        spec = {"dag": "lakecore_ingest", "date": date, "conf": {"tables": [ORDERS]},
                "mark_success": "ingest_.*"}
        done = subprocess.run([sys.executable, "-m", "lake_airflow.localrun",
                               json.dumps(spec)], env=env, capture_output=True, text=True,
                              timeout=600)
        runs = [json.loads(x[len("LAKE-RUN "):]) for x in done.stdout.splitlines()
                if x.startswith("LAKE-RUN ")]
        assert len(runs) == 1, done.stdout[-3000:] + done.stderr[-6000:]
        task = next(t for t in runs[0]["tasks"] if t["task_id"] == "prepare")
        return {**task, "log": done.stdout + done.stderr}

    ok = prepare(evolved(base), "2026-11-01")
    assert ok["state"] == "success", ok["log"][-6000:]
    assert ok["return_value"]["tables"] == {ORDERS: "altered"}
    assert schema_of(wh, ORDERS).field_names[-1] == "channel"

    failed = prepare(narrowed(evolved(base)), "2026-11-02")
    assert failed["state"] == "failed" and failed["try_number"] == 1
    assert "'shop.orders'" in failed["log"] and "column 'customer_id'" in failed["log"]
    assert schema_of(wh, ORDERS).id == 1
