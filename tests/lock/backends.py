"""The lock databases the tests run against: SQLite always, PostgreSQL / MariaDB on the test
servers of ``tests/databases.py`` (``make services``; ``.ci/run`` starts both)."""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path

from sqlalchemy.engine import make_url

from lakecore.lock.drivers import SUPPORTED
from tests.databases import database_url

BACKENDS = ("sqlite", "postgresql", "mysql")
REPO_ROOT = Path(__file__).resolve().parents[2]


def backend_url(backend: str, tmp_path: Path) -> str:
    """The SQLAlchemy URL for ``backend``; a missing server skips the test (fails it in CI)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/lakecore-locks.db"
    return database_url(backend)


# SQLAlchemy driver name -> the module that provides it (lakecore.lock.drivers.SUPPORTED)
_DRIVER_MODULES = {"psycopg": "psycopg", "psycopg2": "psycopg2", "pg8000": "pg8000",
                   "pymysql": "pymysql", "mysqldb": "MySQLdb"}


def installed_lock_backends() -> list[str]:
    """``sqlite`` and ``<dialect>+<driver>`` for every supported driver importable here."""
    found = ["sqlite"]
    for dialect in ("postgresql", "mysql"):
        for driver in SUPPORTED[dialect]:
            if importlib.util.find_spec(_DRIVER_MODULES[driver]) is not None:
                found.append(f"{dialect}+{driver}")
    return found


def lock_backend_url(lock_backend: str, tmp_path: Path) -> str:
    """The URL of ``lock_backend`` (``dialect+driver``) on the test server of its dialect."""
    if lock_backend == "sqlite":
        return backend_url("sqlite", tmp_path)
    dialect = lock_backend.split("+")[0]
    url = make_url(backend_url(dialect, tmp_path)).set(drivername=lock_backend)
    return url.render_as_string(hide_password=False)


def unique_key() -> str:
    """A catalog key of its own per test, so tests sharing one server never see each other."""
    return f"test-{uuid.uuid4().hex[:12]}"


def child_env() -> dict[str, str]:
    """Environment for worker subprocesses: the repo importable, no inherited crash hook."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("LAKECORE_FAULT_CRASH_AT", None)
    return env
