"""Airflow tests: the plugin package on sys.path, Airflow environments in temp dirs, and a
throw-away PostgreSQL database per test session when ``LAKECORE_TEST_PG_URL`` is set.

``migrate_db(env)`` is ``airflow db migrate``; a SQLite metadata DB is a copy of one migrated
once per session (a migrated SQLite DB holds nothing of its Airflow home: the schema, the log
templates, the default pool), which saves an Airflow CLI start and the migrations per home.

Airflow reads its configuration once per process, so everything that runs Airflow (DAG
parsing, ``dag.test()``, the api-server) runs in a subprocess with its own environment
(``lake_airflow.demo.airflow_env``); this process imports only the plugin's Airflow-free modules.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.databases import POSTGRESQL, database_url, unavailable

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
if str(PLUGINS) not in sys.path:
    sys.path.insert(0, str(PLUGINS))

SQLITE_CONN = "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"
_template: dict[str, Path] = {}  # "dir": the session's template directory, "db": once migrated


def run_python(code: str, env: dict[str, str], timeout: float = 300) -> str:
    """Run ``code`` in a fresh interpreter with ``env``; its stdout (fails with its output)."""
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def airflow_cli(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    cmd = [str(Path(sys.executable).parent / "airflow"), *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"airflow {args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="session", autouse=True)
def _migrated_db_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Where ``migrate_db`` keeps the session's migrated SQLite metadata DB (made lazily)."""
    _template["dir"] = tmp_path_factory.mktemp("airflow-db-template")
    yield
    _template.clear()


def migrate_db(env: dict[str, str]) -> None:
    """``airflow db migrate`` for ``env``'s metadata DB. A SQLite DB that does not exist yet
    is a copy of the session's template, migrated by the first call."""
    conn = env.get(SQLITE_CONN, "")
    target = Path(conn.removeprefix("sqlite:///")) if conn.startswith("sqlite:///") else None
    if target is None or target.exists() or "dir" not in _template:
        airflow_cli(env, "db", "migrate")
        return
    if "db" not in _template:
        home = _template["dir"] / "home"
        home.mkdir()
        db = _template["dir"] / "airflow.db"
        airflow_cli({**env, "AIRFLOW_HOME": str(home), SQLITE_CONN: f"sqlite:///{db}"},
                    "db", "migrate")
        _template["db"] = db
    shutil.copyfile(_template["db"], target)


@pytest.fixture(scope="session")
def spark_zip() -> Path:
    """``dist/lakecore.zip`` from the Makefile target, as deployments ship it."""
    subprocess.run(["make", "-s", "dist/lakecore.zip"], cwd=REPO, check=True, timeout=120,
                   capture_output=True)
    return REPO / "dist" / "lakecore.zip"


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database (dropped afterwards) on the server of LAKECORE_TEST_PG_URL."""
    url = database_url(POSTGRESQL)
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"lakecore_af_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as e:  # no CREATE DATABASE right: say so rather than pollute `test`
        admin.dispose()
        unavailable(POSTGRESQL, f"cannot create a database on {url}: {type(e).__name__}: {e}")
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
