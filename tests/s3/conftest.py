"""One moto S3 server per test session (``tests/s3/server.py``); every test gets its own bucket.

Without ``.venv-moto`` the tests skip, except under CI (``CI=true``), where a missing install
step must fail rather than hide.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.s3.server import MOTO_PYTHON, REPO_ROOT, MotoServer, moto_available

if str(REPO_ROOT / "plugins") not in sys.path:  # test_s3_airflow imports the plugin package
    sys.path.insert(0, str(REPO_ROOT / "plugins"))


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    if not moto_available():
        message = f"{MOTO_PYTHON} is missing: run `make moto-venv`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(moto_server: MotoServer) -> str:
    return moto_server.new_bucket()


@pytest.fixture
def s3_options(moto_server: MotoServer, bucket: str) -> dict[str, str]:
    """Catalog options of an empty warehouse in a fresh bucket (lock protocol, no lock)."""
    return {**moto_server.catalog_options(bucket), "lock.enabled": "false"}
