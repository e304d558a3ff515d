"""Writer of one (partition, bucket) of an append-only table: rows go to files as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakecore.commit.message import CommitMessage
from lakecore.format.manifest import FileSource
from lakecore.io.data_file_writer import FileWriterSpec, RollingFileWriter
from lakecore.store.file_io import FileIO
from lakecore.store.paths import PathFactory


class AppendOnlyWriter:
    """The writer of one bucket of an append table: rows straight to level-0 files."""

    def __init__(
        self,
        file_io: FileIO,
        paths: PathFactory,
        partition: Sequence[Any],
        bucket: int,
        total_buckets: int,
        file_spec: FileWriterSpec,
        next_sequence: int,
    ) -> None:
        self.partition, self.bucket, self.total_buckets = tuple(partition), bucket, total_buckets
        self._writer = RollingFileWriter(
            file_io, paths, partition, bucket, file_spec, level=0,
            file_source=FileSource.APPEND, first_sequence=next_sequence,
        )
        self._chunks: list[pa.Table] = []
        self._bytes = 0

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def first_buffered(self) -> pa.Table | None:
        """The first rows buffered, if any."""
        return self._chunks[0] if self._chunks else None

    def write(self, rows: pa.Table, kinds: pa.Array | None = None) -> None:
        self._chunks.append(rows)
        self._bytes += rows.nbytes

    def spill_or_flush(self) -> None:
        if self._chunks:
            self._writer.write(pa.concat_tables(self._chunks))
            self._chunks, self._bytes = [], 0

    def prepare_commit(self) -> CommitMessage:
        self.spill_or_flush()
        files = tuple(self._writer.take_results())
        return CommitMessage(self.partition, self.bucket, self.total_buckets, new_files=files)

    def abort(self) -> None:
        self._chunks, self._bytes = [], 0
        self._writer.abort()
