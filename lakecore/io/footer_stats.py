"""Column statistics of a written Parquet file, read from its footer.

Arrow's Parquet writer computes each column chunk's minimum, maximum and null count while it
encodes (GIL released) and keeps them in the footer; Paimon's Java writer builds a data file's
``SimpleStats`` from those footer statistics too. Reading them back costs a few attribute reads
per column, where measuring the rows again costs a ``min_max`` kernel per column and file.

Two cases have no footer minimum/maximum although the column has values: a binary value longer
than Arrow's statistics size limit (4 KiB), and a float column whose values are all NaN. Those
columns come back as ``unknown``; the writer measures them from the written file.

A float column's footer minimum of zero is ``-0.0`` and its maximum ``+0.0`` (the Parquet rule
parquet-mr follows as well); both compare equal to either zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.io.stats_collector import ChunkStats


@dataclass(frozen=True)
class FooterStats:
    """The file's statistics per column (over all its row groups), and the columns that have
    values but no footer minimum/maximum (their ``mins``/``maxs`` are None here)."""

    stats: ChunkStats
    unknown: tuple[str, ...]


def leaf_columns(schema: pa.Schema) -> dict[str, int]:
    """Each top-level field's first Parquet leaf column index (a nested field spans several
    leaves; the footer lists column chunks by leaf)."""
    out: dict[str, int] = {}
    index = 0
    for f in schema:
        out[f.name] = index
        index += _leaves(f.type)
    return out


def _leaves(kind: pa.DataType) -> int:
    if pa.types.is_struct(kind):
        return sum(_leaves(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _leaves(kind.key_type) + _leaves(kind.item_type)
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind)):
        return _leaves(kind.value_type)
    return 1


def footer_stats(metadata: pq.FileMetaData, names: Sequence[str],
                 leaves: Mapping[str, int]) -> FooterStats:
    """Null counts, minimums and maximums of the atomic columns ``names``, folded over the
    file's row groups (``leaves``: ``leaf_columns`` of the file's schema)."""
    n = len(names)
    nulls = [0] * n
    mins: list[Any] = [None] * n
    maxs: list[Any] = [None] * n
    unknown: set[str] = set()
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        rows = group.num_rows
        for i, name in enumerate(names):
            st = group.column(leaves[name]).statistics
            if st is None or not st.has_null_count:
                unknown.add(name)
                continue
            nulls[i] += st.null_count
            if st.null_count >= rows:
                continue  # all null in this row group
            if not st.has_min_max:
                unknown.add(name)
                continue
            lo, hi = st.min, st.max
            if mins[i] is None or lo < mins[i]:
                mins[i] = lo
            if maxs[i] is None or hi > maxs[i]:
                maxs[i] = hi
    for i, name in enumerate(names):
        if name in unknown:
            mins[i] = maxs[i] = None
    return FooterStats(ChunkStats(nulls, mins, maxs),
                       tuple(name for name in names if name in unknown))
