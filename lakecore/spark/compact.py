"""Dedicated compaction on Spark: the driver plans from the latest snapshot,
each bucket's rewrite runs on an executor, the driver commits one COMPACT snapshot. The
commit only conflicts on its own inputs, so ingest jobs may commit meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from lakecore.commit.file_store_commit import FileStoreCommit, partition_equals
from lakecore.commit.message import CommitMessage
from lakecore.compact.job import (
    BucketTask,
    CompactionPlan,
    CompactionTask,
    commit_compaction,
    plan_compaction,
)
from lakecore.spark.faults import instrument_commit
from lakecore.spark.ingest import Stage, default_commit_user, no_stage
from lakecore.spark.messages import FileStats, decode_all, message_accumulator, task_failure
from lakecore.spark.table_ref import TableRef
from lakecore.spark.tasks import CompactTask
from lakecore.table import FileStoreTable

log = logging.getLogger("lakecore.spark.compact")


@dataclass(frozen=True)
class CompactRequest:
    """What the compaction job compacts, how, and under which commit."""

    partitions: tuple[Mapping[str, str], ...] | None = None  # None: every partition
    full: bool = False
    max_buckets: int | None = None  # the biggest buckets first
    parallelism: int | None = None  # Spark tasks (default: Spark's default parallelism)
    commit_user: str | None = None
    commit_identifier: int | None = None  # default: the planned snapshot id
    # only these (partition spec, bucket) pairs (None: every bucket the plan picks); an
    # orchestrator that decided per bucket (off-peak window, stop trigger) names them here
    buckets: tuple[tuple[Mapping[str, str], int], ...] | None = None


@dataclass(frozen=True)
class CompactOutcome:
    """What the compaction job did; ``summary()`` is its JSON line."""

    table: str
    base_snapshot_id: int | None
    commit_user: str | None = None
    commit_identifier: int | None = None
    snapshot_ids: tuple[int, ...] = ()
    buckets_planned: int = 0
    skipped_reason: str | None = None
    files_before: int = 0
    bytes_before: int = 0
    after: FileStats = field(default_factory=FileStats)

    def summary(self) -> dict[str, Any]:
        return {
            "table": self.table, "base_snapshot_id": self.base_snapshot_id,
            "commit_user": self.commit_user, "commit_identifier": self.commit_identifier,
            "snapshot_ids": list(self.snapshot_ids), "skipped": self.skipped_reason is not None,
            "skipped_reason": self.skipped_reason, "buckets_planned": self.buckets_planned,
            "buckets": self.after.buckets, "files_before": self.files_before,
            "bytes_before": self.bytes_before, "files": self.after.files,
            "bytes": self.after.bytes, "rows": self.after.rows,
        }


def round_robin(tasks: Sequence[CompactionTask], slices: int) -> list[CompactionTask]:
    """Order tasks so that ``parallelize``'s contiguous slices each get a mix of big and
    small buckets (the plan lists the biggest first)."""
    return [tasks[j] for i in range(slices) for j in range(i, len(tasks), slices)]


def run_tasks(spark: SparkSession, table: FileStoreTable, ref: TableRef, plan: CompactionPlan,
              request: CompactRequest) -> list[CommitMessage]:
    sc = spark.sparkContext
    slices = max(1, min(len(plan.tasks), request.parallelism or sc.defaultParallelism))
    acc = message_accumulator(sc)
    rdd = sc.parallelize(round_robin(plan.tasks, slices), slices)
    try:
        results = rdd.mapPartitions(CompactTask(ref, request.full, acc)).collect()
    except BaseException:
        orphans = decode_all(acc.value)
        log.error("compaction tasks failed; deleting %d finished bucket result(s)", len(orphans))
        FileStoreCommit(table, "abort").abort(orphans)
        raise
    messages = decode_all(blob for blob, _ in results if blob is not None)
    errors = [err for _, err in results if err is not None]
    if errors:
        FileStoreCommit(table, "abort").abort(messages)
        raise task_failure("compaction", errors)
    return messages


def plan_compact(table: FileStoreTable, request: CompactRequest) -> CompactionPlan:
    """The driver's plan: picklable bucket tasks from the latest snapshot (no Spark)."""
    parts = [dict(p) for p in request.partitions] if request.partitions else None
    if request.buckets is not None:  # every bucket of the chosen partitions is a candidate
        parts = [dict(p) for p, _ in request.buckets] if table.partition_keys else None
        if not request.buckets:
            return CompactionPlan(table.snapshot_manager.latest_id(), (), 0,
                                  "no bucket was chosen for compaction")
    plan = plan_compaction(table, parts, request.full,
                           None if request.buckets is not None else request.max_buckets)
    if request.buckets is None:
        return plan
    keys = list(table.partition_keys)
    chosen = [(partition_equals(dict(p), keys), b) for p, b in request.buckets]
    tasks = tuple(t for t in plan.tasks if not isinstance(t, BucketTask) or any(
        b == t.bucket and match(t.partition) for match, b in chosen))
    if request.max_buckets is not None:
        tasks = tasks[:request.max_buckets]
    reason = plan.skipped_reason or (None if tasks else
                                     "none of the chosen buckets needs compaction any more")
    return CompactionPlan(plan.snapshot_id, tasks, plan.buckets_considered, reason)


def compact_table(
    spark: SparkSession,
    table: FileStoreTable,
    warehouse: str,
    request: CompactRequest,
    catalog_options: Mapping[str, str] | None = None,
    stage: Stage = no_stage,
    plan: CompactionPlan | None = None,
) -> CompactOutcome:
    """Plan (unless given), rewrite buckets on the executors, commit one COMPACT snapshot."""
    if plan is None:
        with stage("plan"):
            plan = plan_compact(table, request)
    base = CompactOutcome(table.identifier, plan.snapshot_id, buckets_planned=len(plan.tasks),
                          files_before=sum(len(t.files) for t in plan.tasks),
                          bytes_before=sum(t.bytes for t in plan.tasks))
    if not plan.tasks:
        log.info("nothing to compact: %s", plan.skipped_reason)
        return _with(base, skipped_reason=plan.skipped_reason)
    ident = request.commit_identifier if request.commit_identifier is not None else (
        plan.snapshot_id)
    assert ident is not None
    user = request.commit_user or default_commit_user("compact", table.identifier, ident)
    base = _with(base, commit_user=user, commit_identifier=ident)
    if not FileStoreCommit(table, user).filter_committed([ident]):
        return _with(base, skipped_reason=f"({user}, {ident}) is already committed")
    log.info("compacting %d bucket(s) of snapshot %s", len(plan.tasks), plan.snapshot_id)
    with stage("compact"):
        messages = run_tasks(spark, table, TableRef.of(table, warehouse, catalog_options), plan,
                             request)
    if not messages:
        return _with(base, skipped_reason="the executors found nothing to rewrite")
    with stage("commit"):
        result = commit_compaction(instrument_commit(table), messages, user, ident,
                                   base_snapshot_id=plan.snapshot_id)
    if result.skipped:  # a concurrent run of the same (user, identifier) committed first
        FileStoreCommit(table, user).abort(messages)
    return _with(base, snapshot_ids=result.snapshot_ids, after=FileStats.of(messages))


def _with(outcome: CompactOutcome, **changes: Any) -> CompactOutcome:
    from dataclasses import replace

    return replace(outcome, **changes)
