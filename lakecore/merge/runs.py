"""Streaming k-way merge of sorted KV runs in bounded memory, columnar.

Each run yields sorted chunks. We repeatedly take, from every run's current chunk, the rows
whose key is <= the smallest "last key" among the runs' chunks: every record of those keys
is then in hand, so the slice can be sorted and merged on its own. Memory is bounded by one
chunk per run. A run given as a list (a read's whole file) knows its last chunk: when every
run still going is on its last one, one round takes them all.

A large round is cut into key-range sections (pivots taken from its largest run slice; each
run slice cut by binary search, so all records of a key fall in one section), and the
sections are sorted and merged side by side on the merge threads (numpy sorts and pyarrow
gathers release the GIL); results come back in key order. In a bucket task (one of several
buckets merged side by side) rounds are merged whole on the task's own thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future

import numpy as np
import pyarrow as pa

from lakecore.merge.fast import sort_and_merge, with_row_sequence
from lakecore.merge.functions import merge_sorted
from lakecore.merge.spec import MergeSpec
from lakecore.utils.threads import in_bucket_task, merge_pool, worker_count

# Rounds smaller than this are merged on the caller's thread in one piece.
PARALLEL_MIN_ROWS = 64 * 1024
# A large round is cut into up to this many key-range pieces per merge thread (pieces of at
# least PARALLEL_MIN_ROWS rows), so merged rows reach the caller long before the round ends.
PIECES_PER_THREAD = 4


def _key_at(t: pa.Table, names: list[str], i: int) -> tuple:
    return tuple(t.column(n)[i].as_py() for n in names)


def _count_le(t: pa.Table, names: list[str], bound: tuple) -> int:
    """Number of leading rows of sorted ``t`` whose key <= ``bound`` (binary search; one
    ``np.searchsorted`` for a single integer key, the common shape)."""
    if len(names) == 1 and isinstance(bound[0], int) and not isinstance(bound[0], bool):
        col = t.column(names[0])
        if pa.types.is_integer(col.type) and col.null_count == 0:
            values = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            return int(np.searchsorted(values.to_numpy(), bound[0], side="right"))
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
        # a run held as a list (a read's whole files) knows when its buffer is its last chunk
        self._left = len(chunks) if isinstance(chunks, (list, tuple)) else None
        self._it = iter(chunks)
        self.buf: pa.Table | None = None
        self.done = False

    def fill(self) -> None:
        while (self.buf is None or self.buf.num_rows == 0) and not self.done:
            try:
                self.buf = next(self._it)
                if self._left is not None:
                    self._left -= 1
            except StopIteration:
                self.done, self.buf = True, None

    @property
    def last(self) -> bool:
        """Whether nothing follows the buffer: its rows can all be merged now."""
        return self.done or self._left == 0


def merge_runs(
    runs: Sequence[Iterable[pa.Table]], spec: MergeSpec, *, drop_retracts: bool,
    columns: list[str] | None = None, ordered: bool = True, sequenced: bool = False,
) -> Iterator[pa.Table]:
    """Merge sorted runs into sorted, merged chunks (one row per key). ``columns``: only these
    columns of the merged rows are wanted (the rest are read for merging only).
    ``sequenced``: the runs come in sequence order (each newer than all before it, each
    sorted by key, then sequence) and hold no ``_SEQUENCE_NUMBER`` column (``sort_and_merge``)."""
    names = list(spec.key_columns)
    states = [_Run(r) for r in runs]
    # a bucket task merges every round whole, on its own thread (in_bucket_task)
    inline = in_bucket_task()
    sections = 1 if inline else max(1, worker_count())
    pieces = 1 if inline else sections * PIECES_PER_THREAD
    in_flight: deque[Future[pa.Table]] = deque()

    def merge_one(batch: pa.Table) -> pa.Table:
        return sort_and_merge(batch, spec, drop_retracts=drop_retracts, columns=columns,
                              ordered=ordered, sequenced=sequenced)

    def single(buf: pa.Table) -> pa.Table:
        buf = with_row_sequence(buf) if sequenced else buf
        merged = merge_sorted(buf, spec, drop_retracts=drop_retracts)
        return merged if columns is None else merged.select(columns)

    def submit(fn: Callable[[pa.Table], pa.Table], batch: pa.Table) -> Iterator[pa.Table]:
        """Queue one piece (in a bucket task, or a small one with nothing queued: merge it
        here)."""
        if inline or (batch.num_rows < PARALLEL_MIN_ROWS and not in_flight):
            out = fn(batch)
            if out.num_rows:
                yield out
            return
        in_flight.append(merge_pool().submit(fn, batch))

    def drain(keep: int) -> Iterator[pa.Table]:
        """Hand back finished pieces in order until at most ``keep`` are queued."""
        while len(in_flight) > keep:
            out = in_flight.popleft().result()
            if out.num_rows:
                yield out

    try:
        while True:
            for s in states:
                s.fill()
            live = [s for s in states if s.buf is not None and s.buf.num_rows > 0]
            if not live:
                break
            if len(live) == 1 and all(s.done for s in states if s is not live[0]):
                only = live[0]
                assert only.buf is not None
                buf, only.buf = only.buf, None
                # a single run already has one row per key, but merging applies drop_retracts
                yield from submit(single, buf)
                yield from drain(sections)
                continue
            taken = []
            if all(s.last for s in live):
                # every run's last rows are in hand: one round takes them all (a read of
                # whole files merges in one round, not one per run that ends)
                for s in live:
                    assert s.buf is not None
                    taken.append(s.buf)
                    s.buf = None
            else:
                bound = min(_key_at(s.buf, names, s.buf.num_rows - 1) for s in live)  # type: ignore[union-attr]
                for s in live:
                    assert s.buf is not None
                    k = _count_le(s.buf, names, bound)
                    if k:
                        taken.append(s.buf.slice(0, k))
                        s.buf = s.buf.slice(k)
            # every piece of the round is queued before the first is handed back: while the
            # caller encodes the first merged piece, the merge threads go on with the rest,
            # and up to ``sections`` stay queued while the next round is read
            for part in _key_sections(taken, names, pieces):
                yield from submit(merge_one, part)
            yield from drain(sections)
        yield from drain(0)
    finally:
        for f in in_flight:
            f.cancel()


def _key_sections(taken: list[pa.Table], names: list[str], sections: int) -> Iterator[pa.Table]:
    """The rows of one round (sorted slices of the runs, all keys <= the round's bound) in
    key order, cut into up to ``sections`` pieces that share no key."""
    total = sum(t.num_rows for t in taken)
    sections = min(sections, total // PARALLEL_MIN_ROWS)
    if sections <= 1:
        yield pa.concat_tables(taken) if len(taken) > 1 else taken[0]
        return
    largest = max(taken, key=lambda t: t.num_rows)
    pivots = sorted({_key_at(largest, names, largest.num_rows * j // sections - 1)
                     for j in range(1, sections)})
    rest = list(taken)
    for pivot in [*pivots, None]:
        piece = []
        for i, t in enumerate(rest):
            k = t.num_rows if pivot is None else _count_le(t, names, pivot)
            if k:
                piece.append(t.slice(0, k))
                rest[i] = t.slice(k)
        if piece:
            yield pa.concat_tables(piece) if len(piece) > 1 else piece[0]
