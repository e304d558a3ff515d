"""The pure half of Paimon's ``MergeTreeCompactTask``: which files of a ``CompactUnit`` are
merged and rewritten, and which only change level.

Rewriting costs a read and a write of every row; an *upgrade* only records the file at its new
level. So a file is upgraded whenever that is safe: it overlaps nothing else in the unit (its
section is one run) and it is not small. Small files are rewritten together with their
neighbours so they stop piling up. Walking the sections in key order, overlapping sections and
small files collect as *candidates*; a large non-overlapping file flushes the candidates as one
rewrite, then is upgraded itself. Candidates are never merged across a large file: the merged
output must stay a sorted run that does not overlap the upgraded file.

An upgrade becomes a rewrite of that one file when the output is the max level and the file
may hold deletes (``delete_row_count`` > 0 or unknown): the max level must not keep retractions
that nothing older can cancel any more. ``file_rewrite`` units rewrite each file on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakecore.compact.interval_partition import IntervalPartition
from lakecore.compact.keys import KeySpec
from lakecore.compact.levels import SortedRun
from lakecore.compact.unit import CompactUnit
from lakecore.format.manifest import DataFileMeta

Section = tuple[SortedRun, ...]


@dataclass(frozen=True, slots=True)
class Rewrite:
    """Merge all runs of all ``sections`` (in order; sections do not overlap each other) into
    new files at ``output_level``, dropping deletes when ``drop_delete``."""

    sections: tuple[Section, ...]
    output_level: int
    drop_delete: bool

    @property
    def files(self) -> tuple[DataFileMeta, ...]:
        return tuple(f for section in self.sections for run in section for f in run.files)


@dataclass(frozen=True, slots=True)
class Upgrade:
    """Move ``file`` to ``new_level`` without touching its data."""

    file: DataFileMeta
    new_level: int

    @property
    def upgraded(self) -> DataFileMeta:
        return self.file.upgrade(self.new_level)


Step = Rewrite | Upgrade


@dataclass(frozen=True, slots=True)
class RewritePlan:
    """The steps of one compaction task, in key order. Input files already at the output
    level that need neither step stay where they are and appear in no step."""

    output_level: int
    drop_delete: bool
    steps: tuple[Step, ...]

    @property
    def rewrites(self) -> tuple[Rewrite, ...]:
        return tuple(s for s in self.steps if isinstance(s, Rewrite))

    @property
    def upgrades(self) -> tuple[Upgrade, ...]:
        return tuple(s for s in self.steps if isinstance(s, Upgrade))


def compaction_file_size(target_file_size: int, small_file_ratio: float) -> int:
    """Below this size a file is "small" and rewritten rather than upgraded (Paimon's
    ``compactionFileSize``: ``target-file-size`` x ``compaction.small-file-ratio``, truncated).
    The margin under the target keeps a freshly rolled file from being rewritten again."""
    return int(target_file_size * small_file_ratio)


def should_drop_delete(
    output_level: int, non_empty_highest_level: int, force_keep_delete: bool = False
) -> bool:
    """Deletes can be dropped only when no older data can remain below the output: never at
    level 0 (older level-0 files may be left out of the unit), and at a level >= 1 only when
    it is at or above the highest non-empty level."""
    return (
        not force_keep_delete
        and output_level != 0
        and output_level >= non_empty_highest_level
    )


def contains_delete_records(file: DataFileMeta) -> bool:
    """Whether the file may hold -U/-D rows; unknown (older writers) counts as yes."""
    return file.delete_row_count is None or file.delete_row_count > 0


def plan_rewrite(
    unit: CompactUnit,
    keys: KeySpec,
    *,
    max_level: int,
    drop_delete: bool,
    target_file_size: int,
    small_file_ratio: float,
    force_rewrite_all_files: bool = False,
) -> RewritePlan:
    """Decide rewrite vs upgrade for every file of ``unit`` (see the module docstring)."""
    out = unit.output_level
    if unit.file_rewrite:
        steps: list[Step] = [
            Rewrite(((SortedRun.from_single(f),),), out, drop_delete) for f in unit.files
        ]
        return RewritePlan(out, drop_delete, tuple(steps))
    builder = _Builder(
        out, max_level, drop_delete, force_rewrite_all_files,
        compaction_file_size(target_file_size, small_file_ratio),
    )
    for section in IntervalPartition(unit.files, keys).partition():
        builder.add_section(section)
    builder.flush()
    return RewritePlan(out, drop_delete, tuple(builder.steps))


class _Builder:
    """The walk over sections, with the candidate list of Paimon's ``doCompact``."""

    def __init__(
        self, output_level: int, max_level: int, drop_delete: bool,
        force_rewrite_all_files: bool, min_file_size: int,
    ) -> None:
        self.output_level = output_level
        self.max_level = max_level
        self.drop_delete = drop_delete
        self.force_rewrite_all_files = force_rewrite_all_files
        self.min_file_size = min_file_size
        self.candidate: list[Section] = []
        self.steps: list[Step] = []

    def add_section(self, section: Sequence[SortedRun]) -> None:
        if len(section) > 1:
            self.candidate.append(tuple(section))
            return
        for f in section[0].files:
            if f.file_size < self.min_file_size:
                self.candidate.append((SortedRun.from_single(f),))
            else:
                self.flush()
                self.upgrade(f)

    def flush(self) -> None:
        """Rewrite the candidates together; a lone small file on its own is upgraded instead
        (rewriting one file alone would not make it any bigger)."""
        if not self.candidate:
            return
        if len(self.candidate) == 1 and len(self.candidate[0]) == 1:
            files = self.candidate[0][0].files
            self.candidate = []
            for f in files:
                self.upgrade(f)
            return
        self._rewrite(self.candidate)
        self.candidate = []

    def upgrade(self, file: DataFileMeta) -> None:
        must_rewrite = self.force_rewrite_all_files or (
            self.output_level == self.max_level and contains_delete_records(file)
        )
        if must_rewrite:
            self._rewrite([(SortedRun.from_single(file),)])
        elif file.level != self.output_level:
            self.steps.append(Upgrade(file, self.output_level))

    def _rewrite(self, sections: list[Section]) -> None:
        self.steps.append(Rewrite(tuple(sections), self.output_level, self.drop_delete))
