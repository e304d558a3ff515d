"""Table maintenance: snapshot expiry, partition expiry, orphan files, tags and rollback.

Every operation is planned first (a frozen value) and executed second, and returns a report
with ``to_dict()`` for ``--json``. Decisions written down here:

* **Dry run by default** (like delta-rs ``vacuum``): every destructive Python
  entry point (``expire_snapshots``, ``expire_partitions``, ``remove_orphan_files``,
  ``delete_tag``, ``rollback_to``, ``maintain``) takes ``dry_run=True`` unless told otherwise.
  The command line is the explicit request, so it executes unless ``--dry-run`` is given. The
  automatic paths writers call (``after_commit``, ``maybe_expire_partitions``) execute: they
  apply the retention the table's own options ask for, as Paimon does after each commit.
* **Clock**: every call takes ``now`` (a datetime; naive = local wall-clock, as Paimon), so
  retention and expiry are deterministic in tests.
* **Crash safety**: deletions are quiet and ordered so that a rerun finishes the work; the
  ``maybe_crash(CrashStep.*)`` calls (``lakecore.utils.faults``) are where the crash tests
  kill the process.
* **State lakecore keeps beside Paimon's files** lives under ``<table>/_lakecore/``
  (expired-partition records and the partition-expiry last-check time); it is read and written
  by ``lakecore.store.partition_records``, and tags are read by ``lakecore.store.tags``.
"""

from lakecore.maintenance.expire_partitions import (
    PartitionExpirePlan,
    PartitionExpireReport,
    expire_partitions,
    maybe_expire_partitions,
    plan_partition_expiry,
)
from lakecore.maintenance.expire_snapshots import (
    ExpirePlan,
    ExpireReport,
    execute_expire_plan,
    expire_snapshots,
    plan_expire_snapshots,
)
from lakecore.maintenance.maintain import (
    AfterCommitReport,
    MaintainReport,
    MaintenanceStep,
    after_commit,
    maintain,
    run_steps,
)
from lakecore.maintenance.orphan_files import OrphanReport, remove_orphan_files
from lakecore.maintenance.retention import ExpireConfig, expire_end
from lakecore.maintenance.rollback import RollbackPlan, RollbackReport, rollback_to
from lakecore.maintenance.tags import (
    TagDeleteReport,
    TagInfo,
    create_tag,
    delete_tag,
    list_tags,
)

__all__ = [
    "AfterCommitReport", "ExpireConfig", "ExpirePlan", "ExpireReport", "MaintainReport",
    "MaintenanceStep", "OrphanReport", "PartitionExpirePlan", "PartitionExpireReport",
    "RollbackPlan", "RollbackReport", "TagDeleteReport", "TagInfo", "after_commit", "create_tag",
    "delete_tag", "execute_expire_plan", "expire_end", "expire_partitions", "expire_snapshots",
    "list_tags", "maintain", "maybe_expire_partitions", "plan_expire_snapshots",
    "plan_partition_expiry", "remove_orphan_files", "rollback_to", "run_steps",
]
