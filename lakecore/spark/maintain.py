"""Table maintenance for the maintain job: expire snapshots, expire partitions, remove orphan
files, each switchable and each with a dry run. It is metadata work on the driver (as
Paimon's expire procedures); the steps are lakecore.maintenance's own."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lakecore.maintenance import expire_partitions, expire_snapshots, remove_orphan_files
from lakecore.spark.ingest import Stage, no_stage
from lakecore.table import FileStoreTable

log = logging.getLogger("lakecore.spark.maintain")


@dataclass(frozen=True)
class MaintainRequest:
    expire_snapshots: bool = False
    expire_partitions: bool = False
    remove_orphans: bool = False
    dry_run: bool = True
    older_than: timedelta | datetime | None = None  # orphan age; lakecore's default: 1 day
    now: datetime | None = None  # pin the clock (tests, reproducible backfills)
    commit_user: str | None = None  # for the partition-expiry OVERWRITE

    @property
    def any(self) -> bool:
        return self.expire_snapshots or self.expire_partitions or self.remove_orphans


def maintain_table(table: FileStoreTable, request: MaintainRequest,
                   stage: Stage = no_stage) -> dict[str, Any]:
    """Run the requested steps in Paimon's order (partitions, snapshots, orphans: partition
    expiry creates a snapshot, snapshot expiry may then free its files, orphans come last).
    Returns the JSON report: one entry per step, plus totals."""
    steps: list[dict[str, Any]] = []
    snapshot_ids: list[int] = []
    files = size = 0
    if request.expire_partitions:
        with stage("expire-partitions"):
            if table.options.partition_expiration_time is None:
                steps.append({"operation": "expire-partitions", "skipped":
                              "partition.expiration-time is not set on the table"})
            else:
                p = expire_partitions(table, now=request.now, dry_run=request.dry_run,
                                      commit_user=request.commit_user)
                snapshot_ids += p.snapshot_ids
                steps.append(p.to_dict())
    if request.expire_snapshots:
        with stage("expire-snapshots"):
            s = expire_snapshots(table, dry_run=request.dry_run, now=request.now)
            files, size = files + s.files_removed, size + s.bytes_removed
            steps.append(s.to_dict())
    if request.remove_orphans:
        with stage("remove-orphan-files"):
            o = remove_orphan_files(table, older_than=request.older_than, now=request.now,
                                    dry_run=request.dry_run)
            files, size = files + o.files_removed, size + o.bytes_removed
            steps.append(o.to_dict(paths=request.dry_run))
    for step in steps:
        log.info("%s: %s", step["operation"], {k: v for k, v in step.items()
                                                if k not in ("plan", "paths")})
    return {"dry_run": request.dry_run, "snapshot_ids": snapshot_ids, "files": files,
            "bytes": size, "rows": 0, "steps": steps}
