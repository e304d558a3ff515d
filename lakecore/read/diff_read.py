"""Reading an incremental diff split (``incremental-between-scan-mode = diff``, or two tags).

As Paimon's ``IncrementalDiffSplitRead``: the split's two sides — the end snapshot's files the
start does not hold (``files``) and the start's files the end does not hold
(``before_files``), files both hold left out of both — are merged each on its own, by the
table's merge engine, and compared key by key:

* a key only the end side has: its merged row, with the kind of the record that won;
* a key both sides have: the end's row when its value (every column) or its being an insert
  or update (``+I``/``+U``) against a retraction (``-U``/``-D``) differs, else nothing;
* a key only the start side has: nothing, or with ``keep_delete`` (Paimon's
  ``forceKeepDelete``, what its ``audit_log`` table reads with) the start's row as ``-D``.

Without ``keep_delete`` both sides are merged as a batch read merges (retractions dropped),
so no ``-D`` row comes out: a diff shows the keys added or changed, not the keys deleted.
With it the merged retractions stay (a key whose last record is a ``-D`` not yet compacted
away is a ``-D`` row) and come out where they differ.

Since shared files are left out, the sides are merges of the files that differ, not of the
two snapshots' whole states: a key whose only new record is in a new file (an upsert on top
of a compacted file) shows that record merged alone — for partial-update and aggregation the
new record, not the merged value; a re-upsert of an unchanged value shows as a change. This
is Paimon's behaviour, kept here.

An append table's diff split is its new files (with the end snapshot's deletion vectors),
every row ``+I``: Paimon's raw reader ignores the start side.

Each side of a bucket is merged in memory (its files read whole), as a merged read's section
of overlapping files is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.kv import KEY_PREFIX, ROW_KINDS, SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.format.manifest import DataFileMeta
from lakecore.merge.order import merge_order
from lakecore.merge.runs import merge_runs
from lakecore.options import MergeEngine
from lakecore.read.deletion_vectors import read_vectors
from lakecore.read.predicate import Predicate
from lakecore.read.scan import DeletionFiles, Split
from lakecore.read.split_read import ROW_KIND_COLUMN, SplitRead
from lakecore.store.file_store import FileStore
from lakecore.utils.threads import ordered_map

_ADD_KINDS = pa.array([RowKind.INSERT.value, RowKind.UPDATE_AFTER.value], pa.int8())
_INSERT = RowKind.INSERT.short_string
_DELETE = RowKind.DELETE.short_string


class DiffRead:
    """Reads diff splits into the read's columns plus ``_ROW_KIND``."""

    def __init__(self, table: FileStore, projection: list[str] | None,
                 predicate: Predicate | None, keep_delete: bool = False) -> None:
        self.table = table
        self.names = list(projection or table.schema.row_type.names)
        self.predicate = predicate
        self.keep_delete = keep_delete
        # every column: rows are compared whole (and filtered after the comparison)
        self._files = SplitRead(table, None, None)
        self._values = list(table.schema.row_type.names)

    def read_split(self, split: Split) -> Iterator[pa.Table]:
        r = self._files
        if not r.is_pk:
            yield from self._read_append(split)
            return
        keys = [KEY_PREFIX + k.name for k in r.key_fields]
        before = self._merged(split, split.before_files, split.before_deletion_files, keys)
        after = self._merged(split, split.files, split.deletion_files, keys)
        out = self._diff(before, after, keys)
        if out.num_rows:
            yield self._finish(out)

    # -- append tables ---------------------------------------------------------------------
    def _read_append(self, split: Split) -> Iterator[pa.Table]:
        vectors = read_vectors(self.table, dict(split.deletion_files)) if (
            split.deletion_files) else {}

        def read(f: DataFileMeta) -> pa.Table:
            return self._files._read_file(split, f, self._values, vectors)

        for t in ordered_map(read, split.files):
            if t.num_rows:
                kinds = pa.array([_INSERT] * t.num_rows, pa.string())
                yield self._finish(t.append_column(ROW_KIND_COLUMN, kinds))

    # -- primary-key tables ----------------------------------------------------------------
    def _merged(self, split: Split, files: Sequence[DataFileMeta], dfs: DeletionFiles,
                keys: list[str]) -> pa.Table | None:
        """One side's files merged: one row per key (key columns, ``_VALUE_KIND`` of the
        record that won, every column), in key order; None without files."""
        if not files:
            return None
        r = self._files
        vectors = read_vectors(self.table, dict(dfs)) if dfs else {}
        cols = keys + [SEQUENCE_NUMBER, VALUE_KIND] + r.file_value_names
        ordered = merge_order(files, r.merge_spec.engine is MergeEngine.FIRST_ROW)

        def read(f: DataFileMeta) -> pa.Table:
            return r._read_file(split, f, cols, vectors)

        runs = [[t] for t in ordered_map(read, ordered)]
        chunks = list(merge_runs(runs, r.merge_spec, drop_retracts=not self.keep_delete))
        if not chunks:
            return None
        return pa.concat_tables(chunks).select(keys + [VALUE_KIND] + self._values)

    def _diff(self, before: pa.Table | None, after: pa.Table | None, keys: list[str]
              ) -> pa.Table:
        """The rows the diff shows: key columns, every column and ``_ROW_KIND``."""
        n_after = 0 if after is None else after.num_rows
        n_before = 0 if before is None else before.num_rows
        if n_after and n_before:
            assert after is not None and before is not None
            a_idx, b_idx, only_after, only_before = _match(after, before, keys)
            same = _rows_equal(after, before, a_idx, b_idx, self._values)
            changed = np.sort(np.concatenate([only_after, a_idx[~same]]))
        else:
            changed, only_before = np.arange(n_after), np.arange(n_before)
        parts: list[pa.Table] = []
        if len(changed):
            assert after is not None
            rows = after.take(pa.array(changed, pa.int64()))
            if not self.keep_delete:  # (a merge without retractions has none anyway)
                rows = rows.filter(pc.is_in(rows.column(VALUE_KIND), _ADD_KINDS))
            parts.append(_with_kinds(rows))
        if self.keep_delete and len(only_before):
            assert before is not None
            rows = before.take(pa.array(only_before, pa.int64()))
            rows = rows.filter(pc.is_in(rows.column(VALUE_KIND), _ADD_KINDS))
            kinds = pa.array([_DELETE] * rows.num_rows, pa.string())
            gone = rows.drop_columns([VALUE_KIND]).append_column(ROW_KIND_COLUMN, kinds)
            parts.append(gone if not parts else gone.cast(parts[0].schema))
        if not parts:
            return pa.table({})
        if len(parts) == 1:
            return parts[0]
        out = pa.concat_tables(parts)  # in key order, as Paimon's merge of the two sides
        return out.take(pc.sort_indices(out, sort_keys=[(k, "ascending") for k in keys]))

    def _finish(self, t: pa.Table) -> pa.Table:
        if self.predicate is not None:
            t = t.filter(self.predicate.to_expression())
        return t.select(self.names + [ROW_KIND_COLUMN])


def _with_kinds(rows: pa.Table) -> pa.Table:
    kinds = pc.take(pa.array(ROW_KINDS), rows.column(VALUE_KIND))
    return rows.drop_columns([VALUE_KIND]).append_column(ROW_KIND_COLUMN, kinds)


def _match(after: pa.Table, before: pa.Table, keys: list[str]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the same key on both sides as (after positions, before positions), then the
    positions only ``after`` has and those only ``before`` has."""
    a = after.select(keys).append_column("__a", pa.array(np.arange(after.num_rows)))
    b = before.select(keys).append_column("__b", pa.array(np.arange(before.num_rows)))
    try:
        joined = a.join(b, keys=keys, join_type="inner")
        a_idx = joined.column("__a").to_numpy()
        b_idx = joined.column("__b").to_numpy()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        # key types the hash join does not take: match in Python
        index = {k: i for i, k in enumerate(_key_tuples(before, keys))}
        pairs = [(i, index[k]) for i, k in enumerate(_key_tuples(after, keys)) if k in index]
        a_idx = np.array([p[0] for p in pairs], np.int64)
        b_idx = np.array([p[1] for p in pairs], np.int64)
    order = np.argsort(a_idx, kind="stable")
    a_idx, b_idx = a_idx[order].astype(np.int64), b_idx[order].astype(np.int64)
    only_after = np.setdiff1d(np.arange(after.num_rows), a_idx, assume_unique=True)
    only_before = np.setdiff1d(np.arange(before.num_rows), b_idx, assume_unique=True)
    return a_idx, b_idx, only_after, only_before


def _key_tuples(t: pa.Table, keys: list[str]) -> list[tuple[Any, ...]]:
    return list(zip(*(t.column(k).to_pylist() for k in keys), strict=True))


def _rows_equal(after: pa.Table, before: pa.Table, a_idx: np.ndarray, b_idx: np.ndarray,
                columns: list[str]) -> np.ndarray:
    """Per matched pair: the same value in every column (nulls equal) and the same side of
    insert/update against retraction (Paimon compares the value rows and ``isAdd``)."""
    ai, bi = pa.array(a_idx, pa.int64()), pa.array(b_idx, pa.int64())
    same = np.ones(len(a_idx), dtype=bool)
    a_add = pc.is_in(after.column(VALUE_KIND).take(ai), _ADD_KINDS).to_numpy(zero_copy_only=False)
    b_add = pc.is_in(before.column(VALUE_KIND).take(bi), _ADD_KINDS).to_numpy(zero_copy_only=False)
    same &= a_add == b_add
    for c in columns:
        if not same.any():
            break
        same &= _column_equal(after.column(c).take(ai), before.column(c).take(bi))
    return same


def _column_equal(x: pa.ChunkedArray, y: pa.ChunkedArray) -> np.ndarray:
    t = x.type
    plain = (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
             or pa.types.is_binary(t) or pa.types.is_large_binary(t)
             or pa.types.is_fixed_size_binary(t) or pa.types.is_boolean(t)
             or pa.types.is_decimal(t) or pa.types.is_temporal(t))
    if plain and x.type == y.type:
        eq = pc.fill_null(pc.equal(x, y), False)
        both_null = pc.and_(pc.is_null(x), pc.is_null(y))
        return pc.or_(eq, both_null).to_numpy(zero_copy_only=False)
    # floats (NaN equals NaN, as Paimon compares bytes) and nested types: value by value
    return np.array([_same(p, q) for p, q in zip(x.to_pylist(), y.to_pylist(), strict=True)],
                    dtype=bool)


def _same(p: Any, q: Any) -> bool:
    if isinstance(p, float) and isinstance(q, float) and p != p and q != q:
        return True
    return bool(p == q)
