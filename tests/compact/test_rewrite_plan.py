"""Rewrite vs upgrade and drop-delete, on Paimon's MergeTreeCompactManagerTest cases (files
are ``(level, min, max)`` with size = number of keys; small means size < 2) plus the
MergeTreeCompactTask upgrade rules. A stand-in executor applies each plan to ``Levels``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from lakecore.compact import (
    CompactStrategy,
    CompactUnit,
    Levels,
    LevelSortedRun,
    Rewrite,
    RewritePlan,
    Upgrade,
    compaction_file_size,
    contains_delete_records,
    plan_compaction,
    plan_rewrite,
    should_drop_delete,
)
from lakecore.format.manifest import DataFileMeta
from tests.compact.helpers import KEY_TYPES, bounds, execute, file, layout

Spec = tuple[int, int, int]


class AllToMaxLevel:
    """Paimon's ``testStrategy``: every run to the max level."""

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        return CompactUnit.from_level_runs(num_levels - 1, runs)


class FirstTwoRuns:
    def __init__(self, output_level: int) -> None:
        self.output_level = output_level

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        return CompactUnit.from_level_runs(self.output_level, runs[:2])


def run_case(
    inputs: list[Spec], strategy: CompactStrategy | None = None, drop_delete: bool = True
) -> list[Spec]:
    files = [file(lo, hi, level=lvl, max_seq=i) for i, (lvl, lo, hi) in enumerate(inputs)]
    levels = Levels(KEY_TYPES, files, 3)
    task = plan_compaction(levels, strategy or AllToMaxLevel(),
                           target_file_size=2, small_file_ratio=1.0)
    if task is None:
        return layout(levels)
    assert task.drop_delete is drop_delete
    result = execute(task.plan)
    return layout(levels.update(result.before, result.after))


def test_output_to_level0_keeps_deletes() -> None:
    # Paimon: MergeTreeCompactManagerTest.testOutputToZeroLevel
    out = run_case([(0, 1, 3), (0, 1, 5), (0, 1, 8)], FirstTwoRuns(0), drop_delete=False)
    assert out == [(0, 1, 8), (0, 1, 3)]


def test_compact_to_penultimate_level_keeps_deletes() -> None:
    # Paimon: MergeTreeCompactManagerTest.testCompactToPenultimateLayer
    out = run_case([(0, 1, 3), (0, 1, 5), (2, 1, 7)], FirstTwoRuns(1), drop_delete=False)
    assert out == [(1, 1, 5), (2, 1, 7)]


def test_no_compaction_of_single_file_at_output_level() -> None:
    # Paimon: MergeTreeCompactManagerTest.testNoCompaction
    assert run_case([(3, 1, 3)]) == [(3, 1, 3)]


@pytest.mark.parametrize(
    "inputs, expected",
    [
        # Paimon: MergeTreeCompactManagerTest.testNormal
        ([(0, 1, 3), (1, 1, 5), (1, 6, 7)], [(2, 1, 5), (2, 6, 7)]),
        # Paimon: MergeTreeCompactManagerTest.testUpgrade
        ([(0, 1, 3), (0, 1, 5), (0, 6, 8)], [(2, 1, 5), (2, 6, 8)]),
        # Paimon: MergeTreeCompactManagerTest.testSmallFiles
        ([(0, 1, 1), (0, 2, 2)], [(2, 1, 2)]),
        # Paimon: MergeTreeCompactManagerTest.testSmallFilesNoCompact
        ([(0, 1, 5), (0, 6, 6), (1, 7, 8), (1, 9, 10)],
         [(2, 1, 5), (2, 6, 6), (2, 7, 8), (2, 9, 10)]),
        # Paimon: MergeTreeCompactManagerTest.testSmallFilesCrossLevel
        ([(0, 1, 5), (0, 6, 6), (1, 7, 7), (1, 9, 10)], [(2, 1, 5), (2, 6, 7), (2, 9, 10)]),
        # Paimon: MergeTreeCompactManagerTest.testComplex
        ([(0, 1, 5), (0, 6, 6), (1, 1, 4), (1, 6, 8), (1, 10, 11), (2, 1, 3), (2, 4, 6)],
         [(2, 1, 8), (2, 10, 11)]),
        # Paimon: MergeTreeCompactManagerTest.testSmallInComplex
        ([(0, 1, 5), (0, 6, 6), (1, 1, 4), (1, 6, 8), (1, 10, 10), (2, 1, 3), (2, 4, 6)],
         [(2, 1, 10)]),
    ],
)
def test_reference_layouts(inputs: list[Spec], expected: list[Spec]) -> None:
    assert run_case(inputs) == expected


def plan(
    files: list[DataFileMeta],
    output_level: int = 2,
    max_level: int = 2,
    *,
    file_rewrite: bool = False,
    force_rewrite_all_files: bool = False,
) -> RewritePlan:
    """A plan with target 10 and ratio 0.5: files under 5 keys are small."""
    unit = CompactUnit.from_files(output_level, files, file_rewrite)
    return plan_rewrite(unit, KEY_TYPES, max_level=max_level, drop_delete=True,
                        target_file_size=10, small_file_ratio=0.5,
                        force_rewrite_all_files=force_rewrite_all_files)


def describe(steps: Sequence[object]) -> list[tuple[str, list[tuple[int, int]], int]]:
    out = []
    for s in steps:
        if isinstance(s, Upgrade):
            out.append(("upgrade", [bounds(s.file)], s.new_level))
        else:
            assert isinstance(s, Rewrite)
            out.append(("rewrite", [bounds(f) for f in s.files], s.output_level))
    return out


def test_small_files_batch_until_a_large_file() -> None:
    # big = size >= 5; candidates flush before each big file, never across it
    files = [file(0, 1), file(2, 3), file(4, 20), file(21, 21), file(22, 22), file(23, 40)]
    assert describe(plan(files).steps) == [
        ("rewrite", [(0, 1), (2, 3)], 2), ("upgrade", [(4, 20)], 2),
        ("rewrite", [(21, 21), (22, 22)], 2), ("upgrade", [(23, 40)], 2),
    ]


def test_overlapping_section_and_trailing_small_file_rewritten_together() -> None:
    files = [file(0, 9), file(5, 14), file(15, 15)]
    p = plan(files)
    assert describe(p.steps) == [("rewrite", [(0, 9), (5, 14), (15, 15)], 2)]
    assert [len(section) for section in p.rewrites[0].sections] == [2, 1]


@pytest.mark.parametrize("deletes, step", [(0, "upgrade"), (3, "rewrite"), (None, "rewrite")])
def test_upgrade_to_max_level_rewrites_files_with_deletes(
    deletes: int | None, step: str
) -> None:
    # Paimon: MergeTreeCompactTask.upgrade (containsDeleteRecords; unknown counts as yes)
    p = plan([file(0, 20, level=1, deletes=deletes)])
    assert describe(p.steps) == [(step, [(0, 20)], 2)]
    assert p.drop_delete and all(s.drop_delete for s in p.rewrites)


def test_upgrade_below_max_level_keeps_deletes_in_place() -> None:
    p = plan([file(0, 20, deletes=3)], output_level=1, max_level=2)
    assert describe(p.steps) == [("upgrade", [(0, 20)], 1)]


def test_file_already_at_output_level_needs_no_step() -> None:
    p = plan([file(0, 20, level=1), file(30, 31)], output_level=1, max_level=2)
    assert describe(p.steps) == [("upgrade", [(30, 31)], 1)]  # lone small file: upgraded


def test_force_rewrite_all_files() -> None:
    p = plan([file(0, 20, level=1)], force_rewrite_all_files=True)
    assert describe(p.steps) == [("rewrite", [(0, 20)], 2)]


def test_file_rewrite_unit_rewrites_each_file_alone() -> None:
    p = plan([file(0, 20, level=2), file(21, 40, level=2)], file_rewrite=True)
    assert describe(p.steps) == [("rewrite", [(0, 20)], 2), ("rewrite", [(21, 40)], 2)]


@pytest.mark.parametrize(
    "output, highest, keep, expected",
    [(0, 0, False, False), (1, 2, False, False), (2, 2, False, True), (3, 2, False, True),
     (1, -1, False, True), (2, 2, True, False)],
)
def test_should_drop_delete(output: int, highest: int, keep: bool, expected: bool) -> None:
    # Paimon: MergeTreeCompactManager.triggerCompaction (dropDelete)
    assert should_drop_delete(output, highest, keep) is expected


def test_helpers() -> None:
    assert compaction_file_size(128 << 20, 0.7) == int((128 << 20) * 0.7)
    assert contains_delete_records(file(deletes=None))
    assert not contains_delete_records(file(deletes=0))


def test_full_compaction_through_planner() -> None:
    compacted = Levels(KEY_TYPES, [file(0, 9, level=2, deletes=0)], 3)
    strategy = AllToMaxLevel()
    assert plan_compaction(compacted, strategy, target_file_size=2, small_file_ratio=1.0,
                           full=True) is None  # already one run at the max level
    task = plan_compaction(compacted, strategy, target_file_size=2, small_file_ratio=1.0,
                           full=True, rewrite_if=lambda f: True)
    assert task is not None and task.unit.file_rewrite and task.drop_delete
    assert describe(task.plan.steps) == [("rewrite", [(0, 9)], 2)]
