"""Reports how many operations the model tests exercised, and removes their tables."""

from __future__ import annotations

from typing import Any

from tests.model.machine import OPS, cleanup_base
from tests.model.profiles import PROFILE


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not OPS:
        return
    total = sum(n for name, n in OPS.items() if not name.startswith(" "))
    tr = terminalreporter
    tr.section(f"lakecore model test ({PROFILE} profile)")
    tr.write_line(f"{total} operations exercised")
    for name, n in sorted(OPS.items(), key=lambda kv: (kv[0].startswith(" "), -kv[1])):
        tr.write_line(f"  {n:7d}  {name}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    cleanup_base()
