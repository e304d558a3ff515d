"""``make demo``: the real pipeline, through Airflow, on Airflow's embedded default.

SQLite metadata DB, ``local[2]`` Spark, a warehouse under the repo (``.demo/``). It writes small
source extracts (orders per day; a customers change feed with updates and deletes), then runs
the lakecore DAGs with ``dag.test()`` (``python -m lake_airflow.localrun``): ingest for three
logical dates, compaction, maintenance, and a backfill that atomically replaces one day's
partition with a corrected extract. It ends with a summary of each table and a sample query,
checked against a model of what the sources say. Every run starts from an empty ``.demo/``.

It lives beside the plugin, not in lakecore (the library that ships to every Spark executor
knows nothing of Airflow), and imports no Airflow itself: Airflow runs in subprocesses.
The source generators and the models are also the end-to-end tests' data.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
DATES = ("2026-11-01", "2026-11-02", "2026-11-03")
ORDERS = pa.schema([
    pa.field("dt", pa.string(), nullable=False), pa.field("order_id", pa.int64(), nullable=False),
    ("customer_id", pa.int64()), ("amount", pa.float64()), ("status", pa.string()),
    ("updated_at", pa.timestamp("us")),
])
CUSTOMER_COLUMNS = ("customer_id", "name", "city", "updated_at")
CITIES = ("Lyon", "Oslo", "Porto", "Quito", "Turin")
RUN_PREFIX = "LAKE-RUN "


# -- sources and the models of what they say ---------------------------------------------
def orders_extract(day: str, version: int = 1, rows: int = 200) -> pa.Table:
    """The full content of one day's orders. Version 2 is a corrected extract: every 10th
    order removed, every 3rd amount fixed, five late orders added."""
    base = (date.fromisoformat(day).toordinal() % 1000) * 10_000
    ids = list(range(base, base + rows))
    amount = {i: round(10 + (i % 97) * 1.25, 2) for i in ids}
    if version >= 2:
        ids = [i for i in ids if (i - base) % 10 != 0] + list(range(base + rows,
                                                                   base + rows + 5))
        amount = {i: amount.get(i, 99.0) + (1.0 if (i - base) % 3 == 0 else 0.0) for i in ids}
    ts = datetime.fromisoformat(day) + timedelta(hours=20, minutes=version)
    return pa.table({
        "dt": [day] * len(ids), "order_id": ids, "customer_id": [i % 300 for i in ids],
        "amount": [amount[i] for i in ids],
        "status": ["shipped" if i % 4 else "open" for i in ids], "updated_at": [ts] * len(ids),
    }, schema=ORDERS)


def customer_changes(day_no: int, size: int = 300) -> list[dict[str, Any]]:
    """Day 0 inserts ``size`` customers; day k >= 1 updates ids with id % 7 == k, deletes
    ids with id % 11 == k and inserts 20 new ones. Each key appears once per batch."""
    ts = (datetime(2026, 11, 1, 21) + timedelta(days=day_no)).isoformat()

    def row(i: int, op: str, v: int) -> dict[str, Any]:
        return {"customer_id": i, "name": f"customer-{i}-v{v}",
                "city": CITIES[(i + v) % len(CITIES)], "updated_at": ts, "op": op}

    if day_no == 0:
        return [row(i, "+I", 0) for i in range(size)]
    updates = [row(i, "+U", day_no) for i in range(size) if i % 7 == day_no and i % 11 != day_no]
    deletes = [row(i, "-D", day_no) for i in range(size) if i % 11 == day_no]
    new = [row(size + (day_no - 1) * 20 + j, "+I", day_no) for j in range(20)]
    return updates + deletes + new


def write_orders(landing: Path, day: str, version: int = 1) -> Path:
    out = landing / "orders" / f"dt={day}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    pq.write_table(orders_extract(day, version), out / "part-0.parquet")
    return out


def write_customers(landing: Path, day: str, day_no: int) -> Path:
    out = landing / "customers" / f"batch={day}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with open(out / "part-0.json", "w") as f:
        for r in customer_changes(day_no):
            f.write(json.dumps(r) + "\n")
    return out


def expected_customers(days: int) -> dict[int, tuple[str, str]]:
    """customer_id -> (name, city) after applying ``days`` batches in order."""
    state: dict[int, tuple[str, str]] = {}
    for k in range(days):
        for r in customer_changes(k):
            if r["op"] == "-D":
                state.pop(r["customer_id"], None)
            else:
                state[r["customer_id"]] = (r["name"], r["city"])
    return state


def read_table(warehouse: str, name: str) -> pa.Table:
    from lakecore import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table(name)
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def customers_state(data: pa.Table) -> dict[int, tuple[str, str]]:
    rows = data.select(["customer_id", "name", "city"]).to_pylist()
    return {r["customer_id"]: (r["name"], r["city"]) for r in rows}


def orders_state(data: pa.Table) -> dict[tuple[str, int], float]:
    return {(r["dt"], r["order_id"]): r["amount"]
            for r in data.select(["dt", "order_id", "amount"]).to_pylist()}


def expected_orders(versions: dict[str, int]) -> dict[tuple[str, int], float]:
    return orders_state(pa.concat_tables([orders_extract(d, v) for d, v in versions.items()]))


# -- Airflow, in subprocesses ------------------------------------------------------------
def airflow_env(home: Path, warehouse: Path, landing: Path, *, db_url: str | None = None,
                lock_url: str | None = None, extra: dict[str, str] | None = None
                ) -> dict[str, str]:
    """The environment of an Airflow on its embedded default (or ``db_url``) running the
    lakecore DAGs of this checkout on local Spark."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKECORE_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url or f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__API_AUTH__JWT_SECRET": "lakecore-local-" + "x" * 64,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "LAKECORE_WAREHOUSE": str(warehouse),
        "LAKECORE_LANDING": str(landing),
        "LAKECORE_PYSPARK_PYTHON": sys.executable,
        # small local jobs: no UI, few shuffle partitions, and a JVM tuned to start fast
        # (C1 JIT only, serial GC: ~30% less wall time for jobs this short; not for big ones)
        "LAKECORE_SPARK_CONF": json.dumps({
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)]),
    })
    if lock_url:
        env["AIRFLOW_CONN_LAKECORE_LOCK"] = json.dumps(
            {"conn_type": "sqlite", "host": lock_url.split("///", 1)[1]}
            if lock_url.startswith("sqlite") else {"conn_type": "postgres", **_pg(lock_url)})
    env.update(extra or {})
    return env


def _pg(url: str) -> dict[str, Any]:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return {"host": u.host, "port": u.port, "login": u.username, "password": u.password,
            "schema": u.database}


def airflow(env: dict[str, str], *args: str, log: Path) -> None:
    """``airflow ARGS`` in ``env``, its output appended to ``log``."""
    cmd = [str(Path(sys.executable).parent / "airflow"), *args]
    with open(log, "a") as out:
        subprocess.run(cmd, env=env, check=True, stdout=out, stderr=subprocess.STDOUT)


def run_dags(env: dict[str, str], specs: Sequence[dict[str, Any]], log: Path
             ) -> Iterator[dict[str, Any]]:
    """Run DAG runs through ``lake_airflow.localrun``; yields each run's result as it ends.
    Everything else the runs print (task logs, Spark output) goes to ``log``."""
    cmd = [sys.executable, "-m", "lake_airflow.localrun", *[json.dumps(s) for s in specs]]
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(RUN_PREFIX):
                yield json.loads(line[len(RUN_PREFIX):])
            else:
                out.write(line)
        if proc.wait() != 0:
            raise RuntimeError(f"a DAG run failed; see {log}")


# -- the demo ----------------------------------------------------------------------------
def _outcome(t: dict[str, Any]) -> str:
    if isinstance(t["return_value"], list):
        return f"partitions {t['return_value']}"
    rv = t["return_value"] if isinstance(t["return_value"], dict) else {}
    if t["state"] == "skipped":
        return f"skipped: {t.get('skipped_reason') or 'upstream skipped'}"
    if "name" in rv and "snapshot_id" in rv:
        return f"tagged snapshot {rv['snapshot_id']} as {rv['name']}"
    if rv.get("job") == "maintain":
        steps = []
        for st in rv.get("steps", []):
            figures = {k: v for k, v in st.items() if k.endswith(("_removed", "_expired"))}
            steps.append(f"{st['operation']}: " + (f"skipped ({st['skipped']})" if st.get(
                "skipped") else ", ".join(f"{k} {v}" for k, v in figures.items())))
        return "; ".join(steps)
    if rv.get("job") == "ingest":
        return ("already committed by this run: nothing written" if rv.get("skipped") else
                f"{rv['rows']} rows -> snapshot {rv['snapshot_ids']}")
    if rv.get("job") == "compact":
        return rv.get("skipped_reason") or (f"{rv['buckets']} bucket(s), {rv['files_before']} "
                                            f"-> {rv['files']} files, snapshot "
                                            f"{rv['snapshot_ids']}")
    return ""


def _show(run: dict[str, Any]) -> None:
    print(f"  {run['dag_id']} {run['run_id']} ({run['run_type']}): {run['state']}")
    for t in run["tasks"]:
        what = _outcome(t)
        if what:
            name = t["task_id"] + (f"[{t['map_index']}]" if t["map_index"] >= 0 else "")
            print(f"      {name:<36} {what}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(REPO / ".demo"))
    ap.add_argument("--write-sources", metavar="DIR",
                    help="only write the demo's source extracts under DIR (docker compose)")
    args = ap.parse_args(argv)
    if args.write_sources:
        for k, day in enumerate(DATES):
            write_orders(Path(args.write_sources), day)
            write_customers(Path(args.write_sources), day, k)
        print(f"wrote sources for {', '.join(DATES)} under {args.write_sources}")
        return
    root = Path(args.root).resolve()
    home, warehouse, landing = root / "airflow", root / "warehouse", root / "landing"
    for d in (home, warehouse, landing):
        shutil.rmtree(d, ignore_errors=True)
    home.mkdir(parents=True)
    log = root / "airflow.log"
    log.write_text("")
    t0 = time.time()
    for k, day in enumerate(DATES):
        write_orders(landing, day)
        write_customers(landing, day, k)
    print(f"sources: {len(DATES)} days of orders and customer changes under {landing}")
    env = airflow_env(home, warehouse, landing)
    airflow(env, "db", "migrate", log=log)
    print(f"Airflow metadata DB: {home / 'airflow.db'} (SQLite); logs: {log}")
    specs: list[dict[str, Any]] = [{"dag": "lakecore_ingest", "date": d} for d in DATES]
    specs += [{"dag": "lakecore_compaction", "date": "2026-11-04"},
              {"dag": "lakecore_maintenance", "date": "2026-11-04"}]
    print("running DAGs (each Spark job takes ~30-40 s):")
    for run in run_dags(env, specs, log):
        _show(run)
    fixed = DATES[1]
    write_orders(landing, fixed, version=2)
    print(f"a corrected orders extract arrived for {fixed}: backfilling that partition")
    backfill = {"dag": "lakecore_backfill", "date": "2026-11-05",
                "conf": {"table": "shop.orders", "start_date": fixed, "end_date": fixed}}
    for run in run_dags(env, [backfill], log):
        _show(run)
    summary(str(warehouse), {DATES[0]: 1, DATES[1]: 2, DATES[2]: 1})
    print(f"\ndemo finished in {time.time() - t0:.0f} s; warehouse {warehouse}")


def summary(warehouse: str, versions: dict[str, int]) -> None:
    from lakecore import CatalogFactory
    from lakecore.maintenance import list_tags
    from lakecore.maintenance.inspect import format_report, inspect_table

    catalog = CatalogFactory.create({"warehouse": warehouse})
    for name in ("shop.orders", "shop.customers"):
        print()
        print(format_report(inspect_table(catalog.get_table(name), max_snapshots=6)))
    orders = read_table(warehouse, "shop.orders")
    customers = read_table(warehouse, "shop.customers")
    assert orders_state(orders) == expected_orders(versions), "orders differ from the model"
    assert customers_state(customers) == expected_customers(len(DATES)), "customers differ"
    print("\nsample query: orders per day (SELECT dt, count(*), sum(amount) GROUP BY dt)")
    per_day = orders.group_by("dt").aggregate([("order_id", "count"), ("amount", "sum")])
    for r in per_day.sort_by("dt").to_pylist():
        print(f"  {r['dt']}  {r['order_id_count']:>4} orders  {r['amount_sum']:>10.2f}")
    print("sample query: customers per city (SELECT city, count(*) GROUP BY city)")
    for r in customers.group_by("city").aggregate([("customer_id", "count")]) \
            .sort_by("city").to_pylist():
        print(f"  {r['city']:<6} {r['customer_id_count']:>4}")
    big = orders.filter(pc.greater_equal(orders["amount"], 125))
    print(f"orders of 125 or more: {big.num_rows}; tags on shop.orders: "
          f"{[t.name for t in list_tags(catalog.get_table('shop.orders'))]}")
    print("both tables match the model of their sources")


if __name__ == "__main__":
    main()
