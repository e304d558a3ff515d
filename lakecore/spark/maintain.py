"""Table maintenance for the maintain job: expire partitions, expire snapshots, remove orphan
files, each switchable and each with a dry run. It is metadata work on the driver (as
Paimon's expire procedures); the steps and their order are lakecore.maintenance's own
(``MaintenanceStep``, ``run_steps``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lakecore.maintenance.maintain import MaintenanceStep, Stage, no_stage, run_steps
from lakecore.table import FileStoreTable

log = logging.getLogger("lakecore.spark.maintain")


@dataclass(frozen=True)
class MaintainRequest:
    """The maintain job's switches and settings."""

    expire_snapshots: bool = False
    expire_partitions: bool = False
    remove_orphans: bool = False
    dry_run: bool = True
    older_than: timedelta | datetime | None = None  # orphan age; lakecore's default: 1 day
    now: datetime | None = None  # pin the clock (tests, reproducible backfills)
    commit_user: str | None = None  # for the partition-expiry OVERWRITE

    @property
    def steps(self) -> frozenset[MaintenanceStep]:
        chosen = ((MaintenanceStep.EXPIRE_PARTITIONS, self.expire_partitions),
                  (MaintenanceStep.EXPIRE_SNAPSHOTS, self.expire_snapshots),
                  (MaintenanceStep.REMOVE_ORPHAN_FILES, self.remove_orphans))
        return frozenset(step for step, on in chosen if on)

    @property
    def any(self) -> bool:
        return bool(self.steps)


def maintain_table(table: FileStoreTable, request: MaintainRequest,
                   stage: Stage = no_stage) -> dict[str, Any]:
    """Run the requested steps in the one maintenance order (partitions, snapshots, orphans:
    partition expiry creates a snapshot, snapshot expiry may then free its files, orphans come
    last); a failing step fails the job. Returns the JSON report: one entry per step, plus
    totals."""
    report = run_steps(table, request.steps, dry_run=request.dry_run, now=request.now,
                       older_than=request.older_than, commit_user=request.commit_user,
                       keep_going=False, stage=stage)
    steps: list[dict[str, Any]] = []
    snapshot_ids: list[int] = []
    files = size = 0
    for result in report.steps:
        outcome = result.outcome
        if outcome is None:  # skipped, e.g. no partition.expiration-time on the table
            steps.append({"operation": result.name, "skipped": result.reason})
        elif result.name == MaintenanceStep.EXPIRE_PARTITIONS.value:
            snapshot_ids += outcome.snapshot_ids
            steps.append(outcome.to_dict())
        elif result.name == MaintenanceStep.EXPIRE_SNAPSHOTS.value:
            files, size = files + outcome.files_removed, size + outcome.bytes_removed
            steps.append(outcome.to_dict())
        else:  # orphan files: every path in a dry run (what would go), none otherwise
            files, size = files + outcome.files_removed, size + outcome.bytes_removed
            steps.append(outcome.to_dict(paths=request.dry_run))
    for step in steps:
        log.info("%s: %s", step["operation"], {k: v for k, v in step.items()
                                                if k not in ("plan", "paths")})
    return {"dry_run": request.dry_run, "snapshot_ids": snapshot_ids, "files": files,
            "bytes": size, "rows": 0, "steps": steps}
