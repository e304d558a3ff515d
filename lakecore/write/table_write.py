"""``TableWrite``: routes rows to one writer per (partition, bucket) and prepares commits."""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from lakecore.commit.message import CommitMessage
from lakecore.compact.inline import InlineCompactor
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.manifest import DataFileMeta
from lakecore.format.snapshot import Snapshot
from lakecore.io.data_file_writer import share_dictionary_choice
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.options import ChangelogProducer
from lakecore.store.file_store import FileStore
from lakecore.store.manifest_io import merge_entries
from lakecore.store.paths import PathFactory
from lakecore.utils.threads import map_buckets, side_pool
from lakecore.write.append_writer import AppendOnlyWriter
from lakecore.write.dynamic_bucket import (
    DynamicBucketIndex,
    IndexChange,
    is_dynamic_bucket_table,
)
from lakecore.write.merge_tree_writer import MergeTreeWriter
from lakecore.write.routing import UNASSIGNED, Slice, assign_slice, route

log = logging.getLogger(__name__)

Writer = MergeTreeWriter | AppendOnlyWriter


class TableWrite:
    """Rows in, one writer per (partition, bucket), CommitMessages out."""

    def __init__(self, table: FileStore, commit_user: str) -> None:
        self.table = table
        self.commit_user = commit_user
        self.schema = table.schema
        self.options = table.options
        self._writers: dict[tuple[tuple, int], Writer] = {}
        self._restored: dict[tuple[bytes, int], list[DataFileMeta]] | None = None
        self._base_snapshot: Snapshot | None = None  # what _restore read (first read)
        self._fresh = True  # the first prepare_commit uses the files read at writer creation
        self._file_spec = file_writer_spec(table)
        self._merge_spec = merge_spec_for(table) if table.is_primary_key_table else None
        self._static_partition: dict[str, Any] | None = None
        self._ignore_previous = False
        self._postpone_paths: PathFactory | None = None
        self._dynamic: DynamicBucketIndex | None = None
        self._num_assigners = 1  # dynamic buckets: assigners sharing a partition (Spark)

    def with_static_partition(self, spec: dict[str, Any] | None) -> None:
        self._static_partition = dict(spec) if spec else None

    def with_ignore_previous_files(self, ignore: bool = True) -> None:
        """Start every bucket empty (Paimon's ``withIgnorePreviousFiles``, set for overwrites):
        the files an overwrite replaces must not feed its inline compaction."""
        self._ignore_previous = ignore

    # -- input ---------------------------------------------------------------------------
    def write_arrow(self, data: pa.Table | pa.RecordBatch) -> None:
        """Route ``data`` (``routing.route``: checked, cast, kind, partition and bucket per
        row) and write it; every partition is checked before anything is buffered."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if data.num_rows == 0:
            return
        assign = self._dynamic_index().assign if is_dynamic_bucket_table(self.table) else None
        self.write_slices(route(self.table, data, self._static_partition, assign=assign))

    def with_num_assigners(self, num_assigners: int) -> None:
        """Dynamic buckets in the Spark ingest: how many assigners share each partition
        (each slice names its own assigner id)."""
        self._num_assigners = num_assigners

    def _dynamic_index(self) -> DynamicBucketIndex:
        """The HASH indexes this writer assigns with (dynamic-bucket tables), based on the
        same snapshot as its restored files."""
        if self._dynamic is None:
            restored = self._restore()  # also fixes the base snapshot
            codec_buckets: dict[bytes, set[int]] = defaultdict(set)
            for (pbytes, bucket), files in restored.items():
                if files:
                    codec_buckets[pbytes].add(bucket)
            self._dynamic = DynamicBucketIndex(
                self.table, self._base_snapshot, lambda p: codec_buckets.get(p, set()),
                ignore_existing=self._ignore_previous)
        return self._dynamic

    def write_slices(self, slices: Iterable[Slice]) -> None:
        """Write rows ``routing.route`` has already routed (the Spark ingest's second stage
        receives them from the first): each slice goes to its (partition, bucket)'s writer
        as it is, nothing is checked or routed again."""
        for s in slices:
            if s.bucket == UNASSIGNED and s.assign_id is not None:  # dynamic, Spark stage 2
                for piece in assign_slice(self.table, s, functools.partial(
                        self._dynamic_index().assign, num_assigners=self._num_assigners,
                        assign_id=s.assign_id)):
                    self._writer(piece.partition, piece.bucket).write(piece.rows, piece.kinds)
                continue
            self._writer(s.partition, s.bucket).write(s.rows, s.kinds)
        self._control_memory()

    def write_pandas(self, df: Any) -> None:
        self.write_arrow(pa.Table.from_pandas(df, preserve_index=False))

    def _restore(self) -> dict[tuple[bytes, int], list[DataFileMeta]]:
        """The live files per (partition, bucket) of the latest snapshot (read once)."""
        if self._restored is None:
            self._restored = defaultdict(list)
            latest = self.table.snapshot_manager.latest()
            if self._dynamic is None:
                self._base_snapshot = latest
            if latest is not None:
                mio = self.table.manifest_io()
                metas = mio.read_manifest_list(latest.base_manifest_list) + mio.read_manifest_list(
                    latest.delta_manifest_list
                )
                for e in merge_entries(mio.read_entries(metas)).values():
                    self._restored[(e.partition, e.bucket)].append(e.file)
        return self._restored

    def _writer(self, partition: tuple, bucket: int) -> Writer:
        key = (partition, bucket)
        w = self._writers.get(key)
        if w is not None:
            return w
        if bucket == POSTPONE_BUCKET:
            w = self._writers[key] = self._postpone_writer(partition)
            return w
        pbytes = self.table.partition_codec.encode(partition)
        restored = [] if self._ignore_previous else self._restore().get((pbytes, bucket), [])
        next_seq = max((f.max_sequence_number for f in restored), default=-1) + 1
        total = self.options.bucket
        if self._merge_spec is None:
            w = AppendOnlyWriter(self.table.file_io, self.table.paths, partition, bucket, total,
                                 self._file_spec, next_seq)
        else:
            w = MergeTreeWriter(
                self.table.file_io,
                self.table.paths,
                partition,
                bucket,
                total,
                self._file_spec,
                self._merge_spec,
                key_names=list(self.schema.trimmed_primary_keys),
                next_sequence=next_seq,
                spillable=self.options.write_buffer_spillable,
                changelog_input=self.options.changelog_producer is ChangelogProducer.INPUT,
                compactor=None if self.options.write_only
                else InlineCompactor(self.table, partition, bucket, restored),
            )
        self._writers[key] = w
        return w

    def _postpone_writer(self, partition: tuple) -> MergeTreeWriter:
        """The writer of a postpone bucket (Paimon's PostponeBucketWriter): new files only,
        sequence numbers from 0 (nothing is restored or merged across files: the dedicated
        compaction replays the files in creation order), no compaction, and Paimon's file
        names (``data--u-<user>-s-<write id>-w-...``). Its files are Parquet, which Paimon's
        readers take as well as the Avro its own postpone writers default to."""
        assert self._merge_spec is not None  # postpone buckets need a primary key
        if self._postpone_paths is None:
            self._postpone_paths = self.table.paths.for_postpone_writer(
                self.commit_user, secrets.randbelow(2**31 - 1))
        return MergeTreeWriter(
            self.table.file_io, self._postpone_paths, partition, POSTPONE_BUCKET,
            POSTPONE_BUCKET, self._file_spec, self._merge_spec,
            key_names=list(self.schema.trimmed_primary_keys), next_sequence=0,
            spillable=self.options.write_buffer_spillable, changelog_input=False,
            compactor=None,
        )

    def _control_memory(self) -> None:
        budget = self.options.write_buffer_size
        total = sum(w.buffered_bytes for w in self._writers.values())
        if total <= budget:
            return
        for w in sorted(self._writers.values(), key=lambda w: -w.buffered_bytes):
            if total <= budget // 2:
                break
            total -= w.buffered_bytes
            w.spill_or_flush()

    # -- output --------------------------------------------------------------------------
    def prepare_commit(self) -> list[CommitMessage]:
        """Every bucket's message. The buckets flush (and compact) side by side on the bucket
        threads; if one fails, the files of all of them are deleted and the first error is
        raised."""
        self._refresh_compactors()
        try:
            self._share_dictionary_choices()  # before any file is written or job started
            # a dynamic-bucket table's HASH index files are written on a worker thread while
            # the data files flush (DynamicBucketIndex.prepare_commit cleans up after itself)
            index_job = (None if self._dynamic is None
                         else side_pool().submit(self._dynamic.prepare_commit))
            outcomes = map_buckets(_prepare_one, list(self._writers.values()))
        finally:
            self._file_spec.dictionary_choices.unshare()
        msgs = [m for m, _ in outcomes if m is not None and not m.is_empty()]
        errors = [e for _, e in outcomes if e is not None]
        try:
            changes = [] if index_job is None else index_job.result()
            if errors:
                raise errors[0]
            if changes:
                msgs = self._with_index_changes(msgs, changes)
        except BaseException:
            for m in msgs:
                self._delete_files(m)
            if index_job is not None and index_job.exception() is None:
                assert self._dynamic is not None
                self._dynamic.delete_written({c.new.file_name for c in index_job.result()
                                              if c.new is not None})
            self.abort()
            raise
        return msgs

    def _share_dictionary_choices(self) -> None:
        """For each partition whose buckets flush side by side, which columns keep a Parquet
        dictionary is judged once, here, from the buffered rows of its lowest bucket
        (``share_dictionary_choice``), rather than once per bucket's file."""
        buffered: dict[tuple, list[tuple[int, pa.Table]]] = defaultdict(list)
        for (partition, bucket), w in self._writers.items():
            first = w.first_buffered()
            if first is not None:
                buffered[partition].append((bucket, first))
        for partition, firsts in buffered.items():
            if len(firsts) > 1:
                _, first = min(firsts, key=lambda bucket_rows: bucket_rows[0])
                share_dictionary_choice(self._file_spec, partition, first)

    def _with_index_changes(self, msgs: list[CommitMessage],
                            changes: list[IndexChange]) -> list[CommitMessage]:
        """Each touched bucket's new HASH index file (and the one it replaces) on the
        bucket's message; a bucket with an index change but no data gets its own."""
        by_key = {(tuple(m.partition), m.bucket): i for i, m in enumerate(msgs)}
        out = list(msgs)
        for c in changes:
            new = (c.new,) if c.new is not None else ()
            old = (c.replaced,) if c.replaced is not None else ()
            i = by_key.get((tuple(c.partition), c.bucket))
            if i is None:
                out.append(CommitMessage(c.partition, c.bucket, self.options.bucket,
                                         new_index_files=new, deleted_index_files=old))
            else:
                out[i] = dataclasses.replace(out[i], new_index_files=new,
                                             deleted_index_files=old)
        return out

    def _refresh_compactors(self) -> None:
        """Inline compaction plans on the bucket's files in the latest snapshot, not on what
        this writer last saw: after a lost COMPACT (conflict) or another compactor's commit
        the next compaction starts from the truth."""
        compactors = [(k, w.compactor) for k, w in self._writers.items()
                      if isinstance(w, MergeTreeWriter) and w.compactor is not None]
        if not compactors or self._fresh:
            self._fresh = False
            return
        self._restored = None
        live = self._restore()
        for (partition, bucket), c in compactors:
            c.files = list(live.get((self.table.partition_codec.encode(partition), bucket), []))

    def _delete_files(self, m: CommitMessage) -> None:
        for f in m.written_files():
            self.table.file_io.delete_quietly(
                self.table.paths.data_file_path(m.partition, m.bucket, f.file_name)
            )
        if self._dynamic is not None:
            self._dynamic.delete_written({f.file_name for f in m.written_index_files()})

    def abort(self) -> None:
        for w in self._writers.values():
            w.abort()
        self._writers.clear()

    def close(self) -> None:
        self.abort()


def _prepare_one(w: Writer) -> tuple[CommitMessage | None, BaseException | None]:
    """One bucket's message, or the error that stopped it (the writer cleaned up its own)."""
    try:
        return w.prepare_commit(), None
    except BaseException as e:  # handed to prepare_commit, which cleans up and raises it
        return None, e
