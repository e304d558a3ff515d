"""The database drivers the SQL catalog lock runs on, and what each needs to connect.

The lock speaks plain SQL through SQLAlchemy's synchronous engine, so any DB-API driver that
SQLAlchemy ships a dialect for works. Those below are the ones tested (``tests/lock``); any
other driver in a ``lock.uri`` is refused when the catalog is created, with the URL forms that
work, rather than failing a commit halfway. Contention is recognised the same way on all of
them (``SqlCatalogLock._try_insert``: a refused insert, then a look at the row), so no driver's
error codes matter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL

# dialect -> SQLAlchemy driver names (the part after '+'), the first one lakecore ships
SUPPORTED: dict[str, tuple[str, ...]] = {
    "postgresql": ("psycopg", "psycopg2", "pg8000"),
    "mysql": ("pymysql", "mysqldb"),
    "mariadb": ("pymysql", "mysqldb"),
    "sqlite": ("pysqlite",),
}
# the PyPI distribution that provides each driver, for the error message
_DISTRIBUTIONS = {
    "psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "pg8000": "pg8000",
    "pymysql": "PyMySQL", "mysqldb": "mysqlclient", "pysqlite": "(Python's sqlite3)",
}
_EXAMPLES = {
    "postgresql": "postgresql+psycopg://user@host:5432/airflow",
    "mysql": "mysql+pymysql://user@host:3306/airflow",
    "mariadb": "mariadb+pymysql://user@host:3306/airflow",
    "sqlite": "sqlite:////path/to/lakecore-locks.db",
}
# the connect timeout's keyword for drivers that do not call it connect_timeout
_TIMEOUT_ARG = {"pg8000": "timeout", "pysqlite": None}


def unsupported(url: URL) -> str | None:
    """Why ``url`` cannot carry the lock (naming the driver and the URL form to use), or None
    when its driver is supported and importable here."""
    dialect, driver = url.get_backend_name(), url.get_driver_name()
    if dialect not in SUPPORTED:
        return (f"catalog lock database {dialect!r} is not supported: use PostgreSQL, "
                f"MySQL/MariaDB or SQLite (e.g. {_EXAMPLES['postgresql']})")
    drivers = SUPPORTED[dialect]
    forms = ", ".join(f"{dialect}+{d}://" for d in drivers if d != "pysqlite") or "sqlite://"
    if driver not in drivers:
        return (f"driver {driver!r} ({dialect}+{driver}://) is not supported by the catalog "
                f"lock: use one of {forms} (e.g. {_EXAMPLES[dialect]})")
    try:
        url.get_dialect().import_dbapi()
    except ImportError:
        return (f"driver {driver!r} ({dialect}+{driver}://) is not installed in this Python: "
                f"pip install {_DISTRIBUTIONS[driver]}, or use {_EXAMPLES[dialect]}")
    return None


def connect_args(url: URL, timeout_seconds: int) -> dict[str, Any]:
    """The driver's connect arguments bounding how long a connection attempt may take."""
    driver = url.get_driver_name()
    name = _TIMEOUT_ARG.get(driver, "connect_timeout")
    return {} if name is None else {name: timeout_seconds}
