"""The table-health app with FastAPI's TestClient on a real warehouse and a real lock table:
what it shows, that it shows no secret, and that every route demands a login."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from fastapi import HTTPException, Request
from fastapi.testclient import TestClient
from lake_airflow.config import LakeConfig, parse_config
from lake_airflow.demo import customer_changes
from lake_airflow.health.app import create_app, request_token
from lake_airflow.health.report import health_report, scrub
from lake_airflow.lock import LockTarget, ensure_lock_table
from lake_airflow.tables import ensure_table, open_catalog

REPO = Path(__file__).resolve().parents[2]
SECRET = "pw-9f8e7d"


class User:
    def get_name(self) -> str:
        return "tester"


async def fake_login(request: Request) -> User:
    if request_token(request) != "good-token":
        raise HTTPException(401, "Not authenticated")
    return User()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[LakeConfig, LockTarget]:
    tmp = tmp_path_factory.mktemp("health")
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", {"LAKECORE_WAREHOUSE": str(tmp / "wh"),
                                "LAKECORE_LANDING": str(tmp / "landing")})
    lock = LockTarget(f"sqlite:///{tmp / 'locks.db'}", "lakecore_lock", "connection")
    ensure_lock_table(lock)
    catalog = open_catalog(cfg, lock)
    for spec in cfg.tables:
        assert ensure_table(catalog, spec) == "created"
        assert ensure_table(catalog, spec) == "exists"
    customers = catalog.get_table("shop.customers").copy({"write-only": "true"})
    for k in range(3):  # three level-0 runs per bucket: compaction has work
        rows = pa.Table.from_pylist(customer_changes(k))
        rows = rows.set_column(3, "updated_at", rows["updated_at"].cast(pa.timestamp("us")))
        wb = customers.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(rows)
        wb.new_commit().commit(w.prepare_commit())
    catalog.close()
    return cfg, lock


def report_for(cfg: LakeConfig, lock: LockTarget) -> dict[str, Any]:
    return health_report(cfg, lock_resolver=lambda _: lock)


def test_report_shows_table_state(lake: tuple[LakeConfig, LockTarget]) -> None:
    cfg, lock = lake
    r = report_for(cfg, lock)
    orders, customers = r["tables"]
    assert orders["name"] == "shop.orders" and orders["latest_snapshot"] is None
    assert orders["compaction_preview"]["skipped_reason"] == "the table has no snapshot yet"
    assert customers["latest_snapshot"] == 3 and len(customers["snapshots"]) == 3
    assert customers["level0_backlog"] == 6 and customers["total_files"] == 6
    assert {b["sorted_runs"] for b in customers["buckets"]} == {3}
    assert all(b["files_per_level"] == {0: 3} for b in customers["buckets"])
    assert customers["compaction_preview"]["buckets"] == 2  # trigger is 2 sorted runs
    assert customers["last_compaction"] is None
    assert customers["lock"]["state"] == "free"
    assert r["lock"] == "sqlite database of connection 'lakecore_lock'"


def test_lock_holder_is_shown(lake: tuple[LakeConfig, LockTarget]) -> None:
    from lakecore.lock.sql import SqlCatalogLock

    cfg, lock = lake
    held, release = threading.Event(), threading.Event()
    sql_lock = SqlCatalogLock(lock.url)

    def hold() -> None:
        sql_lock.run_with_lock("shop", "customers", lambda: (held.set(), release.wait(30)))

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        c = next(x for x in report_for(cfg, lock)["tables"] if x["name"] == "shop.customers")
        assert c["lock"]["state"] == "held" and "pid=" in c["lock"]["owner"]
    finally:
        release.set()
        t.join()
        sql_lock.close()


def test_routes_require_login_and_render(lake: tuple[LakeConfig, LockTarget]) -> None:
    cfg, lock = lake
    client = TestClient(create_app(fake_login, lambda: report_for(cfg, lock)))
    for path in ("/", "/api/tables", "/api/tables/shop.orders"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer nope"}).status_code == 401
    ok = {"Authorization": "Bearer good-token"}
    page = client.get("/", headers=ok)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for text in ("Lake tables", "shop.orders", "shop.customers", "level-0 backlog",
                 "would be compacted", "signed in as tester", "catalog lock"):
        assert text in page.text
    cookie = TestClient(create_app(fake_login, lambda: report_for(cfg, lock)),
                        cookies={"_token": "good-token"})
    assert cookie.get("/api/tables/shop__customers").json()["latest_snapshot"] == 3
    assert client.get("/api/tables/nope", headers=ok).status_code == 404


def test_no_secret_is_shown(tmp_path: Path, lake: tuple[LakeConfig, LockTarget]) -> None:
    cfg, _ = lake
    # a lock URL with a password that cannot even connect: the page still works, secret-free
    lock = LockTarget(f"postgresql+psycopg://lake:{SECRET}@127.0.0.1:1/nodb", "lakecore_lock",
                      "connection")
    client = TestClient(create_app(fake_login, lambda: report_for(cfg, lock)))
    ok = {"Authorization": "Bearer good-token"}
    for path in ("/", "/api/tables"):
        body = client.get(path, headers=ok).text
        assert SECRET not in body and "postgresql+psycopg" not in body and "127.0.0.1:1" \
            not in body
    assert "s3://***@bucket/wh" == scrub(f"s3://key:{SECRET}@bucket/wh")
