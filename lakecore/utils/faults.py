"""Crash points for fault-injection tests: the one mechanism every writing operation uses.

``maybe_crash(step)`` is called at the step boundaries of every operation that writes or deletes
table files: data-file writing, compaction, commit (APPEND, COMPACT, OVERWRITE), partition
expiry, snapshot expiry, orphan removal, tags, rollback and schema changes. It does nothing
unless ``LAKECORE_FAULT_CRASH_AT`` names that step; then the process SIGKILLs itself: no
``finally``, no ``atexit``, no buffered write flushed, exactly like a killed Spark driver or
executor.
``step@N`` crashes the N-th time the step is reached (1-based) in this process.

Every member of ``CrashStep`` is exercised by ``tests/faults/test_crash_matrix.py`` (a test
there fails when a step is added without a matrix case).

Transient I/O errors are the second kind of fault: ``maybe_io_error(step)`` raises an
``OSError`` (EIO) when ``LAKECORE_FAULT_IO_ERROR_AT`` names that ``IOFaultStep``, once, the
N-th time it is reached (``step@N``), as a flaky disk or network does; the process lives on.
"""

from __future__ import annotations

import errno
import os
import signal
from collections import Counter
from enum import Enum

ENV_VAR = "LAKECORE_FAULT_CRASH_AT"


class CrashStep(Enum):
    """Where a process can be killed. Grouped by operation, in the order each reaches them."""

    # -- data files (RollingFileWriter: ingest, overwrite, compaction rewrites) --------------
    WRITE_MID_DATA_FILE = "write-mid-data-file"  # a row group written, the file not closed
    WRITE_AFTER_DATA_FILE = "write-after-data-file"  # a data file closed (more may follow)

    # -- dedicated and inline compaction (lakecore.compact) ----------------------------------
    COMPACT_AFTER_REWRITE = "compact-after-rewrite"  # one rewrite's output files written
    COMPACT_BEFORE_COMMIT = "compact-before-commit"  # every bucket compacted, no commit yet

    # -- commit (FileStoreCommit: APPEND, COMPACT and OVERWRITE snapshots) -------------------
    AFTER_DATA_FILES = "after-data-files"  # messages prepared, commit entered, nothing written
    AFTER_MANIFESTS = "after-manifests"
    AFTER_MANIFEST_LIST = "after-manifest-list"
    AFTER_INDEX_MANIFEST = "after-index-manifest"  # a new index manifest written, no snapshot
    AFTER_SNAPSHOT_BEFORE_HINT = "after-snapshot-before-hint"  # under the catalog lock
    AFTER_COMMIT = "after-commit"

    # -- partition expiry (then an OVERWRITE commit: the commit steps above) -----------------
    PARTITION_EXPIRE_AFTER_RECORD = "partition-expire-after-record"  # record written, no commit

    # -- snapshot expiry (Paimon's order: data, changelog, manifests, lists, snapshots, hint) -
    EXPIRE_MID_DATA_FILES = "expire-mid-data-files"  # "mid": after a file deleted (@N: N-th)
    EXPIRE_AFTER_DATA_FILES = "expire-after-data-files"
    EXPIRE_MID_CHANGELOG_FILES = "expire-mid-changelog-files"
    EXPIRE_AFTER_CHANGELOG_FILES = "expire-after-changelog-files"
    EXPIRE_MID_MANIFESTS = "expire-mid-manifests"
    EXPIRE_AFTER_MANIFESTS = "expire-after-manifests"
    EXPIRE_MID_MANIFEST_LISTS = "expire-mid-manifest-lists"
    EXPIRE_AFTER_MANIFEST_LISTS = "expire-after-manifest-lists"
    EXPIRE_MID_SNAPSHOTS = "expire-mid-snapshots"
    EXPIRE_AFTER_SNAPSHOTS = "expire-after-snapshots"  # before the EARLIEST hint

    # -- orphan removal ----------------------------------------------------------------------
    ORPHAN_MID_DELETE = "orphan-mid-delete"  # after an orphan deleted

    # -- tags --------------------------------------------------------------------------------
    TAG_AFTER_CREATE = "tag-after-create"  # tag file published, caller not told
    TAG_DELETE_AFTER_TAG_FILE = "tag-delete-after-tag-file"  # tag gone, its files not yet
    TAG_DELETE_MID_FILES = "tag-delete-mid-files"

    # -- schema evolution (SchemaManager.commit_changes: ALTER TABLE) ------------------------
    ALTER_BEFORE_SCHEMA = "alter-before-schema"  # next schema validated, nothing written
    ALTER_AFTER_SCHEMA = "alter-after-schema"  # schema-N written, the caller not told

    # -- rollback ----------------------------------------------------------------------------
    ROLLBACK_AFTER_LATEST_HINT = "rollback-after-latest-hint"  # under the lock, nothing deleted
    ROLLBACK_MID_SNAPSHOTS = "rollback-mid-snapshots"  # under the lock, after one deleted
    ROLLBACK_AFTER_SNAPSHOTS = "rollback-after-snapshots"
    ROLLBACK_AFTER_TAGS = "rollback-after-tags"
    ROLLBACK_MID_FILES = "rollback-mid-files"


_seen: Counter[str] = Counter()


def parse_target(target: str) -> tuple[CrashStep, int]:
    """``"step"`` or ``"step@N"`` -> (step, N); a ``ValueError`` names an unknown step."""
    name, _, nth = target.partition("@")
    try:
        step = CrashStep(name)
    except ValueError:
        known = ", ".join(s.value for s in CrashStep)
        raise ValueError(f"{ENV_VAR}={target!r}: unknown crash step {name!r} ({known})") from None
    n = int(nth or 1)
    if n < 1:
        raise ValueError(f"{ENV_VAR}={target!r}: the count after '@' starts at 1")
    return step, n


def maybe_crash(step: CrashStep) -> None:
    """SIGKILL this process if ``$LAKECORE_FAULT_CRASH_AT`` names ``step`` (and its count)."""
    target = os.environ.get(ENV_VAR)
    if not target:
        return
    name, _, nth = target.partition("@")
    if name != step.value:
        return
    _seen[name] += 1
    if _seen[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


IO_ERROR_ENV_VAR = "LAKECORE_FAULT_IO_ERROR_AT"


class IOFaultStep(Enum):
    """Where a transient ``OSError`` can be injected (``maybe_io_error``)."""

    SNAPSHOT_BEFORE_CREATE = "snapshot-before-create"  # snapshot-N not created
    SNAPSHOT_AFTER_CREATE = "snapshot-after-create"  # snapshot-N created, the caller not told


_io_seen: Counter[str] = Counter()


def maybe_io_error(step: IOFaultStep) -> None:
    """Raise ``OSError(EIO)`` once, the N-th time ``step`` is reached, if
    ``$LAKECORE_FAULT_IO_ERROR_AT`` is ``step`` or ``step@N``."""
    target = os.environ.get(IO_ERROR_ENV_VAR)
    if not target:
        return
    name, _, nth = target.partition("@")
    if name != step.value:
        return
    _io_seen[name] += 1
    if _io_seen[name] == int(nth or 1):
        raise OSError(errno.EIO, f"injected transient I/O error at {name}")
