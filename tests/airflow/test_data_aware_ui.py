"""The Lake tables page's data-aware parts in a real browser: a real ``airflow api-server``
(login on), headless Chromium through Playwright. shop.orders has two partitions, one marked
done with both of Paimon's actions, and its asset has an event; the page shows the asset link,
its recent events, the partitions marked done and the off-peak window, and the asset link
opens Airflow's own page of the asset."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
import yaml
from lake_airflow.assets import asset_name
from lake_airflow.config import parse_config
from lake_airflow.demo import airflow_env, orders_extract
from lake_airflow.tables import ensure_table, open_catalog

from lakecore.store.partition_done import mark_partition_done
from tests.airflow.conftest import REPO, airflow_cli, migrate_db
from tests.airflow.test_ui import CHROMIUM, PASSWORD, Server, api_server

pytestmark = pytest.mark.slow


def seed_orders(warehouse: Path) -> None:
    """shop.orders as the tables file declares it, two days written, the first marked done."""
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", {"LAKECORE_WAREHOUSE": str(warehouse)})
    catalog = open_catalog(cfg)
    ensure_table(catalog, cfg.table("shop.orders"))
    table = catalog.get_table("shop.orders")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.concat_tables([orders_extract("2026-11-01"), orders_extract("2026-11-02")]))
    wb.new_commit().commit(w.prepare_commit())
    mark_partition_done(table, {"dt": "2026-11-01"}, snapshot_id=1)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("ui-data-aware")
    home = tmp / "airflow"
    home.mkdir()
    (tmp / "passwords.json").write_text(json.dumps({"admin": PASSWORD}))
    env = airflow_env(home, tmp / "wh", tmp / "landing", extra={
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    })
    seed_orders(tmp / "wh")
    migrate_db(env)
    airflow_cli(env, "dags", "reserialize")  # registers the tables' assets
    with api_server(env, tmp) as url:
        r = requests.post(url + "/auth/token", json={"username": "admin", "password": PASSWORD},
                          timeout=30)
        assert r.status_code in (200, 201), r.text
        s = Server(url, r.json()["access_token"], tmp)
        # an event on the orders asset, as an ingest would have emitted it
        assets = s.api("GET", "/api/v2/assets", params={"name_pattern": "shop.orders"})
        (asset,) = [a for a in assets.json()["assets"]
                    if a["name"] == asset_name("shop.orders")]
        assert asset["extra"]["location"] == f"paimon+file:{tmp / 'wh'}/shop.db/orders"
        ev = s.api("POST", "/api/v2/assets/events", json={"asset_id": asset["id"], "extra": {
            "commit_kind": "APPEND", "snapshot_ids": [1], "rows": 400,
            "partitions": ["dt=2026-11-01", "dt=2026-11-02"],
            "partitions_done": ["dt=2026-11-01"], "job": "ingest",
            "summary": "ingest: APPEND snapshot(s) 1: +400 rows (net) in dt=2026-11-01"}})
        assert ev.status_code == 200, ev.text
        yield s, asset


@pytest.fixture(scope="module")
def browser(site: tuple[Server, dict[str, Any]]) -> Iterator[Any]:
    server = site[0]
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = b.new_page(viewport={"width": 1400, "height": 1200})
        page.set_default_timeout(60_000)
        page.goto(server.url + "/")
        page.locator("input[name='username']").fill("admin")
        page.locator("input[name='password']").fill(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Browse").wait_for()
        yield page
        b.close()


def test_page_shows_asset_events_done_partitions_and_window(
        browser: Any, site: tuple[Server, dict[str, Any]]) -> None:
    page, (server, asset) = browser, site
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lake tables").click()
    page.wait_for_url("**/plugin/lake-tables")
    frame = page.frame_locator("iframe")
    card = frame.locator("#shop__orders")
    card.locator(".asset-link").first.wait_for()
    page.screenshot(path=str(server.shots / "data-aware.png"), full_page=True)
    link = card.locator(".asset-link")
    assert link.first.inner_text() == asset["name"] == "lakecore://shop.orders"
    assert link.first.get_attribute("href") == f"/assets/{asset['id']}"
    events = card.locator(".asset-events tbody tr")
    assert events.count() == 1
    cells = events.first.locator("td").all_inner_texts()
    assert cells[2:7] == ["APPEND", "1", "400", "dt=2026-11-01, dt=2026-11-02", "dt=2026-11-01"]
    assert cells[8] == "ingest: APPEND snapshot(s) 1: +400 rows (net) in dt=2026-11-01"
    done = card.locator(".done-partitions tbody tr")
    assert done.count() == 1
    row = done.first.locator("td").all_inner_texts()
    assert row[0] == "dt=2026-11-01" and row[2] == "yes" and row[3] == "dt=2026-11-01.done"
    assert row[4] == "1"
    text = card.inner_text()
    assert "partition.mark-done-action: success-file, done-partition" in text
    window = card.locator(".offpeak").inner_text()
    assert "off-peak 00:00-06:00" in window
    assert "num-sorted-run.compaction-trigger 5, stop-trigger 8" in window
    # the customers table declares no window: it compacts whenever buckets pass the triggers
    assert "not created yet" in frame.locator("#shop__customers").inner_text()


def test_asset_link_opens_airflows_asset_page(browser: Any,
                                              site: tuple[Server, dict[str, Any]]) -> None:
    page, (server, asset) = browser, site
    page.goto(server.url + "/plugin/lake-tables")
    frame = page.frame_locator("iframe")
    frame.locator("#shop__orders .asset-link").first.click()
    page.wait_for_url(f"**/assets/{asset['id']}")
    page.get_by_text(asset["name"]).first.wait_for()
    page.screenshot(path=str(server.shots / "asset.png"), full_page=True)
