"""Executing a rewrite: merge a section's sorted runs into new files at the output level.

Streaming and columnar: each sorted run is read chunk by chunk (its files are in key order)
and ``merge_runs`` merges the runs in bounded memory, so a bucket larger than RAM compacts.
In a deletion-vector table every input file is read with its vector applied (a marked row was
superseded and must not come back), and the superseded higher-level rows a lookup found can be
merged in as one more run (``extra_run``). A section's files are merged as one sorted run per
level, ordered so that equal sequence numbers get Paimon's winner (``merge/order.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakecore.compact.keys import KeyOrder
from lakecore.compact.lookup import apply_vector
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io.data_file_reader import iter_data_file
from lakecore.io.data_file_writer import RollingFileWriter
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.merge.order import level0_group_count, level_groups
from lakecore.merge.runs import merge_runs
from lakecore.options import MergeEngine
from lakecore.store.file_store import FileStore

Section = Sequence[Sequence[DataFileMeta]]  # sorted runs, each a list of files in key order


class MergeTreeRewriter:
    """Rewrites sections of one (partition, bucket) of a primary-key table."""

    def __init__(self, table: FileStore, partition: Sequence[Any], bucket: int,
                 chunk_rows: int = 128 * 1024,
                 vectors: Mapping[str, np.ndarray] | None = None) -> None:
        self.table, self.partition, self.bucket = table, tuple(partition), bucket
        self.vectors = vectors or {}
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
        rt = s.row_type
        self.keys = KeyOrder.of([rt.field(k).type for k in s.trimmed_primary_keys])
        self.first_row = self.merge_spec.engine is MergeEngine.FIRST_ROW

    def _run(self, files: Sequence[DataFileMeta]) -> Iterator[pa.Table]:
        """A sorted run's chunks, deletion vectors applied."""
        for f in files:
            vec = self.vectors.get(f.file_name)
            offset = 0
            for chunk in iter_data_file(self.table, self.partition, self.bucket, f,
                                        self.columns, self.chunk_rows):
                n = chunk.num_rows
                chunk = apply_vector(chunk, vec, offset)
                offset += n
                if chunk.num_rows:
                    yield chunk

    def _level_runs(self, files: Sequence[DataFileMeta]) -> list[list[DataFileMeta]]:
        """``files`` regrouped into one sorted run per level (each level-0 file alone), in the
        order that gives equal sequence numbers Paimon's winner (``merge/order.py``)."""
        return level_groups(sorted(files, key=self.keys.min_key), self.first_row)

    def rewrite(self, sections: Sequence[Section], output_level: int, drop_delete: bool,
                extra_run: pa.Table | None = None) -> list[DataFileMeta]:
        """Merge every section into files rolled at ``target-file-size`` at ``output_level``.
        Sections do not overlap each other and are given in key order, so one writer serves.
        ``extra_run`` (key order; rows of levels above every section's) is merged with all
        of them."""
        writer = RollingFileWriter(
            self.table.file_io, self.table.paths, self.partition, self.bucket, self.file_spec,
            level=output_level, file_source=FileSource.COMPACT,
        )
        try:
            if extra_run is not None:
                groups = self._level_runs([f for s in sections for run in s for f in run])
                self.bytes_read += sum(f.file_size for g in groups for f in g)
                runs = [self._run(g) for g in groups]
                # the superseded rows come from levels above the unit's: after its level-0
                # files, before its levels >= 1 (equal sequence numbers, merge/order.py; a
                # deletion-vector table is never first-row)
                runs.insert(level0_group_count(groups), iter([extra_run.select(self.columns)]))
                for chunk in merge_runs(runs, self.merge_spec, drop_retracts=drop_delete):
                    writer.write(chunk)
                return writer.close()
            for section in sections:
                for run in section:
                    self.bytes_read += sum(f.file_size for f in run)
                if len(section) == 1 and not drop_delete:
                    # one run is already merged; just copy it into the new files
                    for chunk in self._run(section[0]):
                        writer.write(chunk)
                    continue
                runs = [self._run(g) for g in self._level_runs([f for r in section for f in r])]
                for chunk in merge_runs(runs, self.merge_spec, drop_retracts=drop_delete):
                    writer.write(chunk)
            return writer.close()
        except BaseException:
            writer.abort()
            raise
