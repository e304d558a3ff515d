"""Suite-wide: which tests need a database server, their count at the end of the run, and (in
CI, ``LAKECORE_REQUIRE_DATABASES``) a failed run when one of them did not execute.

A test needs PostgreSQL or MariaDB when it is marked ``database("postgresql")``, when it takes
the Airflow ``pg_database`` fixture, or when a ``backend`` / ``lock_backend`` parameter names
the server (``tests/lock``). ``tests/databases.py`` decides skip or fail for a missing server.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.databases import KINDS, LABELS, MYSQL, POSTGRESQL, REQUIRE_ENV, required

_PARAM_NAMES = ("backend", "lock_backend")
_needs: dict[str, str] = {}  # nodeid -> kind


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


def _outcomes(terminalreporter: Any) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            kind = _needs.get(getattr(report, "nodeid", ""))
            if kind is None:
                continue
            # a test's setup skip and its call are separate reports: count the test once
            if outcome == "passed" and report.when != "call":
                continue
            counts[kind][outcome] += 1
    return counts


def _skipped_database_tests(terminalreporter: Any) -> list[str]:
    return sorted({r.nodeid for r in terminalreporter.stats.get("skipped", [])
                   if r.nodeid in _needs})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _needs:
        return
    counts = _outcomes(terminalreporter)
    terminalreporter.section("database tests")
    for kind in KINDS:
        c = counts[kind]
        terminalreporter.write_line(
            f"{LABELS[kind]}: {c['passed']} passed, {c['failed']} failed, "
            f"{c['error']} errors, {c['skipped']} skipped")
    skipped = _skipped_database_tests(terminalreporter)
    if skipped and required():
        terminalreporter.write_line(
            f"{REQUIRE_ENV} is set and {len(skipped)} database tests skipped: the run fails",
            red=True)
        for nodeid in skipped:
            terminalreporter.write_line(f"  {nodeid}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not required() or exitstatus != 0:
        return
    if _skipped_database_tests(reporter):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
