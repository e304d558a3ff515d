from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import delete, inspect

from lakecore.lock import SqlCatalogLock
from lakecore.lock.sql import LOCKS
from lakecore.lock.sql_schema import LEGACY_LOCKS
from tests.lock.backends import BACKENDS, backend_url, unique_key


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def lock_url(backend: str, tmp_path) -> str:
    return backend_url(backend, tmp_path)


@pytest.fixture
def catalog_key() -> str:
    return unique_key()


@pytest.fixture
def make_lock(lock_url: str, catalog_key: str) -> Iterator[Callable[..., SqlCatalogLock]]:
    """Locks on the test's database under the test's own catalog key; cleaned up after."""
    made: list[SqlCatalogLock] = []

    def make(**kwargs: Any) -> SqlCatalogLock:
        kwargs.setdefault("catalog_key", catalog_key)
        lock = SqlCatalogLock(lock_url, **kwargs)
        made.append(lock)
        return lock

    yield make
    if made:
        engine = made[0].engine()
        with engine.begin() as conn:
            conn.execute(delete(LOCKS).where(LOCKS.c.lock_id.like(f"{catalog_key}.%")))
            if inspect(conn).has_table(LEGACY_LOCKS.name):
                conn.execute(delete(LEGACY_LOCKS).where(
                    LEGACY_LOCKS.c.lock_id.like(f"{catalog_key}.%")))
    for lock in made:
        lock.close()
