"""Postpone buckets (``bucket = -2``): the dedicated compaction that makes their data visible.

Writers of a postpone-bucket table do not choose buckets: every row lands in its partition's
``bucket-postpone`` directory (manifest bucket -2, total buckets -2), which readers skip. This
compaction, as Paimon's (``CompactAction`` with ``PostponeBucketCompactSplitSource``):

1. gives each partition its bucket count: the one its real buckets already have, else
   ``ceil(pending rows / postpone.target-row-num-per-bucket)`` when that is set, else
   ``postpone.default-bucket-num`` (``PostponeUtils.determineBucketNum``);
2. replays the partition's postpone files in creation order (the order they were written; rows
   within a file in file order), hashes every row to its real bucket with Paimon's bucket
   function, and gives the rows new sequence numbers after the bucket's largest;
3. writes them as level-0 files of their buckets (sorted and merged per flush, like a writer's
   buffer), runs the bucket's compaction as an inline writer would (``full``: a full one);
4. returns COMPACT messages: per real bucket the new and rewritten files (Paimon's
   ``PostponeBucketCommittableRewriter`` moves a writer's new files into ``compact_after``),
   and for bucket -2 the replayed files as ``compact_before``.

The commit deletes only the files this task replayed, so writers may keep adding postpone files
meanwhile; those wait for the next run. Everything is columnar: rows are routed with one hash per
chunk and one stable grouping sort, never one by one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakecore.commit.message import CommitMessage
from lakecore.compact.executor import BucketCompactor
from lakecore.compact.inline import InlineCompactor
from lakecore.compact.unit import CompactResult
from lakecore.errors import MaintenanceError
from lakecore.format.bucket import POSTPONE_BUCKET, bucket_ids
from lakecore.format.kv import VALUE_KIND, to_kv
from lakecore.format.manifest import DataFileMeta, FileSource, ManifestEntry
from lakecore.io.data_file_reader import CHUNK_ROWS, iter_data_file
from lakecore.io.data_file_writer import RollingFileWriter
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.merge.fast import sort_and_merge
from lakecore.options import ChangelogProducer
from lakecore.store.file_store import FileStore
from lakecore.utils.arrow import group_by_columns

_BUCKET_COLUMN = "__lakecore_bucket"


@dataclass(frozen=True)
class PostponeTask:
    """One partition's postpone files (in replay order) and the live files of its real
    buckets, as of the planned snapshot; ``total_buckets`` is the partition's bucket count."""

    partition: tuple
    total_buckets: int
    files: tuple[DataFileMeta, ...]
    bucket_files: tuple[tuple[int, tuple[DataFileMeta, ...]], ...]
    snapshot_id: int
    bucket: int = POSTPONE_BUCKET  # the bucket whose files this task consumes

    @property
    def bytes(self) -> int:
        return sum(f.file_size for f in self.files)


def known_bucket_counts(live: Mapping[tuple[bytes, int], Sequence[ManifestEntry]]
                        ) -> dict[bytes, int]:
    """The bucket count of every partition that has real buckets (``getKnownNumBuckets``)."""
    known: dict[bytes, int] = {}
    for (pbytes, bucket), entries in live.items():
        if bucket == POSTPONE_BUCKET:
            continue
        for e in entries:
            if e.total_buckets < 0:
                continue
            have = known.setdefault(pbytes, e.total_buckets)
            if have != e.total_buckets:
                raise MaintenanceError(
                    f"a partition's files were written with {have} and {e.total_buckets} "
                    "buckets; the table is inconsistent, refusing to compact its postpone files"
                )
    return known


def bucket_count(table: FileStore, known: int | None, pending_rows: int) -> int:
    """Paimon's ``determineBucketNum`` for one partition."""
    if known is not None:
        return known
    target = table.options.postpone_target_row_num_per_bucket
    if target is not None:
        return max(1, math.ceil(pending_rows / target))
    return table.options.postpone_default_bucket_num


def replay_order(files: Sequence[DataFileMeta]) -> tuple[DataFileMeta, ...]:
    """Files in the order they were written: creation time, then manifest order (Paimon sorts
    by creation time alone, stably)."""
    indexed = sorted(enumerate(files), key=lambda p: (p[1].creation_time_millis or 0, p[0]))
    return tuple(f for _, f in indexed)


def plan_postpone(table: FileStore, snapshot_id: int,
                  live: Mapping[tuple[bytes, int], Sequence[ManifestEntry]],
                  wanted: Collection[bytes] | None = None) -> list[PostponeTask]:
    """A task for every partition (of ``wanted``, None: all) with postpone files."""
    known = known_bucket_counts(live)
    codec = table.partition_codec
    real: dict[bytes, list[tuple[int, tuple[DataFileMeta, ...]]]] = defaultdict(list)
    for (pbytes, bucket), entries in sorted(live.items()):
        if bucket != POSTPONE_BUCKET:
            real[pbytes].append((bucket, tuple(e.file for e in entries)))
    tasks = []
    for (pbytes, bucket), entries in sorted(live.items()):
        if bucket != POSTPONE_BUCKET or not entries or (wanted is not None
                                                        and pbytes not in wanted):
            continue
        files = replay_order([e.file for e in entries])
        n = bucket_count(table, known.get(pbytes), sum(f.row_count for f in files))
        tasks.append(PostponeTask(codec.decode(pbytes), n, files, tuple(real.get(pbytes, ())),
                                  snapshot_id))
    return tasks


class _BucketWriters:
    """Level-0 files of the real buckets rows are replayed into: a buffer per bucket, sorted
    and merged when flushed (as a writer's buffer), flushed largest first past the budget."""

    def __init__(self, table: FileStore, partition: tuple, task: PostponeTask) -> None:
        self.table, self.partition = table, partition
        self.spec = file_writer_spec(table)
        self.merge_spec = merge_spec_for(table)
        self.key_names = list(table.schema.trimmed_primary_keys)
        self.next_seq = {b: max((f.max_sequence_number for f in files), default=-1) + 1
                         for b, files in task.bucket_files}
        self.buffers: dict[int, list[pa.Table]] = defaultdict(list)
        self.sizes: dict[int, int] = defaultdict(int)
        self.files: dict[int, list[DataFileMeta]] = defaultdict(list)
        self.changelog: dict[int, RollingFileWriter] = {}
        self.input_changelog = table.options.changelog_producer is ChangelogProducer.INPUT
        self.written: list[RollingFileWriter] = []

    def _writer(self, bucket: int, changelog: bool = False) -> RollingFileWriter:
        w = RollingFileWriter(self.table.file_io, self.table.paths, self.partition, bucket,
                              self.spec, level=0, file_source=FileSource.APPEND,
                              changelog=changelog)
        self.written.append(w)
        return w

    def add(self, bucket: int, rows: pa.Table, kinds: pa.Array) -> None:
        seq = self.next_seq.get(bucket, 0)
        kv = to_kv(rows, self.key_names, seq, kinds, self.spec.file_schema)
        self.next_seq[bucket] = seq + rows.num_rows
        self.buffers[bucket].append(kv)
        self.sizes[bucket] += kv.nbytes
        if self.input_changelog:  # changelog-producer = input: the replayed records
            if bucket not in self.changelog:
                self.changelog[bucket] = self._writer(bucket, changelog=True)
            self.changelog[bucket].write(kv)
        budget = self.table.options.write_buffer_size
        total = sum(self.sizes.values())
        if total > budget:
            for b in sorted(self.sizes, key=lambda b: -self.sizes[b]):
                if total <= budget // 2:
                    break
                total -= self.sizes[b]
                self.flush(b)

    def flush(self, bucket: int) -> None:
        chunks = self.buffers.pop(bucket, [])
        self.sizes.pop(bucket, None)
        if not chunks:
            return
        table = pa.concat_tables(chunks) if len(chunks) > 1 else chunks[0]
        w = self._writer(bucket)
        w.write(sort_and_merge(table, self.merge_spec, drop_retracts=False))
        self.files[bucket].extend(w.close())

    def finish(self) -> tuple[dict[int, list[DataFileMeta]], dict[int, list[DataFileMeta]]]:
        for b in list(self.buffers):
            self.flush(b)
        logs = {b: w.close() for b, w in self.changelog.items()}
        return dict(self.files), logs

    def abort(self) -> None:
        for w in self.written:
            w.abort()


def run_postpone_task(table: FileStore, task: PostponeTask, full: bool) -> list[CommitMessage]:
    """Replay one partition's postpone files into its real buckets (writes files, commits
    nothing): COMPACT messages for the real buckets and for bucket -2."""
    s = table.schema
    names = s.row_type.names
    keys = list(s.bucket_keys)
    types = [s.row_type.field(k).type for k in keys]
    partition = tuple(task.partition)
    writers = _BucketWriters(table, partition, task)
    results: list[tuple[int, list[DataFileMeta], CompactResult, list[DataFileMeta]]] = []
    try:
        for f in task.files:
            for chunk in iter_data_file(table, partition, POSTPONE_BUCKET, f,
                                        [VALUE_KIND, *names], CHUNK_ROWS):
                if not chunk.num_rows:
                    continue
                ids = bucket_ids([chunk.column(k) for k in keys], types, task.total_buckets)
                routed = chunk.append_column(_BUCKET_COLUMN, pa.array(ids, pa.int32()))
                for (bucket,), part in group_by_columns(routed, [_BUCKET_COLUMN]):
                    writers.add(int(bucket), part.select(names),
                                part.column(VALUE_KIND).combine_chunks())
        new_files, logs = writers.finish()
        existing = dict(task.bucket_files)
        for bucket in sorted(new_files):
            new = new_files[bucket]
            before = list(existing.get(bucket, ()))
            if full:
                result = BucketCompactor(table, partition, bucket, before + new).compact(True)
            else:
                result = InlineCompactor(table, partition, bucket, before).after_flush(new)
            results.append((bucket, new, result, logs.get(bucket, [])))
    except BaseException:
        writers.abort()
        for bucket, _, result, _ in results:
            _delete(table, partition, bucket, _created(result))
        raise
    messages = [_message(table, partition, task.total_buckets, b, new, result, log)
                for b, new, result, log in results]
    messages.append(CommitMessage(partition, POSTPONE_BUCKET, POSTPONE_BUCKET,
                                  compact_before=task.files))
    return messages


def _message(table: FileStore, partition: tuple, total_buckets: int, bucket: int,
             new: list[DataFileMeta], result: CompactResult,
             changelog: list[DataFileMeta]) -> CommitMessage:
    """One real bucket's COMPACT message: the new level-0 files the compaction left alone go
    to ``compact_after`` with its outputs; new files it consumed were intermediates (deleted
    now, named nowhere); ``compact_before`` holds only files that were live before."""
    new_names = {f.file_name for f in new}
    consumed = {f.file_name for f in result.before}
    kept = {f.file_name for f in result.after}
    _delete(table, partition, bucket, [f for f in new if f.file_name in consumed - kept])
    return CommitMessage(
        partition, bucket, total_buckets,
        compact_before=tuple(f for f in result.before if f.file_name not in new_names),
        compact_after=tuple(f for f in new if f.file_name not in consumed) + result.after,
        compact_changelog_files=tuple(changelog) + result.changelog,
        compact_new_index_files=result.index_after,
        compact_deleted_index_files=result.index_before,
    )


def _created(result: CompactResult) -> list[DataFileMeta]:
    """Files a compaction wrote (an upgrade's output is its input, moved: not written)."""
    inputs = {f.file_name for f in result.before}
    return [f for f in result.after if f.file_name not in inputs] + list(result.changelog)


def _delete(table: FileStore, partition: tuple, bucket: int,
            files: Sequence[DataFileMeta]) -> None:
    for f in files:
        table.file_io.delete_quietly(table.paths.data_file_path(partition, bucket, f.file_name))
