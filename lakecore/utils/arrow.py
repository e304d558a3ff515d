"""Small columnar helpers shared by the writer and the reader."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.utils.threads import in_bucket_task, in_side_task, side_pool


def run_starts(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Indices where the tuple of ``columns`` changes (input sorted by them); starts with 0."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n - 1, dtype=bool)
    for col in columns:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        a, b = col.slice(0, n - 1), col.slice(1)
        ne = pc.not_equal(a, b)
        # null != value counts as a change; null == null does not
        na, nb = pc.is_null(a), pc.is_null(b)
        ne = pc.if_else(pc.or_(na, nb), pc.not_equal(na, nb), ne)
        change |= ne.to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.nonzero(change)[0] + 1]).astype(np.int64)


def group_by_columns(
    table: pa.Table, names: Sequence[str]
) -> list[tuple[tuple, pa.Table]]:
    """Split ``table`` into (values, rows) groups of equal ``names`` (one sort, no per-row loop)."""
    if not names:
        return [((), table)]
    if table.num_rows == 0:
        return []
    if all(pc.count_distinct(table.column(n), mode="all").as_py() == 1 for n in names):
        # one group (an unpartitioned table, one bucket): no sort, no copy of the rows
        return [(tuple(table.column(n)[0].as_py() for n in names), table)]
    order = pc.sort_indices(table, sort_keys=[(n, "ascending", "at_start") for n in names])
    table = table.take(order)
    starts = run_starts([table.column(n) for n in names])
    bounds = list(starts) + [table.num_rows]
    out = []
    for s, e in zip(bounds[:-1], bounds[1:]):
        part = table.slice(int(s), int(e - s))
        values = tuple(part.column(n)[0].as_py() for n in names)
        out.append((values, part))
    return out


# Below this many rows a gather stays on the caller's thread (a hand-off costs more).
PARALLEL_GATHER_ROWS = 32 * 1024


def gather(table: pa.Table, indices: pa.Array) -> pa.Table:
    """``table.take(indices)``, its columns gathered side by side on the side threads (a
    gather releases the GIL) when the table is large and the caller is not one of several
    bucket tasks already keeping the cores busy (nor a side task: it would wait on its own
    pool)."""
    if (table.num_columns < 2 or len(indices) < PARALLEL_GATHER_ROWS or in_bucket_task()
            or in_side_task()):
        return table.take(indices)
    futures = [side_pool().submit(pc.take, column, indices) for column in table.columns]
    return pa.Table.from_arrays([f.result() for f in futures], schema=table.schema)


def group_codes(table: pa.Table, names: Sequence[str]) -> tuple[np.ndarray, list[tuple]]:
    """Each row's group of equal ``names`` as a code ``0..G-1``, codes in the order of the
    groups' values (ascending, nulls first, as ``group_by_columns`` orders them), and each
    group's values. One hash of each column (``dictionary_encode``) and a sort of its few
    distinct values, instead of a sort of every row: no rows are moved."""
    n = table.num_rows
    if not names or n == 0:
        return np.zeros(n, dtype=np.int64), ([()] if n else [])
    codes = np.zeros(n, dtype=np.int64)
    groups = 1
    for name in names:
        col = table.column(name)
        encoded = pc.dictionary_encode(
            col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col,
            null_encoding="encode")
        order = pc.array_sort_indices(encoded.dictionary, null_placement="at_start").to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order), dtype=np.int64)
        # every value of the dictionary occurs: ranks are 0..D-1, mixed-radix digits of the code
        codes *= len(order)
        codes += rank[encoded.indices.to_numpy(zero_copy_only=False)]
        groups *= len(order)
        if groups > 4 * n:  # too sparse to count: renumber the groups that occur
            present, inverse = np.unique(codes, return_inverse=True)
            codes, groups = inverse.reshape(-1).astype(np.int64, copy=False), len(present)
    if len(names) > 1 and groups > 1:
        seen = np.zeros(groups, dtype=bool)
        seen[codes] = True
        if not seen.all():
            renumber = np.cumsum(seen) - 1
            codes = renumber[codes]
            groups = int(seen.sum())
    some = np.zeros(groups, dtype=np.int64)
    some[codes] = np.arange(n, dtype=np.int64)  # a row of each group (all hold its values)
    columns = [table.column(name).take(pa.array(some)).to_pylist() for name in names]
    return codes, list(zip(*columns))
