"""Small columnar helpers shared by the writer and the reader."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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
