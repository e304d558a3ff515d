"""Small columnar helpers shared by the writer and the reader."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.utils.threads import in_bucket_task, in_side_task, side_pool


def group_by_columns(
    table: pa.Table, names: Sequence[str]
) -> list[tuple[tuple, pa.Table]]:
    """Split ``table`` into (values, rows) groups of equal ``names``, in the order of
    ``group_codes`` (values ascending, nulls first); rows keep their order within a group.
    One stable sort of the group codes and one gather, no per-row loop."""
    if not names:
        return [((), table)]
    codes, values = group_codes(table, names)
    if len(values) <= 1:  # one group (or no rows): no sort, no copy of the rows
        return [(values[0], table)] if values else []
    order = np.argsort(codes, kind="stable")
    table = table.take(pa.array(order))
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(values)))])
    return [(v, table.slice(int(bounds[g]), int(bounds[g + 1] - bounds[g])))
            for g, v in enumerate(values)]


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
