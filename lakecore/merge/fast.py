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

from lakecore.format.kv import VALUE_KIND, RowKind
from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import group_starts, sort_kv, sort_permutation
from lakecore.merge.spec import MergeSpec
from lakecore.options import MergeEngine


def sort_and_merge(table: pa.Table, spec: MergeSpec, *, drop_retracts: bool,
                   columns: list[str] | None = None, ordered: bool = True) -> pa.Table:
    """``merge_sorted(sort_kv(table))``, cheaper for deduplicate tables. ``columns``: only
    these columns are needed in the result (a reader drops the KV system columns).
    ``ordered=False``: the surviving rows may come in input order instead of key order (a
    batch read does not need key order), which turns the gather into a cheap filter."""
    if spec.engine is not MergeEngine.DEDUPLICATE or spec.ignore_delete or table.num_rows <= 1:
        out = merge_sorted(sort_kv(table, spec), spec, drop_retracts=drop_retracts)
        return out if columns is None else out.select(columns)
    perm = sort_permutation(table, spec)
    order = np.arange(table.num_rows) if perm is None else np.asarray(perm)
    narrow = table.select([*spec.key_columns, VALUE_KIND])
    if perm is not None:
        narrow = narrow.take(pa.array(order))
    starts = group_starts(narrow, spec)
    last = np.append(starts[1:], narrow.num_rows) - 1
    chosen = order[last]
    if drop_retracts:
        kinds = narrow.column(VALUE_KIND).to_numpy()[last]
        keep = (kinds != RowKind.UPDATE_BEFORE) & (kinds != RowKind.DELETE)
        chosen = chosen[keep]
    source = table if columns is None else table.select(columns)
    if perm is None and len(chosen) == table.num_rows:
        return source
    if not ordered:
        mask = np.zeros(table.num_rows, dtype=bool)
        mask[chosen] = True
        return source.filter(pa.array(mask))
    return source.take(pa.array(chosen))
