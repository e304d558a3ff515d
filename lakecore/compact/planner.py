"""One bucket's compaction decision, end to end and without I/O: Paimon's
``MergeTreeCompactManager.triggerCompaction`` followed by ``MergeTreeCompactTask``'s choice of
rewrites and upgrades. An executor (inline writer or dedicated job) runs the returned plan and
applies its ``CompactResult`` to ``Levels`` and the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lakecore.compact.levels import Levels
from lakecore.compact.rewrite_plan import RewritePlan, plan_rewrite, should_drop_delete
from lakecore.compact.unit import CompactUnit
from lakecore.compact.universal import CompactStrategy, full_compaction
from lakecore.format.manifest import DataFileMeta


@dataclass(frozen=True, slots=True)
class CompactTaskPlan:
    """A picked unit, whether its merge may drop deletes, and its rewrite/upgrade steps."""

    unit: CompactUnit
    drop_delete: bool
    plan: RewritePlan


def pick_unit(
    levels: Levels,
    strategy: CompactStrategy,
    *,
    full: bool = False,
    force_rewrite_all_files: bool = False,
    rewrite_if: Callable[[DataFileMeta], bool] | None = None,
) -> CompactUnit | None:
    """The unit to compact now, if any. ``full`` is a user-requested full compaction
    (``full_compaction``); otherwise the strategy picks, and a pick that would do nothing (no
    files, or one file already at its output level) is dropped, as Paimon does."""
    runs = levels.level_sorted_runs()
    if full:
        return full_compaction(
            levels.number_of_levels, runs,
            force_rewrite_all_files=force_rewrite_all_files, rewrite_if=rewrite_if,
        )
    unit = strategy.pick(levels.number_of_levels, runs)
    return None if unit is None or unit.is_noop() else unit


def plan_compaction(
    levels: Levels,
    strategy: CompactStrategy,
    *,
    target_file_size: int,
    small_file_ratio: float,
    full: bool = False,
    force_keep_delete: bool = False,
    force_rewrite_all_files: bool = False,
    rewrite_if: Callable[[DataFileMeta], bool] | None = None,
    deletion_vectors: bool = False,
) -> CompactTaskPlan | None:
    """Pick a unit from ``levels`` and plan its task; None when there is nothing to do.
    ``deletion_vectors``: every output at a level >= 1 drops deletes (Paimon's
    ``MergeTreeCompactManager`` with a DV maintainer: older versions are marked deleted in
    their files' vectors instead of being cancelled by a kept retraction)."""
    unit = pick_unit(
        levels, strategy, full=full,
        force_rewrite_all_files=force_rewrite_all_files, rewrite_if=rewrite_if,
    )
    if unit is None:
        return None
    drop_delete = should_drop_delete(
        unit.output_level, levels.non_empty_highest_level(), force_keep_delete
    ) or (deletion_vectors and unit.output_level != 0 and not force_keep_delete)
    plan = plan_rewrite(
        unit, levels.keys,
        max_level=levels.max_level,
        drop_delete=drop_delete,
        target_file_size=target_file_size,
        small_file_ratio=small_file_ratio,
        force_rewrite_all_files=force_rewrite_all_files,
    )
    return CompactTaskPlan(unit, drop_delete, plan)
