"""The LSM shape of one bucket: level 0 plus one sorted run per higher level (Paimon's names).

``Levels`` is an immutable value: ``update`` (applying a ``CompactResult`` as a diff) and
``add_level0_file`` return a new ``Levels`` and leave the old one untouched. Planning code can
then hold on to the ``Levels`` it picked from while a compaction runs, and a writer that
abandons a compaction simply keeps its previous value. The decoded-key cache (``KeyOrder``)
is shared between the versions, so keys are still decoded once per file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lakecore.compact.keys import KeyOrder, KeySpec
from lakecore.format.manifest import DataFileMeta
from lakecore.merge.order import level0_order  # Paimon's level-0 order (newest first)


@dataclass(frozen=True, slots=True)
class SortedRun:
    """Files whose key ranges do not overlap, sorted by min key; read as one sorted stream."""

    files: tuple[DataFileMeta, ...] = ()
    total_size: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "total_size", sum(f.file_size for f in self.files))

    @staticmethod
    def empty() -> SortedRun:
        return _EMPTY_RUN

    @staticmethod
    def from_single(file: DataFileMeta) -> SortedRun:
        return SortedRun((file,))

    @staticmethod
    def from_sorted(files: Iterable[DataFileMeta]) -> SortedRun:
        """Trusts the caller's order (IntervalPartition builds runs in key order)."""
        return SortedRun(tuple(files))

    @staticmethod
    def from_unsorted(files: Iterable[DataFileMeta], keys: KeyOrder) -> SortedRun:
        """Sort by min key and check that no two files overlap (a bug if they do)."""
        run = SortedRun(tuple(sorted(files, key=keys.min_key)))
        run.validate(keys)
        return run

    def is_empty(self) -> bool:
        return not self.files

    def non_empty(self) -> bool:
        return bool(self.files)

    def validate(self, keys: KeyOrder) -> None:
        """Raise ``ValueError`` unless each file starts strictly after the previous one ends."""
        for prev, cur in zip(self.files, self.files[1:]):
            if not keys.min_key(cur) > keys.max_key(prev):
                raise ValueError(
                    f"sorted run has overlapping or unsorted files {prev.file_name!r} and "
                    f"{cur.file_name!r}; this is a bug"
                )


_EMPTY_RUN = SortedRun()


@dataclass(frozen=True, slots=True)
class LevelSortedRun:
    """A sorted run and the level it lives on (every level-0 file is a run of its own)."""

    level: int
    run: SortedRun


class Levels:
    """All live files of one bucket as Paimon's ``Levels``: level 0 newest first, one
    ``SortedRun`` per level 1..max_level. Immutable; see the module docstring."""

    __slots__ = ("_keys", "_level0", "_runs")

    def __init__(self, keys: KeySpec, files: Iterable[DataFileMeta], num_levels: int) -> None:
        files = list(files)
        # Files restored from a table written with more levels keep theirs (as Paimon).
        restored = max(num_levels, max((f.level for f in files), default=-1) + 1)
        if restored < 2:
            raise ValueError("number of levels must be at least 2")
        self._keys = KeyOrder.of(keys)
        by_level: list[list[DataFileMeta]] = [[] for _ in range(restored)]
        for f in files:
            if f.level < 0:
                raise ValueError(f"file {f.file_name!r} has negative level {f.level}")
            by_level[f.level].append(f)
        _check_unique(files)
        self._level0 = tuple(sorted(by_level[0], key=level0_order))
        self._runs = tuple(SortedRun.from_unsorted(fs, self._keys) for fs in by_level[1:])

    @classmethod
    def _of(
        cls, keys: KeyOrder, level0: tuple[DataFileMeta, ...], runs: tuple[SortedRun, ...]
    ) -> Levels:
        new = cls.__new__(cls)
        new._keys, new._level0, new._runs = keys, level0, runs
        return new

    @property
    def keys(self) -> KeyOrder:
        return self._keys

    @property
    def level0(self) -> tuple[DataFileMeta, ...]:
        return self._level0

    @property
    def number_of_levels(self) -> int:
        return len(self._runs) + 1

    @property
    def max_level(self) -> int:
        return len(self._runs)

    def run_of_level(self, level: int) -> SortedRun:
        if level <= 0:
            raise ValueError("level 0 is not one sorted run")
        return self._runs[level - 1]

    def number_of_sorted_runs(self) -> int:
        """What ``num-sorted-run.compaction-trigger`` / ``stop-trigger`` are compared with."""
        return len(self._level0) + sum(1 for r in self._runs if r.non_empty())

    def non_empty_highest_level(self) -> int:
        """The highest level holding files; 0 if only level 0 does, -1 when the bucket is empty.
        Deletes may be dropped when compacting to this level or above."""
        for i in range(len(self._runs) - 1, -1, -1):
            if self._runs[i].non_empty():
                return i + 1
        return 0 if self._level0 else -1

    def total_file_size(self) -> int:
        return sum(f.file_size for f in self._level0) + sum(r.total_size for r in self._runs)

    def level_sorted_runs(self) -> list[LevelSortedRun]:
        """Runs in the order strategies pick from: level-0 files newest first, then levels."""
        runs = [LevelSortedRun(0, SortedRun.from_single(f)) for f in self._level0]
        runs.extend(
            LevelSortedRun(i + 1, r) for i, r in enumerate(self._runs) if r.non_empty()
        )
        return runs

    def all_files(self) -> list[DataFileMeta]:
        return [f for lsr in self.level_sorted_runs() for f in lsr.run.files]

    def add_level0_file(self, file: DataFileMeta) -> Levels:
        """A new flush result: level-0 files only (Paimon's ``addLevel0File``)."""
        if file.level != 0:
            raise ValueError(f"file {file.file_name!r} is at level {file.level}, not 0")
        return self.update((), (file,))

    def update(self, before: Sequence[DataFileMeta], after: Sequence[DataFileMeta]) -> Levels:
        """The levels after a compaction: ``before`` files removed, ``after`` files added, each
        at its own level. An upgraded file appears in both (old level out, new level in).

        Unlike Paimon, which ignores unknown inputs, removing a file that is not here or adding
        one at a level beyond ``max_level`` raises ``ValueError``: either would silently lose
        or duplicate data in the plan of the next compaction.
        """
        level_files: list[list[DataFileMeta]] = [list(self._level0)]
        level_files.extend(list(r.files) for r in self._runs)
        changed: set[int] = set()
        for f in before:
            files = level_files[self._level_index(f)]
            idx = next((i for i, g in enumerate(files) if g.file_name == f.file_name), None)
            if idx is None:
                raise ValueError(f"file {f.file_name!r} is not at level {f.level}")
            del files[idx]
            changed.add(f.level)
        for f in after:
            level_files[self._level_index(f)].append(f)
            changed.add(f.level)
        _check_unique(f for files in level_files for f in files)
        level0 = self._level0
        if 0 in changed:
            level0 = tuple(sorted(level_files[0], key=level0_order))
        runs = tuple(
            SortedRun.from_unsorted(level_files[i + 1], self._keys) if i + 1 in changed else r
            for i, r in enumerate(self._runs)
        )
        return Levels._of(self._keys, level0, runs)

    def _level_index(self, file: DataFileMeta) -> int:
        if not 0 <= file.level <= self.max_level:
            raise ValueError(
                f"file {file.file_name!r} is at level {file.level}, outside 0..{self.max_level}"
            )
        return file.level

    def __repr__(self) -> str:
        parts = [f"L{lsr.level}:{[f.file_name for f in lsr.run.files]}"
                 for lsr in self.level_sorted_runs()]
        return f"Levels({', '.join(parts)})"


def _check_unique(files: Iterable[DataFileMeta]) -> None:
    """A file name is unique within a bucket; two entries for one name would be read twice."""
    seen: set[str] = set()
    for f in files:
        if f.file_name in seen:
            raise ValueError(f"file {f.file_name!r} appears twice in the levels")
        seen.add(f.file_name)
