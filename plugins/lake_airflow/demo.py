"""``make demo``: the real pipeline, through Airflow, on Airflow's embedded default.

SQLite metadata DB, ``local[2]`` Spark, a warehouse under the repo (``.demo/``, an installation
``make airflow`` then opens: ``lake_airflow.installation``). It writes small source extracts
(orders per day; a customers change feed with updates and deletes), starts a real Airflow
(api-server, scheduler, triggerer: ``lake_airflow.stack``), then runs the writing DAGs through
``python -m lake_airflow.localrun`` on the LocalExecutor (runs named by their data dates, real
start and end times, task logs where the UI reads them): ingest for three logical dates,
maintenance, and a backfill that atomically replaces one day's partition with a corrected
extract. Each commit is an asset event: Airflow's scheduler runs the downstream report DAG
(``lakecore_orders_report``) and the compaction DAG on them (compaction on demand, per bucket,
off-peak or at the stop trigger), and the demo prints what each of those runs did. It ends
with a summary of each table and a sample query,
checked against a model of what the sources say. Every run starts from an empty ``.demo/``
(but keeps its generated secrets, so the login stays the same).

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

from lake_airflow.installation import ADMIN_USER, secret_env, write_config

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
    lakecore DAGs of this checkout on local Spark. Every path is derived here from ``home``
    and the checkout; ``home`` gets its own random secrets on first use
    (``lake_airflow.installation``)."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKECORE_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url or f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **secret_env(home),  # this installation's own JWT secret and admin login
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


# -- what the scheduler ran on the asset events -------------------------------------------
DOWNSTREAM = ["lakecore_orders_report", "lakecore_compaction"]


class Downstream:
    """Reads the metadata DB (SQLite) for the asset events and the runs they queued."""

    def __init__(self, db: Path) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(f"sqlite:///{db}")
        self.seen_events = 0
        self.seen_runs: set[tuple[str, str]] = set()

    def _rows(self, sql: str, **params: Any) -> list[Any]:
        from sqlalchemy import text

        with self.engine.connect() as c:
            return list(c.execute(text(sql), params).all())

    def _xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        got = self._rows("SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r AND "
                         "task_id = :t AND key = :k", d=dag_id, r=run_id, t=task_id, k=key)
        value = got[0][0] if got else None
        return json.loads(value) if isinstance(value, str | bytes) else value

    def show_events(self) -> None:
        rows = self._rows("SELECT e.id, a.uri, e.extra FROM asset_event e JOIN asset a "
                          "ON a.id = e.asset_id WHERE e.id > :n ORDER BY e.id",
                          n=self.seen_events)
        for eid, uri, extra in rows:
            x = json.loads(extra) if isinstance(extra, str) else extra
            done = f", marked done {x['partitions_done']}" if x.get("partitions_done") else ""
            parts = [p for p in x.get("partitions") or [] if p]
            print(f"    asset event {eid} on {uri}: {x.get('commit_kind')} snapshot "
                  f"{x.get('snapshot_ids')}, {x.get('rows')} rows"
                  + (f", partitions {parts}" if parts else "") + done)
            self.seen_events = max(self.seen_events, eid)

    def wait_and_show(self, timeout: float = 900) -> None:
        """Wait until the scheduler has no queued or running downstream run (and no queued
        asset event it has not turned into a run yet); print the runs that finished."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            busy = self._rows("SELECT COUNT(*) FROM dag_run WHERE dag_id IN ('" +
                              "','".join(DOWNSTREAM) + "') AND state IN ('queued', 'running')")
            queue = self._rows("SELECT COUNT(*) FROM asset_dag_run_queue WHERE target_dag_id "
                               "IN ('" + "','".join(DOWNSTREAM) + "')")
            if busy[0][0] == 0 and queue[0][0] == 0:
                break
            time.sleep(2)
        for dag_id, run_id, run_type, state in self._rows(
                "SELECT dag_id, run_id, run_type, state FROM dag_run WHERE dag_id IN ('" +
                "','".join(DOWNSTREAM) + "') ORDER BY id"):
            if (dag_id, run_id) in self.seen_runs or state in ("queued", "running"):
                continue
            self.seen_runs.add((dag_id, run_id))
            print(f"  {dag_id} {run_id} ({run_type}, by the scheduler): {state}")
            if dag_id == "lakecore_orders_report":
                r = self._xcom(dag_id, run_id, "report") or {}
                print(f"      report: shop.orders as of snapshot {r.get('snapshot_id')} "
                      f"({', '.join(map(str, r.get('commit_kinds') or []))}): rows "
                      f"{r.get('partitions')}, {r.get('rows')} rows in the table")
                continue
            for slug in ("shop__orders", "shop__customers"):
                plan = self._xcom(dag_id, run_id, f"{slug}.plan", "decisions") or []
                why = self._xcom(dag_id, run_id, f"{slug}.plan", "skipped_reason")
                if not plan and why:
                    print(f"      {slug.replace('__', '.')}: skipped: {why}")
                for d in plan:
                    print(f"      {slug.replace('__', '.')} {d['label']}: {d['reason']}")
                done = self._xcom(dag_id, run_id, f"{slug}.compact")
                if done and not done.get("skipped"):
                    print(f"      {slug.replace('__', '.')}: compacted {done['buckets']} "
                          f"bucket(s), {done['files_before']} -> {done['files']} files, "
                          f"snapshot {done['snapshot_ids']}")

    def show_done(self, warehouse: str) -> None:
        from lakecore import CatalogFactory
        from lakecore.store.partition_done import done_mark

        table = CatalogFactory.create({"warehouse": warehouse}).get_table("shop.orders")
        print("partitions of shop.orders marked done (partition.mark-done-action):")
        for day in DATES:
            mark = done_mark(table, {"dt": day})
            print(f"  dt={day}: " + ("not done" if mark is None else
                                      f"_SUCCESS {'yes' if mark.success_file else 'no'}, "
                                      f"done-partition {mark.to_dict()['done_partition']}, "
                                      f"after snapshot {mark.snapshot_id}"))


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
    for d in (warehouse, landing, root / "logs"):
        shutil.rmtree(d, ignore_errors=True)
    if home.exists():  # a fresh installation, but the same login as the last `make demo`
        for child in home.iterdir():
            if child.name != "secrets":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    write_config(home)
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
    from lake_airflow.stack import AirflowStack

    stack = AirflowStack(env, root / "logs", unpause=DOWNSTREAM)
    stack.start()
    print(f"Airflow api-server {stack.url}, scheduler and triggerer running (logs in "
          f"{root / 'logs'}); {', '.join(DOWNSTREAM)} run on the tables' asset events")
    env = stack.env  # the writing runs' tasks go through the LocalExecutor, logs and all
    try:
        watcher = Downstream(home / "airflow.db")
        specs: list[dict[str, Any]] = [{"dag": "lakecore_ingest", "date": d} for d in DATES]
        print("running DAGs (each Spark job takes ~30-40 s):")
        for run in run_dags(env, specs, log):
            _show(run)
            watcher.show_events()
            watcher.wait_and_show()
        for run in run_dags(env, [{"dag": "lakecore_maintenance", "date": "2026-11-04",
                                  "conf": {"dry_run": False}}], log):
            _show(run)
        fixed = DATES[1]
        write_orders(landing, fixed, version=2)
        print(f"a corrected orders extract arrived for {fixed}: backfilling that partition")
        backfill = {"dag": "lakecore_backfill", "run_id": f"manual__{fixed}_shop.orders",
                    "conf": {"table": "shop.orders", "start_date": fixed, "end_date": fixed}}
        for run in run_dags(env, [backfill], log):
            _show(run)
            watcher.show_events()
            watcher.wait_and_show()
        watcher.show_done(str(warehouse))
    finally:
        stack.stop()
    summary(str(warehouse), {DATES[0]: 1, DATES[1]: 2, DATES[2]: 1})
    print(f"\ndemo finished in {time.time() - t0:.0f} s; warehouse {warehouse}")
    print(f"open it in Airflow: `make airflow` (http://127.0.0.1:8080, user {ADMIN_USER}, "
          f"password in {home / 'secrets' / 'passwords.json'}); README, \"The Airflow pipeline\"")


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
