"""Changelog from compaction: ``lookup`` and ``full-compaction`` producers.

Both are a diff of two keyed states of one bucket. ``lookup``: for the keys of the level-0
files a compaction lifts, the state before = the merge of levels >= 1, after = the merge of
every level. ``full-compaction``: before = the max level before a full compaction, after = its
output. Keys only before -> -D; only after -> +I; in both -> -U (before) and +U (after),
skipped when equal under ``changelog-producer.row-deduplicate``. A first-row table only ever
gives +I, for keys no level >= 1 holds (Paimon's ``FirstRowMergeFunctionWrapper``). Both states
merge their files in ``merge/order.py``'s order, so equal sequence numbers have the winner that
reads and compaction give them. Columnar throughout: merged
reads, a hash join on the key columns, vectorized masks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.compact.lookup import apply_vector
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io.data_file_reader import read_data_file
from lakecore.io.data_file_writer import RollingFileWriter
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.merge.order import merge_order
from lakecore.merge.runs import merge_runs
from lakecore.options import MergeEngine
from lakecore.store.file_store import FileStore

_ROW = "__lakecore_row"


class ChangelogMaker:
    """Produces the changelog files of a compaction (lookup and full-compaction producers)."""

    def __init__(self, table: FileStore, partition: Sequence[Any], bucket: int,
                 vectors: Mapping[str, np.ndarray] | None = None) -> None:
        self.table, self.partition, self.bucket = table, tuple(partition), bucket
        self.vectors = vectors or {}  # deletion vectors: rows already superseded
        s = table.schema
        self.key_cols = [KEY_PREFIX + k for k in s.trimmed_primary_keys]
        self.value_cols = s.row_type.names
        self.columns = self.key_cols + [SEQUENCE_NUMBER, VALUE_KIND] + self.value_cols
        self.spec = merge_spec_for(table)
        self.file_spec = file_writer_spec(table)
        self.dedupe = table.options.changelog_producer_row_deduplicate
        self.first_row = self.spec.engine is MergeEngine.FIRST_ROW

    def state(self, files: Sequence[DataFileMeta], keys: pa.Table | None = None) -> pa.Table:
        """The merged live rows (KV layout) of ``files``, optionally only for ``keys``."""
        schema = self.file_spec.file_schema
        if not files:
            return schema.empty_table()
        runs = []
        for f in merge_order(files, self.first_row):  # equal sequence numbers: Paimon's winner
            t = read_data_file(self.table, self.partition, self.bucket, f, self.columns)
            t = apply_vector(t, self.vectors.get(f.file_name))
            if keys is not None:
                t = _semi_join(t, keys, self.key_cols)
            runs.append([t])
        parts = list(merge_runs(runs, self.spec, drop_retracts=True))
        return pa.concat_tables(parts).cast(schema) if parts else schema.empty_table()

    def keys_of(self, files: Sequence[DataFileMeta]) -> pa.Table:
        tables = [read_data_file(self.table, self.partition, self.bucket, f, self.key_cols)
                  for f in files]
        return pa.concat_tables(tables).group_by(self.key_cols).aggregate([])

    def diff(self, before: pa.Table, after: pa.Table) -> pa.Table:
        """-D / +I / -U +U records turning ``before`` into ``after`` (KV layout, key order)."""
        b = before.append_column(_ROW, pa.array(np.arange(before.num_rows), pa.int64()))
        a = after.append_column(_ROW, pa.array(np.arange(after.num_rows), pa.int64()))
        j = b.select(self.key_cols + [_ROW]).join(
            a.select(self.key_cols + [_ROW]), keys=self.key_cols, join_type="full outer",
            left_suffix="_b", right_suffix="_a", coalesce_keys=True,
        )
        bi, ai = j[_ROW + "_b"], j[_ROW + "_a"]
        both = pc.and_(pc.is_valid(bi), pc.is_valid(ai))
        only_b = pc.and_(pc.is_valid(bi), pc.is_null(ai))
        only_a = pc.and_(pc.is_null(bi), pc.is_valid(ai))
        if self.first_row:
            # Paimon's FirstRowMergeFunctionWrapper: a key already held by a level >= 1 keeps
            # its first row, so nothing changed; only a key new to the table gives +I
            pairs = j.slice(0, 0)
            only_b = pa.array(np.zeros(j.num_rows, dtype=bool))
        elif self.dedupe:
            pairs = j.filter(both)
            same = self._equal_rows(before.take(pairs[_ROW + "_b"]), after.take(pairs[_ROW + "_a"]))
            pairs = pairs.filter(pc.invert(same))
        else:
            pairs = j.filter(both)
        parts = [
            _with_kind(before.take(j.filter(only_b)[_ROW + "_b"]), RowKind.DELETE),
            _with_kind(before.take(pairs[_ROW + "_b"]), RowKind.UPDATE_BEFORE),
            _with_kind(after.take(pairs[_ROW + "_a"]), RowKind.UPDATE_AFTER),
            _with_kind(after.take(j.filter(only_a)[_ROW + "_a"]), RowKind.INSERT),
        ]
        out = pa.concat_tables(parts)
        # key order; -U before +U for the same key (kind 1 < 2), -D and +I are alone
        order = pc.sort_indices(out, sort_keys=[(k, "ascending") for k in self.key_cols]
                                + [(VALUE_KIND, "ascending")])
        return out.take(order)

    def _equal_rows(self, x: pa.Table, y: pa.Table) -> pa.Array:
        eq = pa.array(np.ones(x.num_rows, dtype=bool))
        for c in self.value_cols:
            cx, cy = x.column(c), y.column(c)
            same = pc.equal(cx, cy)
            both_null = pc.and_(pc.is_null(cx), pc.is_null(cy))
            eq = pc.and_(eq, pc.or_(pc.fill_null(same, False), both_null))
        return eq

    def write(self, records: pa.Table, level: int) -> tuple[DataFileMeta, ...]:
        if records.num_rows == 0:
            return ()
        w = RollingFileWriter(self.table.file_io, self.table.paths, self.partition, self.bucket,
                              self.file_spec, level=level, file_source=FileSource.COMPACT,
                              changelog=True)
        try:
            w.write(records.select(self.file_spec.file_schema.names))
            return tuple(w.close())
        except BaseException:
            w.abort()
            raise


def _semi_join(t: pa.Table, keys: pa.Table, key_cols: list[str]) -> pa.Table:
    if len(key_cols) == 1:
        return t.filter(pc.is_in(t.column(key_cols[0]), value_set=keys.column(key_cols[0])))
    marked = t.append_column(_ROW, pa.array(np.arange(t.num_rows), pa.int64()))
    hit = marked.select(key_cols + [_ROW]).join(keys, keys=key_cols, join_type="left semi")
    idx = pc.sort_indices(hit[_ROW])
    return t.take(pc.take(hit[_ROW], idx))


def _with_kind(t: pa.Table, kind: RowKind) -> pa.Table:
    i = t.schema.get_field_index(VALUE_KIND)
    return t.set_column(i, t.schema.field(i), pa.array(np.full(t.num_rows, int(kind), np.int8)))
