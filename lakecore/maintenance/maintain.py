"""Running maintenance as a whole: after each commit (Paimon's ``TableCommitImpl.maintain``),
and as chosen steps in the one maintenance order (``MaintenanceStep``, ``run_steps``): compact
(when asked) -> expire partitions -> expire snapshots -> remove orphan files."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from lakecore.compact.job import compact as compact_table
from lakecore.errors import LakecoreError
from lakecore.maintenance.expire_partitions import (
    PartitionExpireReport,
    expire_partitions,
    maybe_expire_partitions,
)
from lakecore.maintenance.expire_snapshots import ExpireReport, expire_snapshots
from lakecore.maintenance.orphan_files import remove_orphan_files
from lakecore.store.file_store import FileStore

log = logging.getLogger(__name__)
COMPACT_MODES = ("none", "universal", "full")
PARTITION_EXPIRY_UNSET = "partition.expiration-time is not set on the table"
Stage = Callable[[str], AbstractContextManager[None]]


def no_stage(name: str) -> AbstractContextManager[None]:
    """The default ``stage``: time nothing."""
    return nullcontext()


@dataclass(frozen=True)
class AfterCommitReport:
    """What the post-commit expiry of a writer that is not write-only did."""

    partitions: PartitionExpireReport | None
    snapshots: ExpireReport

    def to_dict(self) -> dict[str, Any]:
        return {"partitions": None if self.partitions is None else self.partitions.to_dict(),
                "snapshots": self.snapshots.to_dict()}


def after_commit(table: FileStore, *, now: datetime | None = None
                 ) -> AfterCommitReport | None:
    """What a writer that is not ``write-only`` runs after each successful commit, in Paimon's
    order: partition expiry when its check interval has passed, then snapshot expiry.
    ``write-only`` writers skip both (a dedicated maintenance job runs them)."""
    if table.options.write_only:
        return None
    partitions = maybe_expire_partitions(table, now=now)
    return AfterCommitReport(partitions, expire_snapshots(table, dry_run=False, now=now))


class MaintenanceStep(Enum):
    """One step of table maintenance. The members are declared in the one order the steps run
    (``run_steps``): compaction first when asked, then Paimon's order: partition expiry (it
    commits an OVERWRITE snapshot), snapshot expiry (which may then free that snapshot's
    files), orphan files last (after the others have dropped their references)."""

    COMPACT = "compact"
    EXPIRE_PARTITIONS = "expire-partitions"
    EXPIRE_SNAPSHOTS = "expire-snapshots"
    REMOVE_ORPHAN_FILES = "remove-orphan-files"


@dataclass(frozen=True)
class StepResult:
    """What one step did: ``ok`` (with its report), ``skipped`` or ``failed`` (with why)."""

    name: str
    status: str  # "ok", "skipped" or "failed"
    report: dict[str, Any] | None = None
    reason: str = ""
    outcome: Any = field(default=None, compare=False, repr=False)  # the step's report object

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "status": self.status, "report": self.report,
                "reason": self.reason}


@dataclass(frozen=True)
class MaintainReport:
    """The steps ``run_steps`` ran, in the order they ran."""

    dry_run: bool
    steps: tuple[StepResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"operation": "maintain", "dry_run": self.dry_run, "ok": self.ok,
                "steps": [s.to_dict() for s in self.steps]}


def run_steps(
    table: FileStore,
    steps: Collection[MaintenanceStep],
    *,
    dry_run: bool = True,
    now: datetime | None = None,
    older_than: timedelta | datetime | None = None,
    compact: str = "universal",
    commit_user: str | None = None,
    keep_going: bool = True,
    stage: Stage = no_stage,
) -> MaintainReport:
    """Run the chosen ``steps`` in the one maintenance order (``MaintenanceStep``'s), each
    inside ``stage(step.value)`` (the Spark job times its stages with it).

    ``compact`` is the compaction's mode (``none`` reports the step as not requested; a dry
    run skips it); ``older_than`` is the orphan files' age or cut-off (default: 1 day);
    ``commit_user`` names partition expiry's OVERWRITE commit. Partition expiry is skipped,
    with the reason, when the table sets no ``partition.expiration-time``.

    Every step is idempotent. With ``keep_going`` a failing step is reported as ``failed``
    and the later steps still run (each is safe on its own); without it the error propagates.
    """
    if compact not in COMPACT_MODES:
        raise ValueError(f"compact must be one of {COMPACT_MODES}, got {compact!r}")
    results: list[StepResult] = []
    for step in MaintenanceStep:
        if step not in steps:
            continue
        with stage(step.value):
            try:
                results.append(_run_step(step, table, dry_run=dry_run, now=now,
                                         older_than=older_than, compact=compact,
                                         commit_user=commit_user))
            except (LakecoreError, OSError) as e:
                if not keep_going:
                    raise
                log.exception("maintenance step %s failed on %s", step.value,
                              table.identifier)
                results.append(StepResult(step.value, "failed",
                                          reason=f"{type(e).__name__}: {e}"))
    return MaintainReport(dry_run, tuple(results))


def _ok(step: MaintenanceStep, outcome: Any) -> StepResult:
    return StepResult(step.value, "ok", outcome.to_dict(), outcome=outcome)


def _run_step(step: MaintenanceStep, table: FileStore, *, dry_run: bool,
              now: datetime | None, older_than: timedelta | datetime | None, compact: str,
              commit_user: str | None) -> StepResult:
    if step is MaintenanceStep.COMPACT:
        if compact == "none":
            return StepResult(step.value, "skipped", reason="not requested")
        if dry_run:
            return StepResult(step.value, "skipped", reason="dry run")
        return _ok(step, compact_table(table, full=(compact == "full")))
    if step is MaintenanceStep.EXPIRE_PARTITIONS:
        if table.options.partition_expiration_time is None:
            return StepResult(step.value, "skipped", reason=PARTITION_EXPIRY_UNSET)
        return _ok(step, expire_partitions(table, now=now, dry_run=dry_run,
                                           commit_user=commit_user))
    if step is MaintenanceStep.EXPIRE_SNAPSHOTS:
        return _ok(step, expire_snapshots(table, dry_run=dry_run, now=now))
    return _ok(step, remove_orphan_files(table, older_than=older_than, now=now,
                                         dry_run=dry_run))


def maintain(
    table: FileStore,
    *,
    dry_run: bool = True,
    now: datetime | None = None,
    older_than: timedelta | datetime | None = None,
    compact: str = "none",
) -> MaintainReport:
    """Every step in the one maintenance order: compact (when asked) -> expire partitions ->
    expire snapshots -> remove orphan files (``run_steps``).

    A failing step is reported and the later steps still run; ``MaintainReport.ok`` is then
    False.
    """
    return run_steps(table, tuple(MaintenanceStep), dry_run=dry_run, now=now,
                     older_than=older_than, compact=compact)
