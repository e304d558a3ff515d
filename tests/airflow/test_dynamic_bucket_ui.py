"""The Lake tables page in a browser for a dynamic-bucket table: a real ``airflow api-server``
with login on, a tables file declaring ``shop.events`` with ``bucket: "-1"``, and headless
Debian Chromium (as ``test_ui``) reading its buckets per partition and their row counts."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from lake_airflow.demo import airflow_env

from tests.airflow.conftest import migrate_db
from tests.airflow.test_dynamic_bucket_tables import tables_file
from tests.airflow.test_ui import CHROMIUM, PASSWORD, api_server

pytestmark = pytest.mark.slow


def seed(cfg_path: Path, warehouse: Path, home: Path) -> None:
    """``shop.events`` with 10 keys in one day and 3 in the next (target 4 rows a bucket)."""
    from lake_airflow.config import load_config
    from lake_airflow.lock import LockTarget, ensure_lock_table
    from lake_airflow.tables import ensure_table, open_catalog

    ensure_lock_table(LockTarget(f"sqlite:///{home / 'lakecore_locks.db'}", "lakecore_lock",
                                 "default-sqlite"))
    os.environ["LAKECORE_WAREHOUSE"] = str(warehouse)
    try:
        cfg = load_config(cfg_path)
    finally:
        del os.environ["LAKECORE_WAREHOUSE"]
    catalog = open_catalog(cfg)
    ensure_table(catalog, cfg.table("shop.events"))
    table = catalog.get_table("shop.events")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    ids = list(range(10)) + list(range(3))
    w.write_arrow(pa.table({"dt": ["2026-11-01"] * 10 + ["2026-11-02"] * 3,
                            "event_id": pa.array(ids, pa.int64()), "kind": ["k"] * 13}))
    wb.new_commit().commit(w.prepare_commit())
    catalog.close()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    playwright = pytest.importorskip("playwright.sync_api")
    tmp = tmp_path_factory.mktemp("dynui")
    home = tmp / "airflow"
    home.mkdir()
    cfg_path = tmp / "tables.yaml"
    cfg_path.write_text(yaml.safe_dump(tables_file(tmp)))
    (tmp / "passwords.json").write_text(json.dumps({"admin": PASSWORD}))
    env = airflow_env(home, tmp / "wh", tmp / "landing", extra={
        "LAKECORE_TABLES_CONFIG": str(cfg_path),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    })
    seed(cfg_path, tmp / "wh", home)
    migrate_db(env)
    with api_server(env, tmp) as url:
        with playwright.sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync"])
            pg = b.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(60_000)
            pg.goto(url + "/")
            pg.locator("input[name='username']").fill("admin")
            pg.locator("input[name='password']").fill(PASSWORD)
            pg.keyboard.press("Enter")
            pg.get_by_role("button", name="Browse").wait_for()
            yield pg
            b.close()


def test_lake_tables_page_shows_dynamic_buckets(page: Any) -> None:
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lake tables").click()
    page.wait_for_url("**/plugin/lake-tables")
    frame = page.frame_locator("iframe")
    frame.get_by_role("heading", name="Lake tables").wait_for()
    card = frame.locator("#shop__events")
    text = card.inner_text()
    assert "Dynamic buckets" in text, text
    rows = card.locator("table").filter(has_text="rows per bucket").locator("tr")
    cells = [rows.nth(i).inner_text().split("\t") for i in range(rows.count())]
    assert cells[1:] == [["dt=2026-11-01", "3", "10", "0: 4, 1: 4, 2: 2"],
                         ["dt=2026-11-02", "1", "3", "0: 3"]], cells
    # a fixed-bucket table has no such section
    assert "Dynamic buckets" not in frame.locator("#shop__customers").inner_text()
