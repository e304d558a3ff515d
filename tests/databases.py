"""The test database servers: where they are, and what a test does when one is missing.

PostgreSQL and MariaDB are started by ``make services`` (``.ci/services``; ``.ci/run`` runs it
first). A test that needs one asks :func:`database_url`:

* ``LAKECORE_TEST_PG_URL`` / ``LAKECORE_TEST_MYSQL_URL`` name the server when set;
* otherwise the server ``make services`` starts (127.0.0.1:5432 / :3306) is used if its port
  answers, so ``make services && make test`` needs no exports;
* otherwise the test skips with a reason naming ``make services`` -- or, when
  ``LAKECORE_REQUIRE_DATABASES`` is set (``.ci/run`` sets it), fails: CI runs every
  database test.

``tests/conftest.py`` counts the database tests per server at the end of the run.
"""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest

POSTGRESQL = "postgresql"
MYSQL = "mysql"
KINDS = (POSTGRESQL, MYSQL)
LABELS = {POSTGRESQL: "PostgreSQL", MYSQL: "MariaDB"}
ENV_VARS = {POSTGRESQL: "LAKECORE_TEST_PG_URL", MYSQL: "LAKECORE_TEST_MYSQL_URL"}
# what `make services` starts (.ci/services prints the same URLs)
DEFAULT_URLS = {
    POSTGRESQL: "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    MYSQL: "mysql+pymysql://root@127.0.0.1:3306/test",
}
_DEFAULT_PORTS = {POSTGRESQL: 5432, MYSQL: 3306}
REQUIRE_ENV = "LAKECORE_REQUIRE_DATABASES"
HINT = "run `make services` (installs and starts PostgreSQL and MariaDB on 127.0.0.1)"


def required() -> bool:
    """Whether a missing database fails the test instead of skipping it (CI)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


def unavailable(kind: str, why: str) -> NoReturn:
    """Skip (or, under ``LAKECORE_REQUIRE_DATABASES``, fail) a test for want of ``kind``."""
    reason = f"no {LABELS[kind]} test database: {why}; {HINT}"
    if required():
        pytest.fail(f"{reason} [{REQUIRE_ENV} is set: database tests may not skip]",
                    pytrace=False)
    pytest.skip(reason)


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def database_url(kind: str) -> str:
    """The SQLAlchemy URL of the ``kind`` test server (see the module docstring)."""
    env = ENV_VARS[kind]
    url = os.environ.get(env)
    if url:
        return url
    if _port_answers(_DEFAULT_PORTS[kind]):
        return DEFAULT_URLS[kind]
    unavailable(kind, f"{env} is not set and nothing answers on 127.0.0.1:"
                      f"{_DEFAULT_PORTS[kind]}")
