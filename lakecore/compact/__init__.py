"""Compaction planning: pure values and functions, no I/O.

Primary-key tables: ``Levels`` -> ``CompactStrategy.pick`` (``UniversalCompaction``,
``ForceUpLevel0Compaction``, ``full_compaction``) -> ``CompactUnit`` -> ``plan_rewrite``
(``IntervalPartition`` sections, rewrite vs upgrade) -> executed elsewhere -> ``CompactResult``
-> ``Levels.update``. ``planner.plan_compaction`` chains the pure steps for one bucket.
Append-only tables: ``append_compaction``.
"""

from lakecore.compact.append_compaction import (
    AppendCompaction,
    BucketedPick,
    full_bucketed,
    pack_unaware,
    pick_bucketed,
)
from lakecore.compact.interval_partition import IntervalPartition
from lakecore.compact.keys import KeyOrder
from lakecore.compact.levels import Levels, LevelSortedRun, SortedRun
from lakecore.compact.planner import CompactTaskPlan, pick_unit, plan_compaction
from lakecore.compact.rewrite_plan import (
    Rewrite,
    RewritePlan,
    Upgrade,
    compaction_file_size,
    contains_delete_records,
    plan_rewrite,
    should_drop_delete,
)
from lakecore.compact.triggers import (
    Clock,
    EarlyFullCompaction,
    OffPeakHours,
    estimate_last_full_compaction_millis,
    system_clock,
)
from lakecore.compact.unit import CompactResult, CompactUnit
from lakecore.compact.universal import (
    CompactStrategy,
    ForceUpLevel0Compaction,
    UniversalCompaction,
    create_compact_strategy,
    full_compaction,
    needs_lookup,
)

__all__ = [
    "AppendCompaction",
    "BucketedPick",
    "Clock",
    "CompactResult",
    "CompactStrategy",
    "CompactTaskPlan",
    "CompactUnit",
    "EarlyFullCompaction",
    "ForceUpLevel0Compaction",
    "IntervalPartition",
    "KeyOrder",
    "LevelSortedRun",
    "Levels",
    "OffPeakHours",
    "Rewrite",
    "RewritePlan",
    "SortedRun",
    "UniversalCompaction",
    "Upgrade",
    "compaction_file_size",
    "contains_delete_records",
    "create_compact_strategy",
    "estimate_last_full_compaction_millis",
    "full_bucketed",
    "full_compaction",
    "needs_lookup",
    "pack_unaware",
    "pick_bucketed",
    "pick_unit",
    "plan_compaction",
    "plan_rewrite",
    "should_drop_delete",
    "system_clock",
]
