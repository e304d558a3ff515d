"""The lock databases the tests run against: SQLite always, PostgreSQL / MariaDB when their
URL is in the environment (``.ci/run`` sets both)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

BACKENDS = ("sqlite", "postgresql", "mysql")
ENV_VARS = {"postgresql": "LAKECORE_TEST_PG_URL", "mysql": "LAKECORE_TEST_MYSQL_URL"}
REPO_ROOT = Path(__file__).resolve().parents[2]


def backend_url(backend: str, tmp_path: Path) -> str:
    """The SQLAlchemy URL for ``backend``; skips the test (with the reason) when unset."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/lakecore-locks.db"
    env = ENV_VARS[backend]
    url = os.environ.get(env)
    if not url:
        pytest.skip(f"{env} is not set: no {backend} database to test the lock against")
    return url


def unique_key() -> str:
    """A catalog key of its own per test, so tests sharing one server never see each other."""
    return f"test-{uuid.uuid4().hex[:12]}"


def child_env() -> dict[str, str]:
    """Environment for worker subprocesses: the repo importable, no inherited crash hook."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("LAKECORE_FAULT_CRASH_AT", None)
    return env
