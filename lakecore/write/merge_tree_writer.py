"""``MergeTreeWriter``: the writer of one (partition, bucket) of a primary-key table.

Records get sequence numbers continuing from the bucket's max, collect in a sort buffer,
and are spilled as sorted, merged runs to local disk when the shared write budget is
exceeded (``write-buffer-spillable``). ``prepare_commit`` merges the runs and writes level-0
files rolled at ``target-file-size``. With ``changelog-producer = input`` every buffer that is
spilled or flushed also writes its raw records (nothing merged) to changelog files of its own,
sorted like the data (key, sequence fields, sequence number), so each changelog file is in
key order and its min/max keys are right (Paimon's ``MergeTreeWriter.flushWriteBuffer`` feeds
the changelog writer from the same sorted buffer).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from lakecore.commit.message import CommitMessage
from lakecore.compact.inline import InlineCompactor
from lakecore.format.kv import to_kv
from lakecore.format.manifest import FileSource
from lakecore.io.data_file_writer import FileWriterSpec, RollingFileWriter
from lakecore.merge.fast import sort_and_merge
from lakecore.merge.functions import merge_sorted
from lakecore.merge.runs import merge_runs
from lakecore.merge.sort import sort_kv
from lakecore.merge.spec import MergeSpec
from lakecore.store.file_io import FileIO
from lakecore.store.paths import PathFactory

SPILL_CHUNK_ROWS = 256 * 1024


def _read_ipc_chunks(path: str) -> Iterator[pa.Table]:
    with pa.memory_map(path) as src:
        reader = ipc.open_file(src)
        for i in range(reader.num_record_batches):
            yield pa.Table.from_batches([reader.get_batch(i)])


class MergeTreeWriter:
    """The writer of one bucket of a primary-key table: sort buffer, merge, level-0 files."""

    def __init__(
        self,
        file_io: FileIO,
        paths: PathFactory,
        partition: Sequence[Any],
        bucket: int,
        total_buckets: int,
        file_spec: FileWriterSpec,
        merge_spec: MergeSpec,
        key_names: Sequence[str],
        next_sequence: int,
        spillable: bool,
        changelog_input: bool,
        spill_dir: str | None = None,
        compactor: InlineCompactor | None = None,
    ) -> None:
        self.file_io, self.paths = file_io, paths
        self.partition, self.bucket, self.total_buckets = tuple(partition), bucket, total_buckets
        self.file_spec, self.merge_spec = file_spec, merge_spec
        self.key_names = list(key_names)
        self.next_sequence = next_sequence
        self.spillable, self.changelog_input = spillable, changelog_input
        self.spill_dir = spill_dir
        self._chunks: list[pa.Table] = []
        self._bytes = 0
        self._spills: list[str] = []
        self.spill_count = 0
        self._changelog: list[RollingFileWriter] = []  # closed, one per spill or flush
        self._data_writers: list[RollingFileWriter] = []
        self.compactor = compactor  # None for write-only writers

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def first_buffered(self) -> pa.Table | None:
        """The first rows buffered (in the file schema, not yet merged), if any."""
        return self._chunks[0] if self._chunks else None

    def write(self, rows: pa.Table, kinds: pa.Array) -> None:
        kv = to_kv(rows, self.key_names, self.next_sequence, kinds, self.file_spec.file_schema)
        self.next_sequence += rows.num_rows
        self._chunks.append(kv)
        self._bytes += kv.nbytes

    def _new_writer(self, changelog: bool = False) -> RollingFileWriter:
        return RollingFileWriter(
            self.file_io,
            self.paths,
            self.partition,
            self.bucket,
            self.file_spec,
            level=0,
            file_source=FileSource.APPEND,
            changelog=changelog,
        )

    def _sorted_buffer(self) -> pa.Table:
        """The buffer sorted and merged; with the input producer its raw records, sorted
        the same way, go to a changelog file first (one sort serves both)."""
        table = pa.concat_tables(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
        if not self.changelog_input:
            return sort_and_merge(table, self.merge_spec, drop_retracts=False)
        records = sort_kv(table, self.merge_spec)
        w = self._new_writer(changelog=True)
        try:
            w.write(records)
            w.close()
        except BaseException:
            w.abort()
            raise
        self._changelog.append(w)
        return merge_sorted(records, self.merge_spec, drop_retracts=False)

    def spill_or_flush(self) -> None:
        """Free the buffer: spill a sorted run to local disk, or flush a level-0 file."""
        if not self._chunks:
            return
        merged = self._sorted_buffer()
        self._chunks, self._bytes = [], 0
        if not self.spillable:
            w = self._new_writer()
            w.write(merged)
            w.close()
            self._data_writers.append(w)
            return
        fd, path = tempfile.mkstemp(prefix="lakecore-spill-", suffix=".arrow", dir=self.spill_dir)
        os.close(fd)
        with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, merged.schema) as w:
            for b in merged.to_batches(max_chunksize=SPILL_CHUNK_ROWS):
                w.write_batch(b)
        self._spills.append(path)
        self.spill_count += 1

    def prepare_commit(self) -> CommitMessage:
        runs: list = [_read_ipc_chunks(p) for p in self._spills]
        if self._chunks:
            runs.append([self._sorted_buffer()])
        if runs:
            w = self._new_writer()
            try:
                if len(runs) == 1 and not self._spills:
                    w.write(runs[0][0])
                else:
                    for chunk in merge_runs(runs, self.merge_spec, drop_retracts=False):
                        w.write(chunk)
                w.close()
            except BaseException:
                w.abort()
                raise
            self._data_writers.append(w)
        self._release_buffers()
        new_files = tuple(f for w in self._data_writers for f in w.results)
        changelog = tuple(f for w in self._changelog for f in w.results)
        before: tuple = ()
        after: tuple = ()
        compact_log: tuple = ()
        index_new: tuple = ()
        index_old: tuple = ()
        if self.compactor is not None:
            try:
                result = self.compactor.after_flush(new_files)
            except BaseException:
                self.abort()
                raise
            before, after, compact_log = result.before, result.after, result.changelog
            index_new, index_old = result.index_after, result.index_before
        self._data_writers, self._changelog = [], []
        return CommitMessage(
            partition=self.partition,
            bucket=self.bucket,
            total_buckets=self.total_buckets,
            new_files=new_files,
            changelog_files=changelog,
            compact_before=before,
            compact_after=after,
            compact_changelog_files=compact_log,
            compact_new_index_files=index_new,
            compact_deleted_index_files=index_old,
        )

    def _release_buffers(self) -> None:
        self._chunks, self._bytes = [], 0
        for p in self._spills:
            try:
                os.unlink(p)
            except OSError:
                pass
        self._spills = []

    def abort(self) -> None:
        self._release_buffers()
        for w in self._data_writers + self._changelog:
            w.abort()
        self._data_writers, self._changelog = [], []
