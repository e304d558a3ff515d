"""Reading splits: append files as they are; primary-key buckets merged on read.

Files of a bucket are grouped into sections of overlapping key ranges (Paimon's
IntervalPartition idea); a section with one file needs no merge (only retractions dropped),
a section with several is merged as sorted runs by the table's merge engine. Within such a
section, for a single integer key, the rows of keys outside every range two files share go
straight through too (``read/overlap.py``): only the shared ranges are merged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.deletion_vector import deletion_mask
from lakecore.format.kv import KEY_PREFIX, ROW_KINDS, SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.format.manifest import DataFileMeta
from lakecore.io.data_file_reader import (
    ReadColumns,
    data_file_path,
    map_row_groups,
    read_data_file,
)
from lakecore.io.specs import merge_spec_for
from lakecore.merge.order import merge_order
from lakecore.merge.runs import merge_runs
from lakecore.options import MergeEngine
from lakecore.read.deletion_vectors import read_vectors
from lakecore.read.overlap import (
    MIN_SOLO_SHARE,
    key_sections,
    shared_ranges,
    solo_and_shared,
    solo_share,
)
from lakecore.read.predicate import Predicate
from lakecore.read.scan import Split
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore
from lakecore.utils.arrow import bool_array
from lakecore.utils.threads import ordered_map

ROW_KIND_COLUMN = "_ROW_KIND"
_LIVE_KINDS = pa.array([RowKind.INSERT.value, RowKind.UPDATE_AFTER.value], pa.int8())


class SplitRead:
    """Reads one split: plain files as they are, overlapping runs merged on read."""

    def __init__(
        self,
        table: FileStore,
        projection: list[str] | None,
        predicate: Predicate | None,
    ) -> None:
        self.table = table
        s = table.schema
        self.names = projection or s.row_type.names
        self.predicate = predicate
        self.read_names = list(self.names)
        for c in sorted(predicate.columns()) if predicate else []:
            if c not in self.read_names:
                self.read_names.append(c)
        self.is_pk = bool(s.primary_keys)
        self._read_columns: dict[tuple[str, ...], ReadColumns] = {}
        if self.is_pk:
            self.merge_spec = merge_spec_for(table, self.read_names)
            self.key_fields = [s.row_type.field(k) for k in s.trimmed_primary_keys]
            # one integer key: the rows of keys no other file holds skip the merge
            self._integer_key = len(self.key_fields) == 1 and pa.types.is_integer(
                to_arrow(self.key_fields[0].type))
            # the merge's own columns too: sequence fields (and sequence groups' ones)
            extra = [c for c in self.merge_spec.value_columns if c not in self.read_names]
            self.file_value_names = self.read_names + extra

    def _columns(self, names: list[str]) -> ReadColumns:
        """``names`` as every file of this read is asked for them (worked out once; a race
        only works them out twice)."""
        key = tuple(names)
        held = self._read_columns.get(key)
        if held is None:
            held = self._read_columns[key] = ReadColumns.of(self.table, names)
        return held

    def _read_file(self, split: Split, f: DataFileMeta, names: list[str],
                   vectors: Mapping[str, np.ndarray]) -> pa.Table:
        """The file's rows, minus the positions its deletion vector marks (if any); with a
        vector its row groups are decoded and filtered side by side."""
        columns = self._columns(names)
        positions = vectors.get(f.file_name)
        if positions is None:
            return read_data_file(self.table, split.partition, split.bucket, f, columns)
        path = data_file_path(self.table, split.partition, split.bucket, f)
        keep = bool_array(deletion_mask(positions, f.row_count, path))

        def live(rows: pa.Table, first: int) -> pa.Table:
            return rows.filter(keep.slice(first, rows.num_rows))

        kept = map_row_groups(self.table, split.partition, split.bucket, f, columns, live)
        if len(kept) == 1:
            return kept[0]
        return pa.concat_tables(kept) if kept else read_data_file(
            self.table, split.partition, split.bucket, f, columns)  # no row group at all

    # -- per split -----------------------------------------------------------------------
    def read_split(self, split: Split) -> Iterator[pa.Table]:
        """The split's live rows (merged where its files overlap), in chunks. Safe to call
        for several splits at once (threads): nothing per split is kept on the reader."""
        vectors = (
            read_vectors(self.table, dict(split.deletion_files)) if split.deletion_files else {})
        if (split.raw_with_vectors and self.is_pk and not split.is_changelog
                and all(f.delete_row_count == 0 for f in split.files)):
            yield from self._read_raw(split, vectors)
            return
        if not self.is_pk:
            yield from self._read_raw(split, vectors)
            return
        key_cols = [KEY_PREFIX + k.name for k in self.key_fields]
        cols = key_cols + [SEQUENCE_NUMBER, VALUE_KIND] + self.file_value_names
        if split.is_changelog:
            for f in split.files:
                t = self._read_file(split, f, cols, vectors)
                kinds = pc.take(pa.array(ROW_KINDS), t.column(VALUE_KIND))
                yield self._finish(t, kinds)
            return
        key_types = [k.type for k in self.key_fields]
        for bounded in key_sections(split.files, key_types):
            section = [b.file for b in bounded]
            if len(section) == 1:
                f = section[0]
                # a compacted file with no retractions: plain columns only (level 0 files are not
                # trusted: pypaimon 2.1 records 0 deletes for files that hold -D rows)
                if f.level > 0 and f.delete_row_count == 0:
                    yield self._finish(self._read_file(split, f, self.read_names, vectors))
                    continue
                yield self._finish(_live(self._read_file(split, f, cols, vectors)))
                continue
            # run order breaks equal sequence numbers Paimon's way (merge/order.py)
            first_row = self.merge_spec.engine is MergeEngine.FIRST_ROW
            ordered = merge_order(section, first_row)
            sequenced = self._sequence_is_run_order(ordered)
            # run order stands in for the sequence numbers: they are not decoded
            wanted = [c for c in cols if c != SEQUENCE_NUMBER] if sequenced else cols

            def read(f: DataFileMeta, wanted: list[str] = wanted) -> pa.Table:
                return self._read_file(split, f, wanted, vectors)

            tables = list(ordered_map(read, ordered))
            runs = []
            # one integer key: its ranges as plain ints
            ranges = ([(lo[0], hi[0]) for lo, hi in shared_ranges(bounded)]
                      if self._integer_key else [])
            bounds = {b.file.file_name: b for b in bounded}
            for f, t in zip(ordered, tables):
                parts = (solo_and_shared(t, key_cols[0], ranges)
                         if ranges and solo_share(bounds[f.file_name], ranges) >= MIN_SOLO_SHARE
                         else None)
                if parts is None:
                    runs.append([t])
                    continue
                solo, shared = parts  # a solo key's one record: no merge, as one file's
                if solo.num_rows:
                    yield self._finish(_live(solo).select(self.read_names))
                if shared.num_rows:
                    runs.append([shared])
            # a batch read needs every live row once, not key order
            for chunk in merge_runs(runs, self.merge_spec, drop_retracts=True,
                                    columns=self.read_names, ordered=False,
                                    sequenced=sequenced):
                yield self._finish(chunk)

    def _sequence_is_run_order(self, ordered: Sequence[DataFileMeta]) -> bool:
        """Whether the runs' sequence ranges follow each other strictly (level-0 files of
        successive commits, say): every record of a later run is then newer than every record
        of an earlier one, so a deduplicate merge (no sequence fields) can order a key's
        records by run, and within a run by row (a file is sorted by key, then sequence),
        without decoding the ``_SEQUENCE_NUMBER`` column (``merge_runs``' ``sequenced``)."""
        spec = self.merge_spec
        if spec.engine is not MergeEngine.DEDUPLICATE or spec.sequence_fields:
            return False
        return all(a.max_sequence_number < b.min_sequence_number
                   for a, b in zip(ordered, ordered[1:]))

    def _read_raw(self, split: Split, vectors: Mapping[str, np.ndarray]) -> Iterator[pa.Table]:
        """A deletion-vector split: every file (levels >= 1, no retractions) read as it is
        with its vector applied, no merge (Paimon's raw-convertible split). A split with a
        retraction left at a level >= 1 is merged on read instead, as pypaimon does. (An
        append split is read the same way.) The files are read side by side, a few ahead of
        the caller, and come back in order."""
        def read(f: DataFileMeta) -> pa.Table:
            return self._finish(self._read_file(split, f, self.read_names, vectors))

        yield from ordered_map(read, split.files)

    def _finish(self, t: pa.Table, kinds: pa.Array | None = None) -> pa.Table:
        names = list(self.names)
        if kinds is not None:
            t = t.append_column(ROW_KIND_COLUMN, kinds)
            names.append(ROW_KIND_COLUMN)
        if self.predicate is not None:
            t = t.filter(self.predicate.to_expression())
        return t.select(names)


def _live(t: pa.Table) -> pa.Table:
    """``t`` without its retractions (-U, -D rows); as it is when it holds none."""
    kinds = t.column(VALUE_KIND)
    live = pc.is_in(kinds, _LIVE_KINDS)
    return t if pc.all(live).as_py() in (True, None) else t.filter(live)
