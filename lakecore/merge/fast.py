"""Sort-and-merge in one step, touching only the key, sequence and kind columns.

For the deduplicate engine the merge is a row *selection* (the last record of each key), so
there is no need to reorder every value column twice (sort, then pick): we sort a permutation
on the key and sequence columns, find each key's last record on the sorted keys alone, and
take the chosen rows from the input once. A read that does not need key order, of sorted runs
of a dense integer key, sorts nothing: a table of the key's values seen marks each row that
a later row of its key supersedes (``_latest_mask``). Other engines fold values and go
through ``sort_kv`` + ``merge_sorted``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakecore.format.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import (
    as_numpy_key,
    group_starts,
    integer_key,
    offset_from,
    packed_sort,
    sort_kv,
    sort_permutation,
)
from lakecore.merge.spec import MergeSpec
from lakecore.options import MergeEngine
from lakecore.utils.arrow import bool_array


def with_row_sequence(table: pa.Table) -> pa.Table:
    """``table`` with row positions as its ``_SEQUENCE_NUMBER``: right where each key's rows
    come in sequence order (runs in sequence order, each sorted by key, then sequence)."""
    if SEQUENCE_NUMBER in table.column_names:
        return table
    field = pa.field(SEQUENCE_NUMBER, pa.int64(), False)
    return table.append_column(field, pa.array(np.arange(table.num_rows, dtype=np.int64)))


def sort_and_merge(table: pa.Table, spec: MergeSpec, *, drop_retracts: bool,
                   columns: list[str] | None = None, ordered: bool = True,
                   sequenced: bool = False) -> pa.Table:
    """``merge_sorted(sort_kv(table))``, cheaper for deduplicate tables. ``columns``: only
    these columns are needed in the result (a reader drops the KV system columns).
    ``ordered=False``: the surviving rows may come in input order instead of key order (a
    batch read does not need key order), which turns the gather into a cheap filter.
    ``sequenced``: the rows come in sequence order and have no ``_SEQUENCE_NUMBER`` column
    (a read of runs whose sequence ranges follow each other); the row order stands in."""
    if spec.engine is not MergeEngine.DEDUPLICATE or spec.ignore_delete or table.num_rows <= 1:
        table = with_row_sequence(table) if sequenced else table
        out = merge_sorted(sort_kv(table, spec), spec, drop_retracts=drop_retracts)
        return out if columns is None else out.select(columns)
    if _keys_ascend(table, spec):  # every key once, in order: the merge keeps every row
        out = table if columns is None else table.select(columns)
        if drop_retracts:
            kinds = as_numpy_key(table.column(VALUE_KIND))
            assert kinds is not None  # _VALUE_KIND is a NOT NULL tinyint
            live = _live(kinds)
            out = out if live.all() else out.filter(bool_array(live))
        return out
    if not ordered:
        keep = _latest_mask(table, spec, sequenced=sequenced)
        if keep is not None:
            return _kept(table, keep, columns, drop_retracts)
        latest = _latest_rows(table, spec, sequenced=sequenced)
        if latest is not None:
            return _chosen(table, latest, columns, drop_retracts)
    table = with_row_sequence(table) if sequenced else table
    perm = sort_permutation(table, spec)
    order = np.arange(table.num_rows) if perm is None else np.asarray(perm)
    narrow = table.select([*spec.key_columns, VALUE_KIND])
    if perm is not None:
        narrow = narrow.take(pa.array(order))
    starts = group_starts(narrow, spec)
    last = np.append(starts[1:], narrow.num_rows) - 1
    chosen = order[last]
    if drop_retracts:
        chosen = chosen[_live(narrow.column(VALUE_KIND).to_numpy()[last])]
    return _rows(table, chosen, columns, ordered=ordered, in_order=perm is None)


def _keys_ascend(table: pa.Table, spec: MergeSpec) -> bool:
    """Whether a single null-free integer-like key strictly ascends (a flushed buffer of
    distinct keys that routing sorted, say): then no key repeats and the rows are in key
    order. One comparison of adjacent keys."""
    if len(spec.key_columns) != 1:
        return False
    column = table.column(spec.key_columns[0])
    ends = [integer_key(c) for c in column.chunks if len(c)]
    if any(e is None for e in ends) or any(  # runs of a read: one comparison a chunk says no
            a[-1] >= b[0] for a, b in zip(ends, ends[1:])):  # type: ignore[index]
        return False
    key = as_numpy_key(column)
    return key is not None and bool(np.all(key[1:] > key[:-1]))


def _chosen(table: pa.Table, latest: np.ndarray, columns: list[str] | None,
            drop_retracts: bool) -> pa.Table:
    """The rows ``latest`` (each key's newest) in table order, retractions dropped if asked."""
    if drop_retracts:
        kinds = as_numpy_key(table.column(VALUE_KIND))
        assert kinds is not None  # _VALUE_KIND is a NOT NULL tinyint
        latest = latest[_live(kinds[latest])]
    return _rows(table, latest, columns, ordered=False, in_order=False)


def _kept(table: pa.Table, keep: np.ndarray, columns: list[str] | None,
          drop_retracts: bool) -> pa.Table:
    """The rows ``keep`` marks, in table order, retractions dropped if asked."""
    if drop_retracts:
        kinds = as_numpy_key(table.column(VALUE_KIND))
        assert kinds is not None  # _VALUE_KIND is a NOT NULL tinyint
        keep &= _live(kinds)
    source = table if columns is None else table.select(columns)
    if keep.all():
        return source
    # chunk by chunk: a chunk that keeps every row (the newest run's, say) is not copied
    batches, first = [], 0
    for batch in source.to_batches():
        mine = keep[first:first + batch.num_rows]
        first += batch.num_rows
        if mine.all():
            batches.append(batch)
        elif mine.any():
            batches.append(batch.filter(pa.array(mine)))
    return pa.Table.from_batches(batches, schema=source.schema)


def _live(kinds: np.ndarray) -> np.ndarray:
    """Which of ``kinds`` are not retractions (-U, -D)."""
    return (kinds != RowKind.UPDATE_BEFORE) & (kinds != RowKind.DELETE)


def _rows(table: pa.Table, chosen: np.ndarray, columns: list[str] | None, *, ordered: bool,
          in_order: bool) -> pa.Table:
    """Rows ``chosen`` of ``table`` (only ``columns``): in ``chosen``'s order, or with
    ``ordered=False`` in table order (a filter, cheaper than a gather). ``in_order``: ``chosen``
    is ascending, so choosing every row is the table itself."""
    source = table if columns is None else table.select(columns)
    if len(chosen) == table.num_rows and (in_order or not ordered):
        return source
    if not ordered:
        mask = np.zeros(table.num_rows, dtype=bool)
        mask[chosen] = True
        return source.filter(bool_array(mask))
    return source.take(pa.array(chosen))


def _in_sequence_order(table: pa.Table, sequenced: bool) -> bool:
    """Whether the rows come in sequence order: ``sequenced`` (row order stands in for it),
    or a ``_SEQUENCE_NUMBER`` column that never goes back."""
    if sequenced:
        return True
    seq = as_numpy_key(table.column(SEQUENCE_NUMBER))
    return seq is not None and not np.any(seq[1:] < seq[:-1])


def _latest_rows(table: pa.Table, spec: MergeSpec, *, sequenced: bool = False
                 ) -> np.ndarray | None:
    """The row of each key that a deduplicate merge keeps (in key order), for one
    null-free integer-like key whose rows are in sequence order (``sequenced``, or
    ``_SEQUENCE_NUMBER`` non-decreasing): the last row of each key in row order. One packed
    sort of (key, row); nothing else is gathered. None when the shape does not apply."""
    if len(spec.key_columns) != 1 or spec.sequence_fields:
        return None
    key = as_numpy_key(table.column(spec.key_columns[0]))
    if key is None:
        return None
    if not _in_sequence_order(table, sequenced):
        return None
    packed = packed_sort([key])
    if packed is None:
        return None
    order, keys = packed
    last = np.flatnonzero(keys[1:] != keys[:-1])
    return order[np.append(last, len(order) - 1)]


# A key spanning up to this many values per row (and up to DENSE_MIN_SPAN values at any row
# count) is deduplicated through a table of the values seen, one byte per value (measured, 75k
# rows in 11 sorted runs: 0.20-0.25 ms at 2-32 values a row, against 0.65 ms for the radix
# sort of _latest_rows)
DENSE_SPAN_PER_ROW = 32
DENSE_MIN_SPAN = 1 << 16


def _latest_mask(table: pa.Table, spec: MergeSpec, *, sequenced: bool = False
                 ) -> np.ndarray | None:
    """Which rows a deduplicate merge keeps, in row order, sorting nothing: for one null-free
    integer-like key of a span of at most ``DENSE_SPAN_PER_ROW`` values a row, whose rows are
    in sequence order (as ``_latest_rows``) and whose chunks each ascend (the runs of a read:
    a run is sorted by key). A key's last row in row order is kept: going back from the last
    chunk, a row is dropped when a later chunk has its key (a table of the values seen) or
    the next row of its own chunk does. None when the shape does not apply."""
    if len(spec.key_columns) != 1 or spec.sequence_fields:
        return None
    chunks = [integer_key(c) for c in table.column(spec.key_columns[0]).chunks if len(c)]
    if not chunks or any(c is None for c in chunks):
        return None
    keys: list[np.ndarray] = chunks  # type: ignore[assignment]
    if not _in_sequence_order(table, sequenced):
        return None
    if any(np.any(k[1:] < k[:-1]) for k in keys):
        return None
    lo, hi = min(int(k[0]) for k in keys), max(int(k[-1]) for k in keys)
    n = table.num_rows
    if hi - lo >= max(DENSE_SPAN_PER_ROW * n, DENSE_MIN_SPAN):
        return None
    seen = np.zeros(hi - lo + 1, dtype=bool)
    keep = np.empty(n, dtype=bool)
    end = n
    for k in reversed(keys):
        at = offset_from(k, lo).view(np.int64)  # the span fits: no wrap
        mine = keep[end - len(k):end]
        np.logical_not(seen[at], out=mine)
        mine[:-1] &= at[1:] != at[:-1]  # a later row of the chunk has the same key
        seen[at] = True
        end -= len(k)
    return keep
