"""Paimon's IntervalPartition: files -> sections of sorted runs.

A compaction merges files whose key ranges overlap. Splitting the input into *sections*
(maximal groups of transitively overlapping files; sections never overlap each other) keeps the
number of runs merged at once small, and lets a section made of a single run skip the merge
altogether (``rewrite_plan``). Inside a section, files are packed greedily into the minimum
number of sorted runs: each file joins the run that ends first, if it starts after that end.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from lakecore.compact.keys import KeyOrder, KeySpec, SortKey
from lakecore.compact.levels import SortedRun
from lakecore.format.manifest import DataFileMeta


class IntervalPartition:
    """Partition ``files`` into sections of sorted runs (see the module docstring)."""

    def __init__(self, files: Iterable[DataFileMeta], keys: KeySpec) -> None:
        self._keys = KeyOrder.of(keys)
        k = self._keys
        # Ties on min key go shortest-first, as in Paimon.
        self._files = sorted(files, key=lambda f: (k.min_key(f), k.max_key(f)))

    def partition(self) -> list[list[SortedRun]]:
        """Sections in key order; key ranges of different sections do not overlap. The order
        of runs within a section carries no meaning (all of them are merged together)."""
        result: list[list[SortedRun]] = []
        section: list[DataFileMeta] = []
        bound: SortKey | None = None
        for f in self._files:
            lo, hi = self._keys.min_key(f), self._keys.max_key(f)
            if section and bound is not None and lo > bound:
                result.append(self._runs_of(section))
                section = []
                bound = None
            section.append(f)
            if bound is None or hi > bound:
                bound = hi
        if section:
            result.append(self._runs_of(section))
        return result

    def _runs_of(self, section: list[DataFileMeta]) -> list[SortedRun]:
        # Heap of (max key of the run's last file, creation counter, run); the counter keeps
        # the order deterministic on equal keys and avoids comparing the lists.
        heap: list[tuple[SortKey, int, list[DataFileMeta]]] = []
        for f in section:
            if heap and self._keys.min_key(f) > heap[0][0]:
                _, n, run = heap[0]
                run.append(f)
                heapq.heapreplace(heap, (self._keys.max_key(f), n, run))
            else:
                heapq.heappush(heap, (self._keys.max_key(f), len(heap), [f]))
        runs = sorted(heap, key=lambda entry: entry[1])
        return [SortedRun.from_sorted(run) for _, _, run in runs]
