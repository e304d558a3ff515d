"""Dedicated compaction: plan on the driver, run buckets anywhere, commit one COMPACT snapshot.

``plan_compaction`` reads the latest snapshot once and returns picklable ``BucketTask``s for
the buckets that have something to do (the pure planners decide, so "nothing to compact" is
known before any executor starts), and for a postpone-bucket table a ``PostponeTask`` per
partition with pending postpone files (``postpone.py``: they become visible in real buckets).
``run_task`` runs one task — it is what a Spark executor runs. ``commit_compaction`` commits
the results; the commit checks that every rewritten input is still live and that outputs do
not overlap a level >= 1 run, so it is safe while ingest jobs keep committing new level-0
files.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakecore.commit.file_store_commit import CommitResult, FileStoreCommit, partition_equals
from lakecore.commit.message import CommitMessage
from lakecore.compact.append_compaction import AppendCompaction, full_bucketed, pick_bucketed
from lakecore.compact.deletion_vectors import BucketVectors
from lakecore.compact.executor import BucketCompactor, compact_append_files, key_order
from lakecore.compact.levels import Levels
from lakecore.compact.planner import plan_compaction as plan_bucket
from lakecore.compact.postpone import PostponeTask, plan_postpone, run_postpone_task
from lakecore.compact.unit import CompactResult
from lakecore.compact.universal import create_compact_strategy
from lakecore.errors import (
    CommitConflictError,
    CommitTimeoutError,
    LakecoreValidationError,
)
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.index_manifest import IndexFileMeta
from lakecore.format.manifest import DataFileMeta
from lakecore.format.snapshot import BATCH_COMMIT_IDENTIFIER
from lakecore.read.deletion_vectors import dv_entries
from lakecore.store.file_store import FileStore
from lakecore.store.manifest_io import merge_entries
from lakecore.utils.faults import CrashStep, maybe_crash
from lakecore.utils.threads import map_buckets


@dataclass(frozen=True)
class BucketTask:
    """One bucket's compaction work: its live files as of the planned snapshot."""

    partition: tuple
    bucket: int
    total_buckets: int
    files: tuple[DataFileMeta, ...]
    snapshot_id: int
    # deletion-vector tables: the bucket's live DV index files at the planned snapshot
    index_files: tuple[IndexFileMeta, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(f.file_size for f in self.files)


CompactionTask = BucketTask | PostponeTask


@dataclass(frozen=True)
class CompactionPlan:
    """The buckets a dedicated compaction will rewrite, planned from one snapshot."""

    snapshot_id: int | None
    tasks: tuple[CompactionTask, ...]
    buckets_considered: int
    skipped_reason: str | None = None


@dataclass
class CompactReport:
    """What a dedicated compaction did: snapshots, buckets, files and rows before and after."""

    table: str
    full: bool
    snapshot_ids: tuple[int, ...] = ()
    buckets: int = 0
    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    rows_before: int = 0
    rows_after: int = 0
    duration_s: float = 0.0
    skipped_reason: str | None = None
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _live_buckets(table: FileStore, snapshot_id: int
                  ) -> dict[tuple[bytes, int], list[Any]]:
    mio = table.manifest_io()
    snap = table.snapshot_manager.snapshot(snapshot_id)
    metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
        snap.delta_manifest_list
    )
    groups: dict[tuple[bytes, int], list[Any]] = defaultdict(list)
    for e in merge_entries(mio.read_entries(metas)).values():
        groups[(e.partition, e.bucket)].append(e)
    return groups


def _matches(partition: tuple, keys: Sequence[str],
             partitions: Sequence[Mapping[str, Any]] | None) -> bool:
    if not partitions:
        return True
    return any(partition_equals(dict(p), list(keys))(partition) for p in partitions)


def _has_work(table: FileStore, files: Sequence[DataFileMeta], full: bool,
              index_files: Sequence[IndexFileMeta] = ()) -> bool:
    o = table.options
    if table.is_primary_key_table:
        levels = Levels(key_order(table), list(files), o.num_levels)
        strategy = create_compact_strategy(o, restore_files=files)
        dv = o.deletion_vectors_enabled
        with_vector = {n for m in index_files for n in (m.dv_ranges or {})}
        if plan_bucket(levels, strategy, target_file_size=o.target_file_size(True),
                       small_file_ratio=o.compaction_small_file_ratio, full=full,
                       rewrite_if=(lambda f: f.file_name in with_vector) if dv else None,
                       deletion_vectors=dv) is not None:
            return True
        return dv and (_deleted_heavy(table, files, index_files)
                       or _may_need_repair(table, files))
    return bool(_append_groups(table, files, full, index_files))


def _may_need_repair(table: FileStore, files: Sequence[DataFileMeta]) -> bool:
    """Levels >= 1 that may predate the vectors: a kept retraction, or two runs one of which
    was written under a schema without vectors (the executor then reads their keys to see
    whether one is live twice; if not, it does nothing)."""
    upper = [f for f in files if f.level > 0]
    if any(f.delete_row_count is None or f.delete_row_count > 0 for f in upper):
        return True
    if len({f.level for f in upper}) < 2:
        return False
    ids = {f.schema_id for f in upper}
    return any(not table.schema_of(i).core_options.deletion_vectors_enabled for i in ids)


def _heavy_files(table: FileStore, files: Sequence[DataFileMeta],
                 index_files: Sequence[IndexFileMeta], min_level: int = 1
                 ) -> list[DataFileMeta]:
    """The files whose vector covers more than ``compaction.delete-ratio-threshold`` of them."""
    ratio = table.options.compaction_delete_ratio_threshold
    cards = {n: r.cardinality for m in index_files for n, r in (m.dv_ranges or {}).items()}
    return [f for f in files if f.level >= min_level and f.row_count
            and (cards.get(f.file_name) or 0) / f.row_count > ratio]


def _deleted_heavy(table: FileStore, files: Sequence[DataFileMeta],
                   index_files: Sequence[IndexFileMeta]) -> bool:
    """A file at a level >= 1 over ``compaction.delete-ratio-threshold`` (primary keys)."""
    return bool(_heavy_files(table, files, index_files))


def _append_groups(table: FileStore, files: Sequence[DataFileMeta], full: bool,
                   index_files: Sequence[IndexFileMeta] = ()
                   ) -> list[tuple[DataFileMeta, ...]]:
    """The groups an append bucket's compaction rewrites (each into new files, in sequence
    order): the strategy's pick, plus each file over ``compaction.delete-ratio-threshold``
    on its own (Paimon's append compaction picks such files to drop their deleted rows)."""
    ac = AppendCompaction.from_options(table.options)
    if table.options.bucket == -1:
        groups = ac.pack_unaware(files)
    elif full:
        picked = full_bucketed(files, compaction_file_size=ac.compaction_file_size)
        groups = [picked] if picked else []
    else:
        pick = pick_bucketed(files, min_file_num=ac.min_file_num,
                             target_file_size=ac.target_file_size)
        groups = [tuple(pick.compact_before)] if pick.compact_before else []
    taken = {f.file_name for g in groups for f in g}
    heavy = [f for f in _heavy_files(table, files, index_files, min_level=0)
             if f.file_name not in taken]
    return groups + [(f,) for f in sorted(heavy, key=lambda f: f.min_sequence_number)]


def plan_compaction(table: FileStore, partitions: Sequence[Mapping[str, Any]] | None = None,
                    full: bool = False, max_buckets: int | None = None) -> CompactionPlan:
    """The buckets of the latest snapshot that need compaction (optionally some partitions)."""
    latest = table.snapshot_manager.latest_id()
    if latest is None:
        return CompactionPlan(None, (), 0, "the table has no snapshot yet")
    codec = table.partition_codec
    live = _live_buckets(table, latest)
    tasks: list[CompactionTask] = []
    pending: set[bytes] = set()  # partitions with postpone files: their buckets go with them
    if table.options.bucket == POSTPONE_BUCKET:
        pending = {p for p, b in live if b == POSTPONE_BUCKET
                   and _matches(codec.decode(p), table.partition_keys, partitions)}
        tasks += plan_postpone(table, latest, live, pending)
    considered = len(tasks)
    # vectors are honoured whatever the option says now (another engine may have written
    # them, or the option was turned off since): a rewrite must never bring deleted rows back
    dv_index = dv_entries(table, table.snapshot_manager.snapshot(latest))
    for (pbytes, bucket), entries in sorted(live.items()):
        partition = codec.decode(pbytes)
        if (bucket == POSTPONE_BUCKET or pbytes in pending
                or not _matches(partition, table.partition_keys, partitions)):
            continue
        considered += 1
        files = tuple(e.file for e in entries)
        index_files = tuple(e.index_file for e in dv_index.get((tuple(partition), bucket), ()))
        if _has_work(table, files, full, index_files):
            tasks.append(BucketTask(partition, bucket, entries[0].total_buckets, files, latest,
                                    index_files))
    tasks.sort(key=lambda t: -t.bytes)
    if max_buckets is not None:
        tasks = tasks[:max_buckets]
    reason = None
    if not tasks:
        reason = (f"no bucket needs compaction ({considered} bucket(s) checked at snapshot "
                  f"{latest}; {'full' if full else 'universal'} strategy)")
    return CompactionPlan(latest, tuple(tasks), considered, reason)


def run_task(table: FileStore, task: CompactionTask, full: bool) -> list[CommitMessage]:
    """Run one planned task (writes files, commits nothing): what a Spark executor runs."""
    if isinstance(task, PostponeTask):
        return run_postpone_task(table, task, full)
    message = run_bucket_task(table, task, full)
    return [] if message is None else [message]


def run_bucket_task(table: FileStore, task: BucketTask, full: bool) -> CommitMessage | None:
    """Compact one bucket (writes files; commits nothing). Runs on a Spark executor as is."""
    if table.is_primary_key_table:
        vectors = None
        if table.options.deletion_vectors_enabled:
            vectors = BucketVectors.load(table, task.partition, task.bucket, task.index_files)
        result = BucketCompactor(table, task.partition, task.bucket, task.files,
                                 vectors=vectors).compact(full)
    else:
        groups = _append_groups(table, task.files, full, task.index_files)
        result = _compact_append(table, task, groups) if groups else CompactResult()
    if result.is_empty():
        return None
    return CommitMessage(
        partition=task.partition,
        bucket=task.bucket,
        total_buckets=task.total_buckets,
        compact_before=result.before,
        compact_after=result.after,
        compact_changelog_files=result.changelog,
        compact_new_index_files=result.index_after,
        compact_deleted_index_files=result.index_before,
    )


def _compact_append(table: FileStore, task: BucketTask,
                    groups: Sequence[Sequence[DataFileMeta]]) -> CompactResult:
    """Rewrite an append bucket's groups. Files with deletion vectors (another engine's DELETE)
    are read with them applied, so deleted rows stay deleted; their vectors go with them and
    the bucket's remaining vectors are written as new index files (Paimon's DV maintainer)."""
    if not any(m.dv_ranges for m in task.index_files):
        return compact_append_files(table, task.partition, task.bucket, groups)
    dv = BucketVectors.load(table, task.partition, task.bucket, task.index_files)
    result = compact_append_files(table, task.partition, task.bucket, groups, dv.vectors)
    dv.remove(f.file_name for f in result.before)
    try:
        new, replaced = dv.write(table, task.partition, task.bucket)
    except BaseException:
        for f in result.after:
            table.file_io.delete_quietly(
                table.paths.data_file_path(task.partition, task.bucket, f.file_name))
        raise
    return CompactResult(result.before, result.after, result.changelog,
                         index_after=new, index_before=replaced)


def commit_compaction(table: FileStore, messages: Sequence[CommitMessage],
                      commit_user: str | None = None,
                      identifier: int = BATCH_COMMIT_IDENTIFIER,
                      base_snapshot_id: int | None = None) -> CommitResult:
    """One COMPACT snapshot. When it certainly did not land (a conflict, bad input, or every
    attempt lost the race) the written files are deleted; when the outcome is unknown (an I/O
    error mid-publish) they are kept, since the snapshot may reference them."""
    maybe_crash(CrashStep.COMPACT_BEFORE_COMMIT)
    commit = FileStoreCommit(table, commit_user or f"compact-{uuid.uuid4()}",
                             fresh_user=commit_user is None)
    commit.base_snapshot_id = base_snapshot_id
    try:
        return commit.commit(messages, identifier)
    except (CommitConflictError, CommitTimeoutError, LakecoreValidationError):
        commit.abort(messages)
        raise


def compact(table: FileStore, partitions: Sequence[Mapping[str, Any]] | None = None,
            full: bool = False, commit_user: str | None = None) -> CompactReport:
    """Plan, run every bucket here (side by side on the bucket threads), and commit: the
    dedicated compaction without Spark.
    It rewrites into the table's newest schema, whatever version ``table`` was opened at."""
    start = time.monotonic()
    table = table.with_latest_schema()
    plan = plan_compaction(table, partitions, full)
    report = CompactReport(table.identifier, full, skipped_reason=plan.skipped_reason)
    def run(task: CompactionTask) -> tuple[list[CommitMessage], BaseException | None]:
        try:
            return run_task(table, task, full), None
        except BaseException as e:  # raised below, after every bucket's files are cleaned up
            return [], e

    # buckets compact side by side on the bucket threads (each task writes its own bucket)
    outcomes = map_buckets(run, list(plan.tasks))
    messages = [m for done, _ in outcomes for m in done]
    errors = [e for _, e in outcomes if e is not None]
    if errors:
        FileStoreCommit(table, "abort").abort(messages)
        raise errors[0]
    if messages:
        result = commit_compaction(table, messages, commit_user, base_snapshot_id=plan.snapshot_id)
        report.snapshot_ids = result.snapshot_ids
    for m in messages:
        report.details.append({"partition": list(m.partition), "bucket": m.bucket,
                               "files_before": len(m.compact_before),
                               "files_after": len(m.compact_after)})
    report.buckets = len(messages)
    report.files_before = sum(len(m.compact_before) for m in messages)
    report.files_after = sum(len(m.compact_after) for m in messages)
    report.bytes_before = sum(f.file_size for m in messages for f in m.compact_before)
    report.bytes_after = sum(f.file_size for m in messages for f in m.compact_after)
    report.rows_before = sum(f.row_count for m in messages for f in m.compact_before)
    report.rows_after = sum(f.row_count for m in messages for f in m.compact_after)
    report.duration_s = round(time.monotonic() - start, 3)
    return report
