"""UniversalCompaction, ForceUpLevel0Compaction, early full compaction, off-peak hours and
full compaction, on Paimon's reference cases (UniversalCompactionTest,
ForceUpLevel0CompactionTest, EarlyFullCompactionTest, OffPeakHoursTest) plus our own."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lakecore.compact import (
    EarlyFullCompaction,
    ForceUpLevel0Compaction,
    LevelSortedRun,
    OffPeakHours,
    SortedRun,
    UniversalCompaction,
    create_compact_strategy,
    full_compaction,
    needs_lookup,
)
from lakecore.format.manifest import creation_time_from_epoch_millis
from lakecore.options import CoreOptions
from tests.compact.helpers import FakeClock, file, level, level0, sizes_of


def universal(
    max_amp: int, ratio: int, trigger: int, *,
    offpeak: OffPeakHours | None = None, clock: FakeClock | None = None,
) -> UniversalCompaction:
    """Paimon's ``ofTesting``; the clock only matters for off-peak hours here."""
    return UniversalCompaction(max_amp, ratio, trigger, None, offpeak, clock or FakeClock())


def runs_at(*levels: int) -> list[LevelSortedRun]:
    return [LevelSortedRun(lvl, SortedRun.from_single(file(size=1))) for lvl in levels]


# --- output level ------------------------------------------------------------------------

@pytest.mark.parametrize("run_count, expected", [(1, 1), (2, 1), (3, 2), (4, 3), (5, 5)])
def test_output_level_is_below_next_run_and_never_zero(run_count: int, expected: int) -> None:
    # Paimon: UniversalCompactionTest.testOutputLevel (runs at levels 0, 0, 1, 3, 4; max 5)
    unit = universal(25, 1, 3).create_unit(runs_at(0, 0, 1, 3, 4), 5, run_count)
    assert unit.output_level == expected


def test_taking_every_run_outputs_to_max_level() -> None:
    unit = universal(25, 1, 3).create_unit(runs_at(0, 1), 7, 2)
    assert unit.output_level == 7


# --- pick: the three triggers ------------------------------------------------------------

def test_pick_by_size_amplification() -> None:
    # Paimon: UniversalCompactionTest.testPick (first case)
    unit = universal(25, 1, 3).pick(3, level0(1, 2, 3, 3))
    assert unit is not None and sizes_of(unit.files) == [1, 2, 3, 3]
    assert unit.output_level == 2


def test_pick_by_size_ratio() -> None:
    # Paimon: UniversalCompactionTest.testPick (second case)
    unit = universal(25, 1, 3).pick(4, [level(0, 1), level(1, 1), level(2, 1), level(3, 50)])
    assert unit is not None and sizes_of(unit.files) == [1, 1, 1]
    assert unit.output_level == 2


def test_pick_by_run_count_then_grown_by_size_ratio() -> None:
    # Paimon: UniversalCompactionTest.testPick (third case)
    unit = universal(25, 1, 3).pick(4, [level(0, 1), level(1, 2), level(2, 3), level(3, 50)])
    assert unit is not None and sizes_of(unit.files) == [1, 2, 3]


def test_nothing_below_trigger() -> None:
    assert universal(25, 1, 3).pick(3, [level(0, 100), level(2, 1)]) is None


@pytest.mark.parametrize(
    "runs, expected",
    [
        ([level(0, 1), level(0, 1), level(1, 1), level(2, 50)], [1, 1, 1]),
        ([level(0, 1), level(0, 2), level(1, 3), level(2, 50)], [1, 2, 3]),
    ],
)
def test_no_output_to_level0(runs: list[LevelSortedRun], expected: list[int]) -> None:
    # Paimon: UniversalCompactionTest.testNoOutputLevel0
    unit = universal(25, 1, 3).pick(3, runs)
    assert unit is not None and sizes_of(unit.files) == expected
    assert unit.output_level == 1


def test_file_num_compaction_considers_level2() -> None:
    # Paimon: UniversalCompactionTest.testFileNumCompactionConsidersLevel2
    unit = universal(200, 1, 3).pick(3, [level(0, 10), level(0, 20), level(1, 97), level(2, 100)])
    assert unit is not None and len(unit.files) == 4 and unit.output_level == 2


def test_extreme_case_no_output_level0() -> None:
    # Paimon: UniversalCompactionTest.testExtremeCaseNoOutputLevel0
    unit = universal(200, 1, 5).pick(6, level0(1, 1, 1, 1024, 1024 * 1024))
    assert unit is not None and sizes_of(unit.files) == [1, 1, 1, 1024, 1024 * 1024]
    assert unit.output_level == 5


# --- size amplification and size ratio, step by step ----------------------------------------

def _amp_step(c: UniversalCompaction, sizes: list[int]) -> list[int]:
    sizes = [1, *sizes]
    unit = c.pick_for_size_amp(3, level0(*sizes))
    return [sum(sizes_of(unit.files))] if unit is not None else sizes


def test_size_amplification_sequence() -> None:
    # Paimon: UniversalCompactionTest.testSizeAmplification (a new 1-byte run each step)
    expected = [
        [2], [3], [4], [1, 4], [6], [1, 6], [8], [1, 8], [1, 1, 8], [11], [1, 11],
        [1, 1, 11], [14], [1, 14], [1, 1, 14], [1, 1, 1, 14], [18],
    ]
    c, sizes = universal(25, 0, 1), [1]
    for want in expected:
        sizes = _amp_step(c, sizes)
        assert sizes == want


def _ratio_pick(c: UniversalCompaction, sizes: list[int]) -> list[int]:
    runs = [level(i, s) for i, s in enumerate(sizes)]
    unit = c.pick_for_size_ratio(len(sizes), runs)
    if unit is None:
        return sizes
    picked = sizes_of(unit.files)
    rest = list(sizes)
    for s in picked:
        rest.remove(s)
    return [sum(picked), *rest]


def test_size_ratio_sequence() -> None:
    # Paimon: UniversalCompactionTest.testSizeRatio
    expected = [
        [5], [1, 5], [1, 1, 5], [1, 1, 1, 5], [4, 5], [1, 4, 5], [1, 1, 4, 5], [3, 4, 5],
        [1, 3, 4, 5], [2, 3, 4, 5], [1, 2, 3, 4, 5], [16], [1, 16], [1, 1, 16],
        [1, 1, 1, 16], [4, 16], [1, 4, 16], [1, 1, 4, 16], [3, 4, 16], [1, 3, 4, 16],
        [2, 3, 4, 16], [1, 2, 3, 4, 16], [11, 16],
    ]
    c, sizes = universal(25, 1, 5), [1, 1, 1, 1]
    for want in expected:
        sizes = _ratio_pick(c, [1, *sizes])
        assert sizes == want


def test_size_ratio_threshold() -> None:
    # Paimon: UniversalCompactionTest.testSizeRatioThreshold
    assert _ratio_pick(universal(25, 10, 2), [8, 9, 10]) == [8, 9, 10]
    assert _ratio_pick(universal(25, 20, 2), [8, 9, 10]) == [27]


# --- off-peak hours ------------------------------------------------------------------------

def test_off_peak_normal_window() -> None:
    # Paimon: OffPeakHoursTest.testCurrentRatioNormalHours
    hours = OffPeakHours.create(2, 8, 10)
    assert hours is not None
    assert [hours.current_ratio(h) for h in (1, 2, 5, 7, 8, 9)] == [0, 10, 10, 10, 0, 0]


def test_off_peak_window_wraps_past_midnight() -> None:
    # Paimon: OffPeakHoursTest.testCurrentRatioOvernightHours
    hours = OffPeakHours.create(22, 6, 10)
    assert hours is not None
    assert [hours.current_ratio(h) for h in (21, 22, 23, 0, 5, 6, 10)] == [
        0, 10, 10, 10, 10, 0, 0
    ]


@pytest.mark.parametrize("start, end", [(-1, -1), (5, 5), (2, -1), (-1, 2)])
def test_off_peak_unset_or_empty(start: int, end: int) -> None:
    # Paimon: OffPeakHoursTest.testCreateWithInvalidHours / testCreateFromOptionsWithSameHour
    assert OffPeakHours.create(start, end, 10) is None


@pytest.mark.parametrize("hour, merged", [(21, False), (22, True), (0, True), (5, True),
                                          (6, False), (12, False)])
def test_off_peak_ratio_widens_size_ratio(hour: int, merged: bool) -> None:
    # size ratio 10 alone keeps [8, 9, 10] apart; +10 off-peak (22:00-06:00) merges them
    clock = FakeClock().at_hour(hour)
    c = universal(25, 10, 2, offpeak=OffPeakHours.create(22, 6, 10), clock=clock)
    assert _ratio_pick(c, [8, 9, 10]) == ([27] if merged else [8, 9, 10])


def test_off_peak_from_options() -> None:
    # Paimon: OffPeakHoursTest.testCreateFromOptions
    options = CoreOptions.from_map({"compaction.offpeak.start.hour": "22",
                                    "compaction.offpeak.end.hour": "6",
                                    "compaction.offpeak-ratio": "10"})
    c = UniversalCompaction.from_options(options, FakeClock())
    assert c.offpeak is not None
    assert (c.offpeak.current_ratio(23), c.offpeak.current_ratio(7)) == (10, 0)
    assert UniversalCompaction.from_options(CoreOptions.from_map({})).offpeak is None


# --- force up level 0 (lookup) -------------------------------------------------------------

def test_lookup_forces_level0_up() -> None:
    # Paimon: UniversalCompactionTest.testLookup
    c = ForceUpLevel0Compaction(universal(25, 1, 3))
    unit = c.pick(3, level0(1, 2, 2, 2))  # level 0 to max level
    assert unit is not None and sizes_of(unit.files) == [1, 2, 2, 2] and unit.output_level == 2
    unit = c.pick(3, [level(0, 1), level(1, 2), level(2, 2)])  # forced, grown by ratio
    assert unit is not None and sizes_of(unit.files) == [1, 2, 2] and unit.output_level == 2
    unit = c.pick(3, [level(0, 1), level(2, 2)])  # level 0 to the empty level 1
    assert unit is not None and sizes_of(unit.files) == [1] and unit.output_level == 1


def test_gentle_lookup_forces_every_nth_pick() -> None:
    # Paimon: UniversalCompactionTest.testForcePickL0 (lookup-compact = gentle, interval 5)
    c = ForceUpLevel0Compaction(universal(25, 1, 5), max_compact_interval=5)
    cases = [
        (level0(1, 2, 2, 2), [1, 2, 2, 2], 2),
        ([level(0, 2), level(1, 2), level(2, 2)], [2, 2, 2], 2),
        ([level(0, 1), level(2, 2)], [1], 1),
    ]
    for runs, sizes, out in cases:
        for _ in range(4):
            assert c.pick(3, runs) is None
        unit = c.pick(3, runs)
        assert unit is not None and sizes_of(unit.files) == sizes and unit.output_level == out


@pytest.mark.parametrize(
    "runs, out",
    [
        ([level(0, 1), level(0, 1)], 2),
        ([level(0, 1), level(1, 10)], 2),
        ([level(0, 1), level(0, 5), level(2, 10)], 1),
        ([level(0, 1), level(0, 5), level(0, 10), level(0, 20)], 2),
    ],
)
def test_force_compaction0(runs: list[LevelSortedRun], out: int) -> None:
    # Paimon: ForceUpLevel0CompactionTest.testForceCompaction0
    unit = ForceUpLevel0Compaction(universal(200, 1, 5)).pick(3, runs)
    assert unit is not None and unit.output_level == out


def test_force_compaction0_nothing_without_level0() -> None:
    # Paimon: ForceUpLevel0CompactionTest.testForceCompaction0 (single level-2 run)
    assert ForceUpLevel0Compaction(universal(200, 1, 5)).pick(3, [level(2, 10)]) is None


@pytest.mark.parametrize("top, count, out", [(100, 3, 2), (102, 2, 1)])
def test_force_compaction0_considers_level2(top: int, count: int, out: int) -> None:
    # Paimon: ForceUpLevel0CompactionTest.testForceCompaction0ConsidersLevel2
    c = ForceUpLevel0Compaction(universal(200, 1, 5))
    unit = c.pick(3, [level(0, 1), level(1, 99), level(2, top)])
    assert unit is not None and len(unit.files) == count and unit.output_level == out


@pytest.mark.parametrize(
    "options, lookup",
    [({}, False), ({"changelog-producer": "lookup"}, True),
     ({"merge-engine": "first-row"}, True), ({"changelog-producer": "input"}, False)],
)
def test_strategy_for_table(options: dict[str, str], lookup: bool) -> None:
    core = CoreOptions.from_map(options, strict=False)
    assert needs_lookup(core) is lookup
    strategy = create_compact_strategy(core, FakeClock())
    assert isinstance(strategy, ForceUpLevel0Compaction if lookup else UniversalCompaction)


# --- full compaction -----------------------------------------------------------------------

def test_full_compaction_takes_everything_to_max_level() -> None:
    unit = full_compaction(3, [level(0, 1), level(1, 5)])
    assert unit is not None and unit.output_level == 2 and sizes_of(unit.files) == [1, 5]
    assert not unit.file_rewrite
    unit = full_compaction(3, [level(1, 5)])  # one run below the max level still moves
    assert unit is not None and unit.output_level == 2


def test_full_compaction_nothing_to_do() -> None:
    assert full_compaction(3, []) is None
    assert full_compaction(3, [level(2, 5)]) is None


def test_full_compaction_rewrites_marked_files_of_a_max_level_run() -> None:
    keep = file(0, 4, level=2, deletes=0)
    dirty = file(5, 9, level=2, deletes=3)
    runs = [LevelSortedRun(2, SortedRun((keep, dirty)))]
    unit = full_compaction(3, runs, rewrite_if=lambda f: bool(f.delete_row_count))
    assert unit is not None and unit.file_rewrite and unit.files == (dirty,)
    unit = full_compaction(3, runs, force_rewrite_all_files=True)
    assert unit is not None and unit.file_rewrite and unit.files == (keep, dirty)


def test_early_full_compaction_from_options_is_optional() -> None:
    # Paimon: EarlyFullCompactionTest.testCreateNoOptions / testCreateWithInterval / ...Both
    assert UniversalCompaction.from_options(CoreOptions.from_map({})).early_full_compaction is None
    c = UniversalCompaction.from_options(CoreOptions.from_map(
        {"compaction.optimization-interval": "1 h", "compaction.total-size-threshold": "100 mb"}
    ))
    early = c.early_full_compaction
    assert isinstance(early, EarlyFullCompaction)
    assert early.interval_millis == timedelta(hours=1) // timedelta(milliseconds=1)
    assert early.total_size_threshold == 100 << 20


def test_strategy_seeds_interval_from_newest_max_level_file() -> None:
    # Paimon: EarlyFullCompactionTest.testIntervalDoesNotRetriggerWhenSeededRecent /
    # testIntervalTriggersWhenSeededOld, through MergeTreeCompactManagerFactory's estimate
    options = CoreOptions.from_map({"compaction.optimization-interval": "1 h",
                                    "num-sorted-run.compaction-trigger": "5"})
    now = 10 * 3_600_000
    runs = [level(0, 1), level(5, 10)]
    for age_min, fires in [(10, False), (61, True)]:
        created = creation_time_from_epoch_millis(now - age_min * 60_000)
        restored = [file(level=5, created=created)]
        strategy = create_compact_strategy(options, FakeClock().at_millis(now), restored)
        assert (strategy.pick(6, runs) is not None) is fires


def test_empty_bucket_picks_nothing() -> None:
    clock = FakeClock()
    early = EarlyFullCompaction(timedelta(hours=1), clock=clock)
    assert UniversalCompaction(25, 1, 1, early, None, clock).pick(3, []) is None
    assert ForceUpLevel0Compaction(universal(25, 1, 1)).pick(3, []) is None
