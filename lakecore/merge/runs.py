"""Streaming k-way merge of sorted KV runs in bounded memory, columnar.

Each run yields sorted chunks. We repeatedly take, from every run's current chunk, the rows
whose key is <= the smallest "last key" among the runs' chunks: every record of those keys
is then in hand, so the slice can be sorted and merged on its own. Memory is bounded by one
chunk per run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa

from lakecore.merge.fast import sort_and_merge
from lakecore.merge.functions import merge_sorted
from lakecore.merge.spec import MergeSpec


def _key_at(t: pa.Table, names: list[str], i: int) -> tuple:
    return tuple(t.column(n)[i].as_py() for n in names)


def _count_le(t: pa.Table, names: list[str], bound: tuple) -> int:
    """Number of leading rows of sorted ``t`` whose key <= ``bound`` (binary search)."""
    lo, hi = 0, t.num_rows
    while lo < hi:
        mid = (lo + hi) // 2
        if _key_at(t, names, mid) <= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


class _Run:
    def __init__(self, chunks: Iterable[pa.Table]) -> None:
        self._it = iter(chunks)
        self.buf: pa.Table | None = None
        self.done = False

    def fill(self) -> None:
        while (self.buf is None or self.buf.num_rows == 0) and not self.done:
            try:
                self.buf = next(self._it)
            except StopIteration:
                self.done, self.buf = True, None


def merge_runs(
    runs: Sequence[Iterable[pa.Table]], spec: MergeSpec, *, drop_retracts: bool,
    columns: list[str] | None = None, ordered: bool = True,
) -> Iterator[pa.Table]:
    """Merge sorted runs into sorted, merged chunks (one row per key). ``columns``: only these
    columns of the merged rows are wanted (the rest are read for merging only)."""
    names = list(spec.key_columns)
    states = [_Run(r) for r in runs]
    while True:
        for s in states:
            s.fill()
        live = [s for s in states if s.buf is not None and s.buf.num_rows > 0]
        if not live:
            return
        if len(live) == 1 and all(s.done for s in states if s is not live[0]):
            only = live[0]
            assert only.buf is not None
            merged = merge_sorted(only.buf, spec, drop_retracts=drop_retracts)
            if columns is not None:
                merged = merged.select(columns)
            only.buf = None
            # a single run already has one row per key, but merging also applies drop_retracts
            if merged.num_rows:
                yield merged
            continue
        bound = min(_key_at(s.buf, names, s.buf.num_rows - 1) for s in live)  # type: ignore[union-attr]
        taken = []
        for s in live:
            assert s.buf is not None
            k = _count_le(s.buf, names, bound)
            if k:
                taken.append(s.buf.slice(0, k))
                s.buf = s.buf.slice(k)
        batch = pa.concat_tables(taken) if len(taken) > 1 else taken[0]
        merged = sort_and_merge(batch, spec, drop_retracts=drop_retracts, columns=columns,
                                ordered=ordered)
        if merged.num_rows:
            yield merged
