"""Running maintenance as a whole: after each commit (Paimon's ``TableCommitImpl.maintain``),
and as one ``maintain`` job (compact -> expire snapshots -> expire partitions -> orphans)."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakecore.errors import LakecoreError
from lakecore.maintenance.expire_partitions import (
    PartitionExpireReport,
    expire_partitions,
    maybe_expire_partitions,
)
from lakecore.maintenance.expire_snapshots import ExpireReport, expire_snapshots
from lakecore.maintenance.orphan_files import remove_orphan_files

if TYPE_CHECKING:
    from lakecore.store.file_store import FileStore

log = logging.getLogger(__name__)
COMPACT_MODES = ("none", "universal", "full")


@dataclass(frozen=True)
class AfterCommitReport:
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


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str  # "ok", "skipped" or "failed"
    report: dict[str, Any] | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "status": self.status, "report": self.report,
                "reason": self.reason}


@dataclass(frozen=True)
class MaintainReport:
    dry_run: bool
    steps: tuple[StepResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"operation": "maintain", "dry_run": self.dry_run, "ok": self.ok,
                "steps": [s.to_dict() for s in self.steps]}


def _compact(table: FileStore, mode: str, dry_run: bool) -> StepResult:
    if mode == "none":
        return StepResult("compact", "skipped", reason="not requested")
    if dry_run:
        return StepResult("compact", "skipped", reason="dry run")
    fn = getattr(table, "compact", None)
    if fn is None:
        try:
            fn = importlib.import_module("lakecore.compact.job").compact
        except (ImportError, AttributeError):
            return StepResult("compact", "skipped", reason="lakecore.compact is not available")
        result = fn(table, full=(mode == "full"))
    else:
        result = fn(full=(mode == "full"))
    report = result.to_dict() if hasattr(result, "to_dict") else {"result": repr(result)}
    return StepResult("compact", "ok", report)


def maintain(
    table: FileStore,
    *,
    dry_run: bool = True,
    now: datetime | None = None,
    older_than: timedelta | datetime | None = None,
    compact: str = "none",
) -> MaintainReport:
    """compact (when asked) -> expire snapshots -> expire partitions -> remove orphan files.

    Every step is idempotent; a failing step is reported and the later steps still run (each
    is safe on its own), and ``MaintainReport.ok`` is False.
    """
    if compact not in COMPACT_MODES:
        raise ValueError(f"compact must be one of {COMPACT_MODES}, got {compact!r}")
    steps: list[StepResult] = []
    runs = (
        ("compact", lambda: _compact(table, compact, dry_run)),
        ("expire-snapshots", lambda: StepResult(
            "expire-snapshots", "ok",
            expire_snapshots(table, dry_run=dry_run, now=now).to_dict())),
        ("expire-partitions", lambda: _partitions(table, dry_run, now)),
        ("remove-orphan-files", lambda: StepResult(
            "remove-orphan-files", "ok",
            remove_orphan_files(table, older_than=older_than, now=now,
                                dry_run=dry_run).to_dict())),
    )
    for name, run in runs:
        try:
            steps.append(run())
        except (LakecoreError, OSError) as e:
            log.exception("maintenance step %s failed on %s", name, table.identifier)
            steps.append(StepResult(name, "failed", reason=f"{type(e).__name__}: {e}"))
    return MaintainReport(dry_run, tuple(steps))


def _partitions(table: FileStore, dry_run: bool, now: datetime | None) -> StepResult:
    if table.options.partition_expiration_time is None:
        return StepResult("expire-partitions", "skipped",
                          reason="partition.expiration-time is not set")
    return StepResult("expire-partitions", "ok",
                      expire_partitions(table, now=now, dry_run=dry_run).to_dict())
