"""``make airflow`` as a person uses it, in headless Debian Chromium (Playwright), against the
stack started the way ``make airflow`` starts it (``python -m lake_airflow.local_airflow`` on
an installation like the one ``make demo`` leaves, on a free port): log in with the
installation's generated password, trigger ``lakecore_ingest`` from its form, the scheduler
runs it, its task log reads in the UI, the Lake tables page shows the new snapshot; a backfill
with end before start is refused and changes nothing; a valid backfill from the form
overwrites its partition and the rollback command its log prints undoes it. Also: a token
one installation minted is refused by another; no secret value reaches the pages, the API,
XComs or task logs; SIGTERM stops every component.

Screenshots of every page visited go to ``$LAKECORE_SCREENSHOT_DIR`` or, unset, a ``shots``
folder under pytest's temp dir; the folder is printed (``-s``) and named in failures.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lake_airflow.demo import (
    airflow_env,
    orders_extract,
    orders_state,
    read_table,
    write_customers,
    write_orders,
)
from lake_airflow.installation import Installation, write_config
from lake_airflow.stack import free_port

from tests.airflow.conftest import PLUGINS, REPO, migrate_db
from tests.airflow.test_ui import CHROMIUM, api_server

pytestmark = pytest.mark.slow
DAY, NEXT_DAY = "2026-11-01", "2026-11-02"


@dataclass
class Local:
    inst: Installation
    url: str
    proc: subprocess.Popen[bytes]
    out: Path
    shots: Path
    token: str = ""

    def api(self, method: str, path: str, **kw: Any) -> requests.Response:
        return requests.request(method, self.url + path, timeout=120,
                                headers={"Authorization": f"Bearer {self.token}"}, **kw)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})
        assert r.status_code == 200, r.text
        return list(r.json()["dag_runs"])

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                run = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}").json()
            except requests.Timeout:  # a busy machine: ask again
                run = {}
            if run.get("state") in ("success", "failed"):
                return dict(run)
            assert time.monotonic() < deadline, f"{dag_id} {run_id} still {run.get('state')}"
            assert self.proc.poll() is None, self.out.read_text()[-3000:]
            time.sleep(3)

    def tasks(self, dag_id: str, run_id: str) -> dict[str, str]:
        r = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}/taskInstances")
        return {t["task_id"]: t["state"] for t in r.json()["task_instances"]}


def quote(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")


def component_pids(out: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"^\s+(\S+): pid (\d+)$", out, re.M)}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("LAKECORE_SCREENSHOT_DIR") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the pages this test visits: {folder}")
    return folder


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, shots: Path, spark_zip: Path
          ) -> Iterator[Local]:
    """An installation as ``make demo`` leaves one (config, secrets, migrated SQLite DB,
    landing data; no DAG run yet), and ``make airflow``'s process on it."""
    if not shutil.which(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    inst = Installation(tmp_path_factory.mktemp("local") / "demo")
    write_config(inst.home)
    migrate_db(airflow_env(inst.home, inst.warehouse, inst.landing))
    write_orders(inst.landing, DAY)
    write_customers(inst.landing, DAY, 0)
    port = free_port()
    out = inst.root / "make-airflow.out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKECORE_"))}
    with open(out, "wb") as f:  # as the Makefile runs it
        proc = subprocess.Popen([sys.executable, "-m", "lake_airflow.local_airflow", "--root",
                                 str(inst.root), "--port", str(port)], cwd=REPO, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**env, "PYTHONPATH": str(PLUGINS)})
    lo = Local(inst, f"http://127.0.0.1:{port}", proc, out, shots)
    try:
        deadline = time.monotonic() + 300
        while "Airflow is up" not in out.read_text():
            assert proc.poll() is None, out.read_text()[-5000:]
            assert time.monotonic() < deadline, "make airflow did not come up in 300 s"
            time.sleep(1)
        r = requests.post(lo.url + "/auth/token", timeout=30, json={
            "username": "admin", "password": inst.admin_password()})
        assert r.status_code in (200, 201), r.text
        lo.token = r.json()["access_token"]
        yield lo
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)


@pytest.fixture(scope="module")
def page(local: Local) -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(60_000)
        yield pg
        b.close()


def shot(page: Any, local: Local, name: str) -> None:
    page.screenshot(path=str(local.shots / f"{name}.png"), full_page=True)


def open_trigger_form(page: Any, local: Local, dag_id: str) -> Any:
    page.goto(f"{local.url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for()
    return dialog


def task_log_text(page: Any, local: Local, dag_id: str, run_id: str, task_id: str,
                  expect: str, name: str) -> str:
    """The task's log as its page in the UI shows it (waits for ``expect`` to appear)."""
    page.goto(f"{local.url}/dags/{dag_id}/runs/{quote(run_id)}/tasks/{task_id}")
    page.get_by_text(expect).first.wait_for()
    shot(page, local, name)
    return str(page.locator("body").inner_text())


def backfill_form(page: Any, local: Local, start: str, end: str, name: str) -> None:
    dialog = open_trigger_form(page, local, "lakecore_backfill")
    dates = dialog.locator("input[type='date']")
    dates.nth(0).fill(start)
    dates.nth(1).fill(end)
    shot(page, local, name)
    dialog.get_by_role("button", name="Trigger").click()


def new_run(local: Local, dag_id: str, known: set[str], timeout: float = 60,
            logical_date: str | None = None) -> dict[str, Any] | None:
    """The first run of ``dag_id`` not in ``known`` (its logical date starting so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fresh = [r for r in local.runs(dag_id) if r["dag_run_id"] not in known
                 and (r["logical_date"] or "").startswith(logical_date or "")]
        if fresh:
            return fresh[0]
        time.sleep(2)
    return None


def test_make_airflow_in_the_browser(local: Local, page: Any) -> None:
    inst = local.inst
    # log in with the installation's own password
    page.goto(local.url + "/")
    page.locator("input[name='username']").wait_for()
    shot(page, local, "01-login")
    page.locator("input[name='username']").fill("admin")
    page.locator("input[name='password']").fill(inst.admin_password())
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Browse").wait_for()
    shot(page, local, "02-home")

    # trigger lakecore_ingest for DAY from its form; the scheduler runs it
    dialog = open_trigger_form(page, local, "lakecore_ingest")
    dialog.get_by_test_id("datetime-input").click()  # a popover: a date and a time box
    picker = page.locator("[data-scope='popover'][data-part='content']").locator("input")
    picker.nth(0).fill(DAY.replace("-", "/"))
    picker.nth(0).press("Enter")
    picker.nth(1).fill("00:00")
    picker.nth(1).press("Enter")
    dialog.get_by_text("Trigger Dag - lakecore_ingest").click()  # closes the popover
    assert dialog.get_by_test_id("datetime-input").inner_text() == "Nov 01, 2026 00:00"
    tables = dialog.get_by_role("combobox", name="Select one or multiple values")
    tables.fill("shop.orders")  # one Spark job, not one per table
    tables.press("Enter")
    shot(page, local, "03-ingest-form")
    dialog.get_by_role("button", name="Trigger").click()
    page.get_by_role("dialog").wait_for(state="hidden")
    made = new_run(local, "lakecore_ingest", set(), logical_date=f"{DAY}T00:00:00")
    assert made is not None and made["run_type"] == "manual", local.runs("lakecore_ingest")
    run_id = made["dag_run_id"]
    run = local.wait_run("lakecore_ingest", run_id)
    tasks = local.tasks("lakecore_ingest", run_id)
    assert run["state"] == "success", tasks
    assert (tasks["ingest_shop__orders"], tasks["ingest_shop__customers"]) == (
        "success", "skipped")
    assert run["conf"]["tables"] == ["shop.orders"]
    assert run["end_date"] > run["start_date"] > f"{DAY}T23"  # started when it ran
    text = task_log_text(page, local, "lakecore_ingest", run_id, "ingest_shop__orders",
                         "rows -> snapshot", "04-ingest-log")
    assert "200 rows -> snapshot(s) [1]" in text and "Could not read served logs" not in text

    # the Lake tables page shows the new snapshot
    assert local.api("GET", "/lake/api/tables/shop.orders").json()["latest_snapshot"] == 1
    page.goto(local.url + "/plugin/lake-tables")
    card = page.frame_locator("iframe").locator("#shop__orders")
    card.get_by_text("Latest snapshots").wait_for()
    shot(page, local, "05-lake-tables")
    assert "APPEND" in card.inner_text()

    # a backfill whose end is before its start is refused, and changes nothing
    known = {r["dag_run_id"] for r in local.runs("lakecore_backfill")}
    backfill_form(page, local, NEXT_DAY, DAY, "06-backfill-form-refused")
    refused = new_run(local, "lakecore_backfill", known, timeout=20)
    if refused is None:  # refused at trigger time: the form says why
        message = page.get_by_role("dialog").inner_text()
        shot(page, local, "07-backfill-refused")
    else:  # refused by the run's first task, which changes nothing
        run_id = refused["dag_run_id"]
        assert local.wait_run("lakecore_backfill", run_id)["state"] == "failed"
        tasks = local.tasks("lakecore_backfill", run_id)
        assert tasks.pop("plan_partitions") == "failed", tasks
        assert set(tasks.values()) <= {"upstream_failed", None}, tasks
        message = task_log_text(page, local, "lakecore_backfill", run_id, "plan_partitions",
                                "before Start date", "07-backfill-refused")
    assert re.search(r"End date.*before.*Start date", message, re.S), message
    orders = local.api("GET", "/lake/api/tables/shop.orders").json()
    assert orders["latest_snapshot"] == 1 and orders["tags"] == []
    assert not (inst.warehouse / "shop.db" / "orders" / f"dt={NEXT_DAY}").exists()
    page.keyboard.press("Escape")

    # a valid backfill of DAY with a corrected extract overwrites exactly that partition
    write_orders(inst.landing, DAY, version=2)
    known = {r["dag_run_id"] for r in local.runs("lakecore_backfill")}
    backfill_form(page, local, DAY, DAY, "08-backfill-form")
    page.get_by_role("dialog").wait_for(state="hidden")
    made = new_run(local, "lakecore_backfill", known)
    assert made is not None, "the backfill form created no run"
    run_id = made["dag_run_id"]
    assert local.wait_run("lakecore_backfill", run_id)["state"] == "success", \
        local.tasks("lakecore_backfill", run_id)
    warehouse = str(inst.warehouse)
    assert orders_state(read_table(warehouse, "shop.orders")) == orders_state(
        orders_extract(DAY, 2))
    text = task_log_text(page, local, "lakecore_backfill", run_id, "tag_before_backfill",
                         "lakecore rollback", "09-backfill-tag-log")
    command = re.search(r"lakecore rollback --warehouse (\S+) --table (\S+) --tag (\S+)", text)
    assert command is not None, text
    assert command.group(1) == warehouse and command.group(2) == "shop.orders"
    done = subprocess.run([str(Path(sys.executable).parent / "lakecore"), "rollback",
                           "--warehouse", command.group(1), "--table", command.group(2),
                           "--tag", command.group(3)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert orders_state(read_table(warehouse, "shop.orders")) == orders_state(
        orders_extract(DAY, 1))
    page.goto(f"{local.url}/dags/lakecore_backfill/runs/{quote(run_id)}")
    page.get_by_text("overwrite_partition").first.wait_for()
    shot(page, local, "10-backfill-run")


def test_no_secret_in_pages_api_xcoms_or_logs(local: Local, page: Any) -> None:
    secrets = [(local.inst.home / "secrets" / "jwt_secret").read_text(),
               local.inst.admin_password()]
    seen = [page.content(), local.api("GET", "/lake/api/tables").text,
            local.api("GET", "/api/v2/config").text]
    for dag_id in ("lakecore_ingest", "lakecore_backfill"):
        for run in local.runs(dag_id):
            rid = quote(run["dag_run_id"])
            seen.append(json.dumps(run))
            for task_id in local.tasks(dag_id, run["dag_run_id"]):
                seen.append(local.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{rid}/"
                                      f"taskInstances/{task_id}/xcomEntries").text)
    seen += [p.read_text(errors="replace") for p in local.inst.task_logs.rglob("*.log")]
    seen += [p.read_text(errors="replace") for p in local.inst.component_logs.glob("*.log")]
    assert len(seen) > 10
    for secret in secrets:
        assert len(secret) >= 16 and not any(secret in text for text in seen)


def test_a_token_from_another_installation_is_refused(
        local: Local, tmp_path_factory: pytest.TempPathFactory) -> None:
    other = Installation(tmp_path_factory.mktemp("other") / "demo")
    write_config(other.home)
    env = airflow_env(other.home, other.warehouse, other.landing)
    migrate_db(env)
    with api_server(env, other.root) as url:
        r = requests.post(url + "/auth/token", timeout=30, json={
            "username": "admin", "password": other.admin_password()})
        assert r.status_code in (200, 201), r.text
        theirs = r.json()["access_token"]
        mine = requests.post(url + "/auth/token", timeout=30, json={
            "username": "admin", "password": local.inst.admin_password()})
        assert mine.status_code == 401  # each installation has its own admin password
        for base, token in ((url, local.token), (local.url, theirs)):
            got = requests.get(base + "/api/v2/dags", timeout=30,
                               headers={"Authorization": f"Bearer {token}"})
            assert got.status_code in (401, 403), (base, got.status_code)
        ok = requests.get(url + "/api/v2/dags", timeout=30,
                          headers={"Authorization": f"Bearer {theirs}"})
        assert ok.status_code == 200


def test_sigterm_stops_every_component(local: Local) -> None:
    pids = component_pids(local.out.read_text())
    assert set(pids) == {"api-server", "scheduler", "dag-processor", "triggerer"}
    local.proc.send_signal(signal.SIGTERM)
    assert local.proc.wait(timeout=120) == 0
    assert "Airflow stopped." in local.out.read_text()
    assert not [name for name, pid in pids.items() if alive(pid)]
    with pytest.raises(requests.ConnectionError):
        requests.get(local.url + "/api/v2/monitor/health", timeout=5)
