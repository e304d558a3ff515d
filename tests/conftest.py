"""Suite-wide: which tests need a database server or the Java Paimon oracle, their count at
the end of the run, and (in CI: ``LAKECORE_REQUIRE_DATABASES``, ``LAKECORE_REQUIRE_JAVA``) a
failed run when one of them did not execute.

A test needs PostgreSQL or MariaDB when it is marked ``database("postgresql")``, when it takes
the Airflow ``pg_database`` fixture, or when a ``backend`` / ``lock_backend`` parameter names
the server (``tests/lock``); ``tests/databases.py`` decides skip or fail for a missing server.
A test that takes the ``java_paimon`` fixture (``tests/javapaimon``) needs the oracle jar.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.databases import KINDS, LABELS, MYSQL, POSTGRESQL, REQUIRE_ENV, required

JAVA = "java"
JAVA_REQUIRE_ENV = "LAKECORE_REQUIRE_JAVA"
_PARAM_NAMES = ("backend", "lock_backend")
_needs: dict[str, str] = {}  # nodeid -> the database kind (a database test counts there)
_java: set[str] = set()  # nodeids of the tests that run Java Paimon


def _kind_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("database")
    if marker is not None:
        return str(marker.args[0])
    if "pg_database" in getattr(item, "fixturenames", ()):
        return POSTGRESQL
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in _PARAM_NAMES:
        value = str(params.get(name, ""))
        for kind in KINDS:
            if value == kind or value.startswith(kind + "+") or (
                    kind == MYSQL and value.startswith("mariadb")):
                return kind
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "database(kind): needs the PostgreSQL or MariaDB test server "
        "(`make services`); kind is 'postgresql' or 'mysql'")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = _kind_of(item)
        if kind is not None:
            _needs[item.nodeid] = kind
        if "java_paimon" in getattr(item, "fixturenames", ()):
            _java.add(item.nodeid)


def _java_required() -> bool:
    return os.environ.get(JAVA_REQUIRE_ENV, "") not in ("", "0", "false")


def _outcomes(terminalreporter: Any) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in (*KINDS, JAVA)}
    for outcome in ("passed", "failed", "error", "skipped", "xfailed"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            kinds = [k for k in (_needs.get(nodeid), JAVA if nodeid in _java else None) if k]
            for kind in kinds:
                # a test's setup skip and its call are separate reports: count the test once
                if outcome == "passed" and report.when != "call":
                    continue
                counts[kind][outcome] += 1
    return counts


def _skipped_required_tests(terminalreporter: Any) -> list[str]:
    """The database tests (under LAKECORE_REQUIRE_DATABASES) and Java tests (under
    LAKECORE_REQUIRE_JAVA) that skipped."""
    return sorted({r.nodeid for r in terminalreporter.stats.get("skipped", [])
                   if (required() and r.nodeid in _needs)
                   or (_java_required() and r.nodeid in _java)})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _needs and not _java:
        return
    counts = _outcomes(terminalreporter)
    terminalreporter.section("database and Java Paimon tests")
    for kind, label in ((POSTGRESQL, LABELS[POSTGRESQL]), (MYSQL, LABELS[MYSQL]),
                        (JAVA, "Java Paimon")):
        c = counts[kind]
        terminalreporter.write_line(
            f"{label}: {c['passed']} passed, {c['failed']} failed, {c['error']} errors, "
            f"{c['skipped']} skipped, {c['xfailed']} xfailed")
    skipped = _skipped_required_tests(terminalreporter)
    if skipped:
        terminalreporter.write_line(
            f"{REQUIRE_ENV} / {JAVA_REQUIRE_ENV} is set and {len(skipped)} of those tests "
            "skipped: the run fails", red=True)
        for nodeid in skipped:
            terminalreporter.write_line(f"  {nodeid}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    if _skipped_required_tests(reporter):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
