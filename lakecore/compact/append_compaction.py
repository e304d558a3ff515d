"""Compaction planning for append-only tables: small files are rewritten into fewer, larger
ones. There are no keys to merge, so the only question is which files go together.

* ``pack_unaware`` - tables with ``bucket = -1`` (Paimon's ``AppendCompactCoordinator``):
  per partition, files smaller than ``compaction_file_size`` are bin-packed smallest first;
  each file weighs its size plus ``source.split.open-file-cost`` (so many tiny files still
  fill a bin), a bin closes at 2 x ``target-file-size``, and the last, partial bin is kept only
  with at least ``compaction.min.file-num`` files.
* ``pick_bucketed`` / ``full_bucketed`` - fixed-bucket tables (Paimon's
  ``BucketedAppendCompactManager``): a window over the files in sequence order, so that
  rewriting keeps the bucket's files ordered by arrival.

Paimon's streaming coordinator also ages partitions between rounds (compacting a handful of
leftover files after several idle rounds); that is scheduling state, left to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.compact.rewrite_plan import compaction_file_size
from lakecore.format.manifest import DataFileMeta
from lakecore.options import CoreOptions

DEFAULT_MIN_FILE_NUM = 5
"""Paimon's ``compaction.min.file-num`` default."""
DEFAULT_OPEN_FILE_COST = 4 << 20
"""Paimon's ``source.split.open-file-cost`` default (4 MiB)."""
FULL_COMPACT_MIN_FILE = 3
"""A bucketed full compaction needs at least this many files (Paimon's constant)."""


@dataclass(frozen=True, slots=True)
class AppendCompaction:
    """The options append compaction reads, resolved to bytes and counts."""

    target_file_size: int
    compaction_file_size: int
    min_file_num: int = DEFAULT_MIN_FILE_NUM
    open_file_cost: int = DEFAULT_OPEN_FILE_COST

    @staticmethod
    def from_options(options: CoreOptions) -> AppendCompaction:
        target = options.target_file_size(False)
        # ``compaction.min.file-num`` and ``source.split.open-file-cost`` have no accessor
        # yet; use them once CoreOptions has them, Paimon's defaults until then.
        return AppendCompaction(
            target,
            compaction_file_size(target, options.compaction_small_file_ratio),
            getattr(options, "compaction_min_file_num", DEFAULT_MIN_FILE_NUM),
            getattr(options, "source_split_open_file_cost", DEFAULT_OPEN_FILE_COST),
        )

    def pack_unaware(self, files: Iterable[DataFileMeta]) -> list[tuple[DataFileMeta, ...]]:
        return pack_unaware(
            files,
            target_file_size=self.target_file_size,
            compaction_file_size=self.compaction_file_size,
            open_file_cost=self.open_file_cost,
            min_file_num=self.min_file_num,
        )


def pack_unaware(
    files: Iterable[DataFileMeta],
    *,
    target_file_size: int,
    compaction_file_size: int,
    open_file_cost: int,
    min_file_num: int,
) -> list[tuple[DataFileMeta, ...]]:
    """Groups of one partition's files, each to be rewritten into new files (see the module
    docstring). Files at or above ``compaction_file_size`` are left alone."""
    small = sorted(
        (f for f in files if f.file_size < compaction_file_size),
        key=lambda f: (f.file_size, f.file_name),
    )
    groups: list[tuple[DataFileMeta, ...]] = []
    current: list[DataFileMeta] = []
    weight = 0
    for f in small:
        current.append(f)
        weight += f.file_size + open_file_cost
        if len(current) > 1 and weight >= 2 * target_file_size:
            groups.append(tuple(current))
            current, weight = [], 0
    if len(current) >= min_file_num:
        groups.append(tuple(current))
    return groups


@dataclass(frozen=True, slots=True)
class BucketedPick:
    """``compact_before``: files to rewrite together (None: wait for more files).
    ``remaining``: files still waiting; large files the window slid past are dropped from it
    for good, as in Paimon."""

    compact_before: tuple[DataFileMeta, ...] | None
    remaining: tuple[DataFileMeta, ...]


def pick_bucketed(
    files: Iterable[DataFileMeta], *, min_file_num: int, target_file_size: int
) -> BucketedPick:
    """Paimon's ``pickCompactBefore``: walk the files oldest first with a window; once it
    holds ``min_file_num`` files they are picked. While the window weighs 2 x target or more,
    its oldest file leaves it (big enough already, no point carrying it along)."""
    queue = sorted(files, key=lambda f: (f.min_sequence_number, f.file_name))
    window: list[DataFileMeta] = []
    total = 0
    for i, f in enumerate(queue):
        window.append(f)
        total += f.file_size
        if len(window) >= min_file_num:
            return BucketedPick(tuple(window), tuple(queue[i + 1:]))
        if total >= 2 * target_file_size:
            total -= window.pop(0).file_size
    return BucketedPick(None, tuple(window))


def full_bucketed(
    files: Iterable[DataFileMeta],
    *,
    compaction_file_size: int,
    force_rewrite_all_files: bool = False,
) -> tuple[DataFileMeta, ...]:
    """Paimon's bucketed ``FullCompactTask``: the files to rewrite (empty: nothing to do).
    Leading large files (oldest first) are kept as they are; the rest is rewritten if small
    files outnumber large ones and there are at least ``FULL_COMPACT_MIN_FILE`` of them."""
    ordered = sorted(files, key=lambda f: (f.min_sequence_number, f.file_name))
    if force_rewrite_all_files:
        return tuple(ordered)
    if len(ordered) < FULL_COMPACT_MIN_FILE:
        return ()
    start = 0
    while start < len(ordered) and ordered[start].file_size >= compaction_file_size:
        start += 1
    rest = ordered[start:]
    big = sum(1 for f in rest if f.file_size >= compaction_file_size)
    if len(rest) - big > big and len(rest) >= FULL_COMPACT_MIN_FILE:
        return tuple(rest)
    return ()
