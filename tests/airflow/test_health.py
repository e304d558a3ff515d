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


def login_at(next_url: str) -> str:
    return f"/auth/login?next={next_url}"


def test_anonymous_browsers_go_to_the_login_page(lake: tuple[LakeConfig, LockTarget]) -> None:
    cfg, lock = lake
    client = TestClient(create_app(fake_login, lambda: report_for(cfg, lock), login_at),
                        follow_redirects=False)
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    r = client.get("/", headers=browser)
    assert r.status_code == 303 and r.headers["location"] == "/auth/login?next=/"
    for headers in ({"Accept": "application/json"}, {"Accept": "*/*"}, {}):  # API clients
        r = client.get("/api/tables", headers=headers)
        assert r.status_code == 401 and r.json() == {"detail": "Not authenticated"}
    assert client.get("/", headers={**browser, "Authorization": "Bearer good-token"}
                      ).status_code == 200


def test_page_refreshes_itself(lake: tuple[LakeConfig, LockTarget],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, lock = lake
    client = TestClient(create_app(fake_login, lambda: report_for(cfg, lock)))
    ok = {"Authorization": "Bearer good-token"}
    assert "<meta http-equiv='refresh' content='60'>" in client.get("/", headers=ok).text
    assert "http-equiv='refresh'" not in client.get("/?refresh=0", headers=ok).text
    monkeypatch.setenv("LAKECORE_HEALTH_REFRESH_SECONDS", "15")
    page = client.get("/", headers=ok).text
    assert "content='15'" in page and "refreshes every 15 s" in page


def test_page_says_why_and_what(lake: tuple[LakeConfig, LockTarget]) -> None:
    """Warnings only where compaction is due, the reason otherwise; sizes for people;
    explained columns and '-'; run ids linked to their runs; history that expired is not
    presented as lost data."""
    from lake_airflow.health.page import human_size, render_table

    cfg, lock = lake
    customers = next(t for t in report_for(cfg, lock)["tables"]
                     if t["name"] == "shop.customers")
    html = render_table(customers)
    assert '<span class="kpi warn">level-0 backlog: <b>6</b>' in html
    assert "compaction is due" in html
    assert "no COMPACT among the 3 snapshot(s) kept" in html and "none retained" not in html
    assert "size: <b>" in html and ("KiB" in html or "bytes" in html)
    assert 'title="Size amplification: bytes above the highest level' in html
    assert "nothing compacted to a level above 0 yet" in html
    idle = {**customers, "compaction_preview": {**customers["compaction_preview"],
                                                "buckets": 0,
                                                "skipped_reason": "no bucket reached "
                                                "num-sorted-run.compaction-trigger"}}
    html = render_table(idle)
    assert "kpi warn" not in html
    assert "no action due: no bucket reached num-sorted-run.compaction-trigger" in html
    run = {"dag_id": "lakecore_compaction", "task_id": "shop__customers.compact",
           "run_id": "manual__2026-11-06T00:00:00+00:00", "state": "success",
           "end": "2026-11-06T00:01:00+00:00"}
    html = render_table({**customers, "last_compaction_task": run})
    assert ('href="/dags/lakecore_compaction/runs/manual__2026-11-06T00%3A00%3A00%2B00%3A00"'
            in html)
    assert human_size(512) == "512 bytes" and human_size(1536) == "1.5 KiB"
    assert human_size(3 * 1024 ** 3) == "3.0 GiB"


def test_a_silent_lock_database_does_not_hang_the_page(
        lake: tuple[LakeConfig, LockTarget]) -> None:
    """A lock host that accepts connections and never answers: every table's lock is
    'unknown' after the connect timeout, and the page answers."""
    import socket
    import time

    from lake_airflow.health.report import CONNECT_TIMEOUT_SECONDS

    cfg, _ = lake
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nobody ever answers
        port = silent.getsockname()[1]
        lock = LockTarget(f"postgresql+psycopg://lake:x@127.0.0.1:{port}/lakecore",
                          "lakecore_lock", "connection")
        done: list[dict[str, Any]] = []
        started = time.monotonic()
        worker = threading.Thread(target=lambda: done.append(report_for(cfg, lock)),
                                  daemon=True)
        worker.start()
        worker.join(timeout=len(cfg.tables) * CONNECT_TIMEOUT_SECONDS * 2 + 10)
        assert done, "the report hung on the silent lock database"
    assert time.monotonic() - started >= CONNECT_TIMEOUT_SECONDS  # it did wait for it
    for t in done[0]["tables"]:
        assert t.get("lock", {}).get("state") in ("unknown", None), t["name"]
    assert any(t.get("lock", {}).get("state") == "unknown" for t in done[0]["tables"])
