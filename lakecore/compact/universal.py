"""Paimon's compaction strategies for primary-key tables: ``UniversalCompaction`` (RocksDB's
universal style: low write amplification, bounded space and read amplification),
``ForceUpLevel0Compaction`` (tables that need lookup) and the full-compaction pick.

``pick(num_levels, runs)`` takes runs as ``Levels.level_sorted_runs()`` lists them (level-0
files newest first, then levels 1..max) and returns a ``CompactUnit`` or None. Only the
injected clock and the early-full-compaction memory (``triggers``) go beyond the arguments.

Checks, in Paimon's order: early full compaction; size amplification (everything but the
oldest run, against the oldest run); size ratio (grow a prefix of newer runs while the next
run is not much bigger); run count (more runs than ``num-sorted-run.compaction-trigger``).
Output level: the max level when every run is taken, else the level just below the next run
left out, and never level 0 (more runs are taken until a level >= 1 is reached).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from lakecore.compact.levels import LevelSortedRun
from lakecore.compact.triggers import (
    Clock,
    EarlyFullCompaction,
    OffPeakHours,
    estimate_last_full_compaction_millis,
    system_clock,
)
from lakecore.compact.unit import CompactUnit
from lakecore.format.manifest import DataFileMeta
from lakecore.options import ChangelogProducer, CoreOptions, MergeEngine


class CompactStrategy(Protocol):
    """Anything that picks a ``CompactUnit`` from a bucket's runs."""

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None: ...


@dataclass(frozen=True)
class UniversalCompaction:
    """``max_size_amp`` = ``compaction.max-size-amplification-percent``, ``size_ratio`` =
    ``compaction.size-ratio`` (percent), ``num_run_compaction_trigger`` =
    ``num-sorted-run.compaction-trigger``."""

    max_size_amp: int
    size_ratio: int
    num_run_compaction_trigger: int
    early_full_compaction: EarlyFullCompaction | None = None
    offpeak: OffPeakHours | None = None
    clock: Clock = system_clock

    @staticmethod
    def from_options(
        options: CoreOptions,
        clock: Clock = system_clock,
        *,
        last_full_compaction: int | None = None,
    ) -> UniversalCompaction:
        """The table's universal compaction; ``last_full_compaction`` (epoch millis) seeds the
        interval trigger, see ``estimate_last_full_compaction_millis``."""
        early = EarlyFullCompaction.create(
            options.compaction_optimization_interval,
            options.compaction_total_size_threshold,
            options.compaction_incremental_size_threshold,
            last_full_compaction=last_full_compaction,
            clock=clock,
        )
        offpeak = OffPeakHours.create(
            options.compaction_offpeak_start_hour,
            options.compaction_offpeak_end_hour,
            options.compaction_offpeak_ratio,
        )
        return UniversalCompaction(
            options.compaction_max_size_amplification_percent,
            options.compaction_size_ratio,
            options.num_sorted_run_compaction_trigger,
            early,
            offpeak,
            clock,
        )

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if not runs:
            return None  # an empty bucket (Paimon would pick an empty unit and drop it)
        max_level = num_levels - 1
        if self.early_full_compaction is not None:
            unit = self.early_full_compaction.try_full_compact(num_levels, runs)
            if unit is not None:
                return unit
        unit = self.pick_for_size_amp(max_level, runs)
        if unit is not None:
            return unit
        unit = self.pick_for_size_ratio(max_level, runs)
        if unit is not None:
            return unit
        if len(runs) > self.num_run_compaction_trigger:
            # Take the surplus runs, then let the size ratio grow the unit further.
            candidate_count = len(runs) - self.num_run_compaction_trigger + 1
            return self.pick_for_size_ratio_from(max_level, runs, candidate_count)
        return None

    def pick_for_size_amp(
        self, max_level: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        """Everything to the max level once the newer runs exceed ``max_size_amp`` percent of
        the oldest run (the space wasted on not-yet-merged versions of rows)."""
        if not runs or len(runs) < self.num_run_compaction_trigger:
            return None
        candidate_size = sum(r.run.total_size for r in runs[:-1])
        earliest_size = runs[-1].run.total_size
        if candidate_size * 100 > self.max_size_amp * earliest_size:
            if self.early_full_compaction is not None:
                self.early_full_compaction.update_last_full_compaction()
            return CompactUnit.from_level_runs(max_level, runs)
        return None

    def pick_for_size_ratio(
        self, max_level: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        return self.pick_for_size_ratio_from(max_level, runs, 1)

    def pick_for_size_ratio_from(
        self,
        max_level: int,
        runs: Sequence[LevelSortedRun],
        candidate_count: int,
        force_pick: bool = False,
    ) -> CompactUnit | None:
        """Grow the first ``candidate_count`` runs while the next run is at most
        ``size_ratio`` (+ off-peak ratio) percent bigger than the candidates together. A bigger
        run at level 0 or 1 is still taken once a compaction is triggered (more than one run,
        or ``force_pick``): stopping there would output onto a level that is not free."""
        candidate_size = sum(r.run.total_size for r in runs[:candidate_count])
        triggered = force_pick or candidate_count > 1
        factor = (100.0 + self.size_ratio + self._ratio_for_off_peak()) / 100.0
        for nxt in runs[candidate_count:]:
            if candidate_size * factor < nxt.run.total_size and (
                not triggered or nxt.level > 1
            ):
                break
            candidate_size += nxt.run.total_size
            candidate_count += 1
            triggered = True
        return self.create_unit(runs, max_level, candidate_count) if triggered else None

    def force_pick_l0(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        """All level-0 runs (grown by size ratio): lookup needs level 0 emptied every time."""
        candidate_count = 0
        for r in runs:
            if r.level > 0:
                break
            candidate_count += 1
        if candidate_count == 0:
            return None
        return self.pick_for_size_ratio_from(num_levels - 1, runs, candidate_count, True)

    def create_unit(
        self, runs: Sequence[LevelSortedRun], max_level: int, run_count: int
    ) -> CompactUnit:
        """The first ``run_count`` runs, with the output-level rules of the module docstring."""
        if run_count == len(runs):
            output_level = max_level
        else:
            output_level = max(0, runs[run_count].level - 1)
        if output_level == 0:
            # Never output to level 0: take runs until one at a level >= 1 is included.
            for nxt in runs[run_count:]:
                run_count += 1
                if nxt.level != 0:
                    output_level = nxt.level
                    break
        if run_count == len(runs):
            if self.early_full_compaction is not None:
                self.early_full_compaction.update_last_full_compaction()
            output_level = max_level
        return CompactUnit.from_level_runs(output_level, runs[:run_count])

    def _ratio_for_off_peak(self) -> int:
        return 0 if self.offpeak is None else self.offpeak.current_ratio(self.clock().hour)


class ForceUpLevel0Compaction:
    """Universal compaction, and when it picks nothing, all level-0 files anyway: tables that
    need lookup (``changelog-producer = lookup``, ``first-row``) produce changelog and serve
    lookups only once rows leave level 0.

    ``max_compact_interval`` is Paimon's gentle lookup mode (``lookup-compact = gentle``): the
    forced pick happens only on every n-th call; this counter is state, like Paimon's.
    """

    def __init__(self, universal: UniversalCompaction, max_compact_interval: int | None = None):
        self.universal = universal
        self.max_compact_interval = max_compact_interval
        self._trigger_count = 0

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        unit = self.universal.pick(num_levels, runs)
        if unit is not None:
            return unit
        if self.max_compact_interval is None:
            return self.universal.force_pick_l0(num_levels, runs)
        self._trigger_count += 1
        if self._trigger_count == self.max_compact_interval:
            self._trigger_count = 0
            return self.universal.force_pick_l0(num_levels, runs)
        return None


def full_compaction(
    num_levels: int,
    runs: Sequence[LevelSortedRun],
    *,
    force_rewrite_all_files: bool = False,
    rewrite_if: Callable[[DataFileMeta], bool] | None = None,
) -> CompactUnit | None:
    """Paimon's ``CompactStrategy.pickFullCompaction``: every run to the max level.

    A bucket that is already one run at the max level needs no merge: nothing is picked,
    except a file-rewrite unit of the files that must still be rewritten one by one (all of
    them with ``force_rewrite_all_files``, else those matching ``rewrite_if``, which is where
    Paimon checks deletion vectors and record-level expiry).
    """
    max_level = num_levels - 1
    if not runs:
        return None
    if len(runs) == 1 and runs[0].level == max_level:
        files = [
            f for f in runs[0].run.files
            if force_rewrite_all_files or (rewrite_if is not None and rewrite_if(f))
        ]
        return CompactUnit.from_files(max_level, files, True) if files else None
    return CompactUnit.from_level_runs(max_level, runs)


def needs_lookup(options: CoreOptions) -> bool:
    """Paimon's ``LookupStrategy.needLookup`` for the options lakecore knows (no
    ``force-lookup``): lookup changelog, the first-row engine, or deletion vectors (a level-0
    row is invisible until a compaction lifts it and marks what it supersedes)."""
    return (
        options.changelog_producer is ChangelogProducer.LOOKUP
        or options.merge_engine is MergeEngine.FIRST_ROW
        or (options.deletion_vectors_enabled and bool(options.primary_keys))
    )


def create_compact_strategy(
    options: CoreOptions,
    clock: Clock = system_clock,
    restore_files: Iterable[DataFileMeta] = (),
) -> CompactStrategy:
    """The strategy a writer of this table uses (Paimon's
    ``MergeTreeCompactManagerFactory.createCompactStrategy``), seeded from the bucket's files."""
    universal = UniversalCompaction.from_options(
        options,
        clock,
        last_full_compaction=estimate_last_full_compaction_millis(
            restore_files, options.num_levels
        ),
    )
    if needs_lookup(options):
        # lookup-compact defaults to radical: force level 0 up on every pick.
        return ForceUpLevel0Compaction(universal, None)
    return universal
