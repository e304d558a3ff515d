"""What a compaction strategy picks (``CompactUnit``) and what a compaction did
(``CompactResult``): plain values passed from planner to executor to ``Levels`` and commit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.compact.levels import LevelSortedRun
from lakecore.format.index_manifest import IndexFileMeta
from lakecore.format.manifest import DataFileMeta


@dataclass(frozen=True, slots=True)
class CompactUnit:
    """Files to compact together into ``output_level``.

    ``file_rewrite`` marks Paimon's file-rewrite units (a full compaction of a bucket that is
    already one run at the max level, where some files must still be rewritten): each file is
    rewritten on its own, never merged with another.
    """

    output_level: int
    files: tuple[DataFileMeta, ...]
    file_rewrite: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))
        if self.output_level < 0:
            raise ValueError(f"output level {self.output_level} is negative")

    @staticmethod
    def from_level_runs(output_level: int, runs: Iterable[LevelSortedRun]) -> CompactUnit:
        return CompactUnit(output_level, tuple(f for lsr in runs for f in lsr.run.files))

    @staticmethod
    def from_files(
        output_level: int, files: Iterable[DataFileMeta], file_rewrite: bool = False
    ) -> CompactUnit:
        return CompactUnit(output_level, tuple(files), file_rewrite)

    def is_noop(self) -> bool:
        """Nothing to do: no files, or one file already at the output level. Paimon drops such
        picks of a normal (non-full) compaction before running them."""
        return not self.files or (
            len(self.files) == 1 and self.files[0].level == self.output_level
        )


@dataclass(frozen=True, slots=True)
class CompactResult:
    """A compaction as a diff of the bucket's files, plus the changelog files it produced.

    An upgraded file is in ``before`` at its old level and in ``after`` at its new one; the
    same diff goes to ``Levels.update`` and into the COMPACT commit message. A deletion-vector
    compaction also names the bucket's new index file (``index_after``) and the ones it
    replaces (``index_before``): the message's compaction increment.
    """

    before: tuple[DataFileMeta, ...] = ()
    after: tuple[DataFileMeta, ...] = ()
    changelog: tuple[DataFileMeta, ...] = ()
    index_after: tuple[IndexFileMeta, ...] = ()
    index_before: tuple[IndexFileMeta, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "before", tuple(self.before))
        object.__setattr__(self, "after", tuple(self.after))
        object.__setattr__(self, "changelog", tuple(self.changelog))
        object.__setattr__(self, "index_after", tuple(self.index_after))
        object.__setattr__(self, "index_before", tuple(self.index_before))

    def merge(self, other: CompactResult) -> CompactResult:
        """Both results as one (steps of one compaction task are merged this way)."""
        return CompactResult(
            self.before + other.before,
            self.after + other.after,
            self.changelog + other.changelog,
            self.index_after + other.index_after,
            self.index_before + other.index_before,
        )

    def is_empty(self) -> bool:
        return not (self.before or self.after or self.changelog or self.index_after
                    or self.index_before)
