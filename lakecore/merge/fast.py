"""Sort-and-merge in one step, touching only the key, sequence and kind columns.

For the deduplicate engine the merge is a row *selection* (the last record of each key), so
there is no need to reorder every value column twice (sort, then pick): we sort a permutation
on the key and sequence columns, find each key's last record on the sorted keys alone, and
take the chosen rows from the input once. Other engines fold values and go through
``sort_kv`` + ``merge_sorted``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakecore.format.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import as_numpy_key, group_starts, packed_sort, sort_kv, sort_permutation
from lakecore.merge.spec import MergeSpec
from lakecore.options import MergeEngine


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
            out = out if live.all() else out.filter(pa.array(live))
        return out
    if not ordered:
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
    key = as_numpy_key(table.column(spec.key_columns[0]))
    return key is not None and bool(np.all(key[1:] > key[:-1]))


def _chosen(table: pa.Table, latest: np.ndarray, columns: list[str] | None,
            drop_retracts: bool) -> pa.Table:
    """The rows ``latest`` (each key's newest) in table order, retractions dropped if asked."""
    if drop_retracts:
        kinds = as_numpy_key(table.column(VALUE_KIND))
        assert kinds is not None  # _VALUE_KIND is a NOT NULL tinyint
        latest = latest[_live(kinds[latest])]
    return _rows(table, latest, columns, ordered=False, in_order=False)


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
        return source.filter(pa.array(mask))
    return source.take(pa.array(chosen))


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
    if not sequenced:
        seq = as_numpy_key(table.column(SEQUENCE_NUMBER))
        if seq is None or np.any(seq[1:] < seq[:-1]):
            return None
    packed = packed_sort([key])
    if packed is None:
        return None
    order, keys = packed
    last = np.flatnonzero(keys[1:] != keys[:-1])
    return order[np.append(last, len(order) - 1)]
