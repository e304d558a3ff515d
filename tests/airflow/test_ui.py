"""The UI as a person uses it: a real ``airflow api-server`` on loopback with login on, the
table-health page reached from the Browse menu and the backfill DAG's trigger form, in headless
Debian Chromium driven by Playwright; Param validation through the REST API (400 on bad
values); and the table-health routes refusing anonymous requests (401)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
from lake_airflow.demo import airflow_env, customer_changes

from tests.airflow.conftest import REPO, airflow_cli, migrate_db

pytestmark = pytest.mark.slow
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "admin-pw-31"


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    shots: Path

    def api(self, method: str, path: str, **kw: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api_server(env: dict[str, str], tmp: Path) -> Iterator[str]:
    """``airflow api-server`` on a free port (log in ``tmp/api-server.log``), healthy within
    120 s; yields its URL and stops it (process group) on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp / "api-server.log", "w") as log:
        proc = subprocess.Popen([str(Path(env["PATH"].split(os.pathsep)[0]) / "airflow"),
                                 "api-server", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if requests.get(url + "/api/v2/monitor/health", timeout=5).ok:
                        break
                except requests.ConnectionError:
                    pass
                assert proc.poll() is None, (tmp / "api-server.log").read_text()[-5000:]
                assert time.monotonic() < deadline, "api-server did not start in 120 s"
                time.sleep(1)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def seed_warehouse(warehouse: Path, home: Path) -> None:
    """A customers table with three level-0 runs per bucket, through the library, and the
    lock table where the api-server looks for it (no lakecore_lock connection: the SQLite
    file beside the metadata DB)."""
    import yaml
    from lake_airflow.config import parse_config
    from lake_airflow.lock import LockTarget, ensure_lock_table
    from lake_airflow.tables import ensure_table, open_catalog

    ensure_lock_table(LockTarget(f"sqlite:///{home / 'lakecore_locks.db'}", "lakecore_lock",
                                 "default-sqlite"))
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", {"LAKECORE_WAREHOUSE": str(warehouse)})
    catalog = open_catalog(cfg)
    ensure_table(catalog, cfg.table("shop.customers"))
    table = catalog.get_table("shop.customers").copy({"write-only": "true"})
    for k in range(3):
        rows = pa.Table.from_pylist(customer_changes(k))
        rows = rows.set_column(3, "updated_at", rows["updated_at"].cast(pa.timestamp("us")))
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(rows)
        wb.new_commit().commit(w.prepare_commit())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "airflow"
    home.mkdir()
    (tmp / "passwords.json").write_text(json.dumps({"admin": PASSWORD}))
    env = airflow_env(home, tmp / "wh", tmp / "landing", extra={
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    })
    seed_warehouse(tmp / "wh", home)
    migrate_db(env)
    airflow_cli(env, "dags", "reserialize")  # the api-server does not parse DAGs
    with api_server(env, tmp) as url:
        r = requests.post(url + "/auth/token", json={"username": "admin", "password": PASSWORD},
                          timeout=30)
        assert r.status_code in (200, 201), r.text
        yield Server(url, r.json()["access_token"], tmp)


def test_health_routes_refuse_anonymous(server: Server) -> None:
    for path in ("/lake/", "/lake/api/tables", "/lake/api/tables/shop.customers"):
        assert requests.get(server.url + path, timeout=30).status_code == 401, path
        bad = requests.get(server.url + path, timeout=30,
                           headers={"Authorization": "Bearer not-a-jwt"})
        assert bad.status_code in (401, 403), path
    # a browser without a login is sent to Airflow's login page; API clients keep the 401
    r = requests.get(server.url + "/lake/", timeout=30, allow_redirects=False,
                     headers={"Accept": "text/html,application/xhtml+xml"})
    assert r.status_code == 303 and r.headers["location"].startswith("/auth/login"), r.text
    assert r.headers["location"] == "/auth/login?next=%2Flake%2F"  # back here after login
    r = server.api("GET", "/lake/api/tables/shop.customers")
    assert r.status_code == 200 and r.json()["latest_snapshot"] == 3
    assert r.json()["compaction_preview"]["buckets"] == 2
    assert server.api("GET", "/api/v2/dags").status_code == 200


@pytest.mark.parametrize(("dag_id", "conf"), [
    ("lakecore_backfill", {"table": "shop.nope", "start_date": "2026-11-01",
                           "end_date": "2026-11-02"}),
    ("lakecore_backfill", {"table": "shop.orders", "start_date": "yesterday",
                           "end_date": "2026-11-02"}),
    ("lakecore_backfill", {"table": "shop.orders", "start_date": "2026-11-01"}),
    ("lakecore_compaction", {"parallelism": 0}),
    ("lakecore_compaction", {"strategy": "sometimes"}),
    ("lakecore_compaction", {"partitions": ["dt"]}),
    ("lakecore_ingest", {"tables": ["shop.ghost"]}),
    ("lakecore_maintenance", {"orphan_older_than": "soon"}),
    ("lakecore_partition_ready", {"table": "shop.orders", "partition": "dt"}),
])
def test_rest_api_rejects_bad_params(server: Server, dag_id: str, conf: dict[str, Any]
                                     ) -> None:
    r = server.api("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                   json={"logical_date": None, "conf": conf})
    assert r.status_code == 400, r.text


def test_rest_api_refusals_name_the_choices(server: Server) -> None:
    """A refused choice is named with the values it could have been, not a regex."""
    r = server.api("POST", "/api/v2/dags/lakecore_maintenance/dagRuns",
                   json={"logical_date": None, "conf": {"orphan_older_than": "1 week"}})
    assert r.status_code == 400 and "'1 week' is not one of" in r.text and "'1 d'" in r.text
    r = server.api("POST", "/api/v2/dags/lakecore_ingest/dagRuns",
                   json={"logical_date": None, "conf": {"tables": ["shop.ghost"]}})
    assert r.status_code == 400 and "'shop.ghost' is not one of" in r.text


@pytest.mark.parametrize(("dag_id", "conf"), [
    ("lakecore_ingest", {"tables": []}),  # empty: every table, as the field says
    ("lakecore_ingest", {"tables": None}),  # what the form sends for an empty multi-select
    ("lakecore_compaction", {"tables": None, "partitions": None}),
    ("lakecore_maintenance", {}),
])
def test_rest_api_accepts_empty_optional_fields(server: Server, dag_id: str,
                                                conf: dict[str, Any]) -> None:
    r = server.api("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                   json={"logical_date": None, "conf": conf})
    assert r.status_code == 200, r.text


def test_rest_api_accepts_good_params(server: Server) -> None:
    r = server.api("POST", "/api/v2/dags/lakecore_backfill/dagRuns", json={
        "logical_date": None,
        "conf": {"table": "shop.orders", "start_date": "2026-11-01", "end_date": "2026-11-02"}})
    assert r.status_code == 200, r.text
    assert r.json()["conf"]["end_date"] == "2026-11-02"


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(server.url + "/")
        page.locator("input[name='username']").fill("admin")  # client-side login redirect
        page.locator("input[name='password']").fill(PASSWORD)
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Browse").wait_for()
        yield page
        b.close()


def test_health_page_from_the_browse_menu(browser: Any, server: Server) -> None:
    page = browser
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lake tables").click()
    page.wait_for_url("**/plugin/lake-tables")
    frame = page.frame_locator("iframe")
    frame.get_by_role("heading", name="Lake tables").wait_for()
    card = frame.locator("#shop__customers")
    text = card.inner_text()
    page.screenshot(path=str(server.shots / "health.png"), full_page=True)
    for expected in ("shop.customers", "level-0 backlog: 6", "2 bucket(s), 6 file(s) would be "
                     "compacted", "catalog lock: free", "sorted runs"):
        assert expected in text, text
    assert "not created yet" in frame.locator("#shop__orders").inner_text()
    assert "signed in as admin" in frame.locator("body").inner_text()


def test_backfill_trigger_form(browser: Any, server: Server) -> None:
    page = browser
    page.goto(server.url + "/dags/lakecore_backfill")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Start date").first.wait_for()
    page.screenshot(path=str(server.shots / "trigger.png"), full_page=True)
    text = dialog.inner_text()
    for expected in ("Table", "The table whose partitions are rewritten.", "Start date",
                     "First partition date to rewrite (YYYY-MM-DD).", "End date"):
        assert expected in text, text
    assert "shop.orders" in dialog.inner_html()  # the enum's only choice
    trigger = dialog.get_by_role("button", name="Trigger")
    assert "This field is required" in text and trigger.is_disabled()
    dates = dialog.locator("input[type='date']")
    dates.nth(0).fill("2026-11-01")
    dates.nth(1).fill("2026-11-03")
    page.wait_for_function("() => !document.body.innerText.includes('This field is required')")
    trigger.click()
    page.get_by_role("dialog").wait_for(state="hidden")
    runs = server.api("GET", "/api/v2/dags/lakecore_backfill/dagRuns").json()["dag_runs"]
    assert {"table": "shop.orders", "start_date": "2026-11-01", "end_date": "2026-11-03"} in [
        r["conf"] for r in runs]


def test_ingest_offers_airflow_backfill(browser: Any, server: Server) -> None:
    page = browser
    page.goto(server.url + "/dags/lakecore_ingest")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run this Dag for a range of dates").wait_for()
    assert "Tables" in dialog.inner_text()
