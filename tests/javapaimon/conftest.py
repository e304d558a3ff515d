"""The ``java_paimon`` fixture: one Java Paimon oracle JVM per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.javapaimon.client import SKIP_REASON, JavaPaimon, java_available

REQUIRE_ENV = "LAKECORE_REQUIRE_JAVA"  # .ci/run sets it: no Java test may skip in CI


def java_or_skip() -> None:
    """Skip when Java or the oracle jar is missing; fail instead under LAKECORE_REQUIRE_JAVA."""
    if not java_available():
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false"):
            pytest.fail(f"{SKIP_REASON} [{REQUIRE_ENV} is set: Java tests may not skip]",
                        pytrace=False)
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="module")
def java_paimon() -> Iterator[JavaPaimon]:
    java_or_skip()
    with JavaPaimon() as jp:
        yield jp
