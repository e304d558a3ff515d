"""Where the catalog lock lives, and how its URL reaches a Spark job without being shown.

Airflow 3 hides the metadata DB URL from task processes, so the lock's database is an Airflow
connection of its own (``lakecore_lock`` by default). In deployment it points at the metadata
DB itself (docker-compose: the same PostgreSQL database). On the embedded SQLite default it is
absent and the lock gets its own SQLite file beside the metadata DB (``$AIRFLOW_HOME``): an
SQLite metadata file cannot also hold the lock table (Airflow keeps write transactions open).

The URL is a secret (it may carry a password): it is registered with Airflow's secrets masker,
passed to spark-submit in an environment variable (never in argv, which ``ps``, the Spark UI
and the task log show) and never returned to the UI.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LOCK_URI_ENV = "LAKECORE_LOCK_URI"  # read by lake_airflow.spark_launch in the Spark driver
DEFAULT_SQLITE_NAME = "lakecore_locks.db"
LOCK_TABLE = "paimon_distributed_locks"  # lakecore.lock.sql_schema.TABLE_NAME

# Airflow connection types -> SQLAlchemy drivers lakecore ships (psycopg 3, PyMySQL).
_DRIVERS = {
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


class LockConfigError(ValueError):
    """The lock connection cannot be turned into a database URL (no secret in the text)."""


@dataclass(frozen=True)
class LockTarget:
    """The lock database: ``url`` is secret; ``describe()`` is what logs and the UI show."""

    url: str
    conn_id: str
    source: str  # "connection" or "default-sqlite"

    @property
    def dialect(self) -> str:
        return self.url.split(":", 1)[0].split("+", 1)[0]

    def describe(self) -> str:
        if self.source == "default-sqlite":
            return f"sqlite file beside the metadata DB (no {self.conn_id!r} connection)"
        return f"{self.dialect} database of connection {self.conn_id!r}"

    def catalog_options(self) -> dict[str, str]:
        """lakecore catalog options (with the secret URL: for in-process use only)."""
        return {"lock.enabled": "true", "lock.uri": self.url}


def url_from_connection(conn_type: str | None, host: str | None, login: str | None,
                        password: str | None, port: int | None, schema: str | None,
                        extra: dict[str, Any] | None = None) -> str:
    """A SQLAlchemy URL from an Airflow connection's fields.

    ``{"conn_type": "sqlite", "host": "/path/locks.db"}`` and ``sqlite:////path/locks.db``
    (which Airflow parses into ``schema``) both name an SQLite file; PostgreSQL and
    MySQL/MariaDB connections get lakecore's drivers. ``extra.sqlalchemy_url`` wins if set.
    """
    from sqlalchemy.engine import URL

    extra = extra or {}
    if extra.get("sqlalchemy_url"):
        return str(extra["sqlalchemy_url"])
    kind = (conn_type or "").lower()
    if kind == "sqlite":
        path = host or schema
        if not path or path == ":memory:":
            raise LockConfigError("an SQLite lock connection needs a file path in host")
        return f"sqlite:///{path}"
    driver = _DRIVERS.get(kind)
    if driver is None:
        raise LockConfigError(f"lock connection type {conn_type!r} is not supported: use "
                              "postgres, mysql, mariadb or sqlite")
    url = URL.create(driver, username=login or None, password=password or None,
                     host=host or None, port=port or None, database=schema or None)
    return url.render_as_string(hide_password=False)


def default_sqlite_url() -> str:
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return f"sqlite:///{Path(home).resolve() / DEFAULT_SQLITE_NAME}"


def _find_connection(conn_id: str) -> Any | None:
    """The connection, from inside a task (Task SDK) or a server process (core)."""
    from airflow.exceptions import AirflowNotFoundException

    try:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    except Exception:  # not in a task: the API server reads connections itself
        from airflow.models.connection import Connection

        try:
            return Connection.get_connection_from_secrets(conn_id)
        except AirflowNotFoundException:
            return None


def resolve_lock(conn_id: str = "lakecore_lock") -> LockTarget:
    """The lock database for ``conn_id``; its URL is masked in every Airflow log."""
    conn = _find_connection(conn_id)
    if conn is None:
        log.warning("no Airflow connection %r: the catalog lock uses an SQLite file in "
                    "AIRFLOW_HOME (fine for one machine; define the connection to share the "
                    "lock across machines)", conn_id)
        target = LockTarget(default_sqlite_url(), conn_id, "default-sqlite")
    else:
        url = url_from_connection(conn.conn_type, conn.host, conn.login, conn.password,
                                  conn.port, conn.schema, conn.extra_dejson)
        target = LockTarget(url, conn_id, "connection")
        _mask(conn.password)
    _mask(target.url)
    return target


_SECRET_WORDS = ("key", "secret", "token", "password")


def is_secret_option(key: str) -> bool:
    """Catalog options whose values are credentials (lakecore's ``s3.access-key``,
    ``s3.secret-key``, ``s3.session-token`` and pypaimon's spellings of them): masked in logs,
    never shown by the Lake tables page."""
    return any(w in key.lower() for w in _SECRET_WORDS)


def mask_catalog_options(options: dict[str, str]) -> None:
    """Register the secret values of the tables file's catalog options with the masker."""
    for key, value in options.items():
        if is_secret_option(key):
            _mask(value)


def _mask(secret: str | None) -> None:
    if not secret:
        return
    try:
        from airflow.sdk.log import mask_secret

        mask_secret(secret)
    except Exception:  # outside a task (API server): nothing is logged through the masker
        pass


def ensure_lock_table(target: LockTarget) -> str:
    """Create ``paimon_distributed_locks`` in the lock database if missing; returns its name."""
    from lakecore.lock import lock_from_options

    if target.dialect == "sqlite":
        Path(target.url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    lock = lock_from_options(target.catalog_options())
    try:
        lock.engine()  # type: ignore[attr-defined]  # SqlCatalogLock: creates the table
    finally:
        lock.close()  # type: ignore[attr-defined]
    log.info("catalog lock table %s is ready in the %s", LOCK_TABLE, target.describe())
    return LOCK_TABLE
