"""Crash points for fault-injection tests.

``maybe_crash(step)`` is called at the named steps of the commit path. It does nothing unless
``LAKECORE_FAULT_CRASH_AT`` names that step, then the process SIGKILLs itself: no ``finally``,
no ``atexit``, no buffered write flushed, exactly like a killed Spark driver.
``step@N`` crashes at the N-th time the step is reached (1-based) in this process.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from enum import Enum

ENV_VAR = "LAKECORE_FAULT_CRASH_AT"


class CrashStep(Enum):
    """Where a committer can be killed, in the order a commit reaches them."""

    AFTER_DATA_FILES = "after-data-files"  # messages prepared, commit entered, nothing written
    AFTER_MANIFESTS = "after-manifests"
    AFTER_MANIFEST_LIST = "after-manifest-list"
    AFTER_SNAPSHOT_BEFORE_HINT = "after-snapshot-before-hint"  # under the catalog lock
    AFTER_COMMIT = "after-commit"


_seen: Counter[str] = Counter()


def maybe_crash(step: CrashStep) -> None:
    target = os.environ.get(ENV_VAR)
    if not target:
        return
    name, _, nth = target.partition("@")
    if name != step.value:
        return
    _seen[name] += 1
    if _seen[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
