"""Executing a rewrite: merge a section's sorted runs into new files at the output level.

Streaming and columnar: each sorted run is read chunk by chunk (its files are in key order)
and ``merge_runs`` merges the runs in bounded memory, so a bucket larger than RAM compacts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io.data_file_reader import iter_sorted_run
from lakecore.io.data_file_writer import RollingFileWriter
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.merge.runs import merge_runs
from lakecore.store.file_store import FileStore

Section = Sequence[Sequence[DataFileMeta]]  # sorted runs, each a list of files in key order


class MergeTreeRewriter:
    """Rewrites sections of one (partition, bucket) of a primary-key table."""

    def __init__(self, table: FileStore, partition: Sequence[Any], bucket: int,
                 chunk_rows: int = 128 * 1024) -> None:
        self.table, self.partition, self.bucket = table, tuple(partition), bucket
        self.file_spec = file_writer_spec(table)
        self.merge_spec = merge_spec_for(table)
        s = table.schema
        self.columns = (
            [KEY_PREFIX + k for k in s.trimmed_primary_keys]
            + [SEQUENCE_NUMBER, VALUE_KIND]
            + s.row_type.names
        )
        self.chunk_rows = chunk_rows
        self.bytes_read = 0

    def rewrite(self, sections: Sequence[Section], output_level: int, drop_delete: bool
                ) -> list[DataFileMeta]:
        """Merge every section into files rolled at ``target-file-size`` at ``output_level``.
        Sections do not overlap each other and are given in key order, so one writer serves."""
        writer = RollingFileWriter(
            self.table.file_io, self.table.paths, self.partition, self.bucket, self.file_spec,
            level=output_level, file_source=FileSource.COMPACT,
        )
        try:
            for section in sections:
                for run in section:
                    self.bytes_read += sum(f.file_size for f in run)
                if len(section) == 1 and not drop_delete:
                    # one run is already merged; just copy it into the new files
                    for chunk in iter_sorted_run(self.table, self.partition, self.bucket,
                                                 section[0], self.columns, self.chunk_rows):
                        writer.write(chunk)
                    continue
                runs = [
                    iter_sorted_run(self.table, self.partition, self.bucket, run, self.columns,
                                    self.chunk_rows)
                    for run in section
                ]
                for chunk in merge_runs(runs, self.merge_spec, drop_retracts=drop_delete):
                    writer.write(chunk)
            return writer.close()
        except BaseException:
            writer.abort()
            raise
